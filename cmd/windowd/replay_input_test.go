package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Standard input without --partitions is spooled at most spoolLimit bytes:
// past it replay stops with a message that says what to do, having
// printed nothing (docs/OPERATIONS.md, Limits).
func TestReplayStdinSpoolLimit(t *testing.T) {
	in, err := os.ReadFile("testdata/example_a.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer func(old int64) { spoolLimit = old }(spoolLimit)
	spoolLimit = int64(len(in)) - 1
	code, out, errs := runCLI(t, string(in), "replay", "--config", "testdata/example_a.yaml", "--input", "-")
	if code != 1 || out != "" || errs != fmt.Sprintf("windowd replay: standard input passes %d MiB, the most spooled to find the partition count: give --partitions N to stream it, or --input FILE (docs/OPERATIONS.md, Limits)\n", spoolLimit>>20) {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	spoolLimit = int64(len(in))
	if code, out, errs := runCLI(t, string(in), "replay", "--config", "testdata/example_a.yaml", "--input", "-"); code != 0 || out == "" {
		t.Fatalf("input of exactly the limit: exit %d, stderr %q", code, errs)
	}
	// With --partitions nothing is spooled.
	spoolLimit = 0
	if code, _, errs := runCLI(t, string(in), "replay", "--config", "testdata/example_a.yaml", "--input", "-", "--partitions", "1"); code != 0 {
		t.Fatalf("--partitions 1: exit %d, stderr %q", code, errs)
	}
}

// SIGINT (or SIGTERM) stops a replay blocked on standard input: exit 130,
// and its temporary state directory is removed.
func TestReplayInterruptRemovesState(t *testing.T) {
	stateDir := t.TempDir()
	pr, pw := io.Pipe()
	defer pw.Close()
	done := make(chan int, 1)
	var errs bytes.Buffer
	go func() {
		done <- run([]string{"replay", "--config", "testdata/example_a.yaml", "--input", "-", "--partitions", "1", "--state-dir", stateDir},
			pr, io.Discard, &errs)
	}()
	if _, err := pw.Write([]byte(`{"key":"k","value":{"ts":1000}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	// The state directory exists once Run started, after the signal
	// handler was installed.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if entries, _ := os.ReadDir(stateDir); len(entries) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("replay did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 130 || !strings.Contains(errs.String(), "windowd replay: interrupted; its temporary state is removed") {
			t.Fatalf("exit %d, stderr %q", code, errs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("replay did not stop on SIGINT")
	}
	if entries, _ := os.ReadDir(stateDir); len(entries) != 0 {
		t.Fatalf("state left behind: %v", entries)
	}
}
