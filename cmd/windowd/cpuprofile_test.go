package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// `windowd run --cpu-profile FILE` writes a CPU profile of the whole run,
// complete once windowd has stopped: a gzipped pprof profile of CPU
// samples (what `go tool pprof` and bench/pgo.sh read). A file it cannot
// create stops it before it starts, with the reason.
func TestRunCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.pprof")
	t.Run("run", func(t *testing.T) {
		// The quickstart's generator feeds the pipeline, here at 20,000
		// records a second: at its 50, the pipeline's CPU in the half
		// second the test waited was a few milliseconds, and a CI run's
		// profile held no sample of it (the profile samples 100 times a
		// CPU second).
		base := startQuickstartRun(t, [][2]string{{"rate: 50 ", "rate: 20000 "}}, "--cpu-profile", path)
		deadline := time.Now().Add(30 * time.Second)
		for !(metricsFrontier(t, base) > 0) {
			if time.Now().After(deadline) {
				t.Fatal("no frontier within 30 s")
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(2 * time.Second)
	}) // its cleanup stops windowd
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("the profile is not gzipped (pprof's format): %v", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("the profile is cut short (not closed when windowd stopped?): %v", err)
	}
	for _, s := range []string{"samples", "cpu", "nanoseconds", "windowd/windowd/service."} {
		if !bytes.Contains(raw, []byte(s)) {
			t.Errorf("the profile names no %q: not a CPU profile of the run", s)
		}
	}

	code, _, errs := runCLI(t, "", "run", "--config", "../../configs/quickstart.yaml", "--cpu-profile", filepath.Join(t.TempDir(), "no-such-dir", "p"))
	if code != 2 || !strings.Contains(errs, "--cpu-profile") || !strings.Contains(errs, "no such file or directory") {
		t.Errorf("an uncreatable profile file: exit %d, stderr %q; want 2 and the reason", code, errs)
	}
}
