package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/windowd/windowd/watermark"
)

func TestLiveStatusLine(t *testing.T) {
	now := time.Unix(1000, 0)
	var term bytes.Buffer
	s := newLiveStatus(&term, 4000, func() time.Time { return now })
	s.draw()
	if got := term.String(); got != "\rreplay   0% of 3.9 KiB · 0 records, 0/s · frontier none yet · 0 panes · 0 dead letters\x1b[K" {
		t.Fatalf("first line %q", got)
	}
	now = now.Add(2 * time.Second)
	s.read.Store(1000)
	s.live.Records.Store(500)
	s.live.Panes.Store(7)
	s.live.DeadLetters.Store(2)
	s.live.Frontier.Store(1_700_000_000_000)
	term.Reset()
	s.draw()
	if want := "\rreplay  25% of 3.9 KiB · 500 records, 250/s · frontier 2023-11-14 22:13:20.000 · 7 panes · 2 dead letters\x1b[K"; term.String() != want {
		t.Errorf("line %q, want %q", term.String(), want)
	}

	// Another line erases the status line first; a partial line holds
	// the redraw until it is complete.
	w := s.passThrough(&term)
	term.Reset()
	_, _ = w.Write([]byte(`{"dead_letter":`))
	s.draw()
	_, _ = w.Write([]byte("{}}\n"))
	if got := term.String(); got != "\r\x1b[K"+`{"dead_letter":{}}`+"\n" {
		t.Errorf("through the status line: %q", got)
	}
	term.Reset()
	s.live.Frontier.Store(watermark.MaxTime)
	s.draw()
	if !strings.Contains(term.String(), "frontier end of input") {
		t.Errorf("after the line: %q", term.String())
	}
	// Standard input: no size, bytes read.
	u := newLiveStatus(&term, 0, func() time.Time { return now })
	u.read.Store(3 << 20)
	if got := u.text(now); !strings.HasPrefix(got, "replay read 3.0 MiB · ") {
		t.Errorf("without a size: %q", got)
	}
}

// TestReplayStatusOnlyOnTerminal: with stderr a file (or a pipe, or
// /dev/null) replay writes exactly the dead letters and the summary;
// on a terminal the status line is drawn and erased around them, and the
// panes are the same.
func TestReplayStatusOnlyOnTerminal(t *testing.T) {
	args := []string{"replay", "--config", "../../configs/replay-example.yaml", "--input", "../../testdata/page-views.jsonl"}
	dir := t.TempDir()
	errFile, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	var out bytes.Buffer
	if code := run(args, strings.NewReader(""), &out, errFile); code != 0 {
		t.Fatalf("exit %d", code)
	}
	b, _ := os.ReadFile(errFile.Name())
	if bytes.Contains(b, []byte("\r")) || bytes.Contains(b, []byte("replay ")) || !bytes.HasPrefix(b, []byte(`{"dead_letter":`)) {
		t.Errorf("stderr a file: %q", b)
	}
	for _, f := range []string{os.DevNull} {
		null, err := os.OpenFile(f, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if isTerminal(null) {
			t.Errorf("%s taken for a terminal", f)
		}
		null.Close()
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if isTerminal(w) {
		t.Errorf("a pipe taken for a terminal")
	}
	r.Close()
	w.Close()

	master, tty := openPTY(t)
	if !isTerminal(tty) {
		t.Fatalf("%s not taken for a terminal", tty.Name())
	}
	got := make(chan []byte)
	go func() {
		var all bytes.Buffer
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			all.Write(buf[:n])
			if err != nil || bytes.Contains(all.Bytes(), []byte(`{"summary":`)) && bytes.HasSuffix(all.Bytes(), []byte("\n")) {
				break
			}
		}
		got <- all.Bytes()
	}()
	var ttyOut bytes.Buffer
	if code := run(args, strings.NewReader(""), &ttyOut, tty); code != 0 {
		t.Fatalf("on a terminal: exit %d", code)
	}
	var screen []byte
	select {
	case screen = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("nothing read from the terminal")
	}
	if ttyOut.String() != out.String() {
		t.Errorf("panes differ on a terminal:\n%s\nwant\n%s", ttyOut.String(), out.String())
	}
	s := string(screen)
	for _, want := range []string{"replay 100% of", "frontier end of input", "7 panes", "2 dead letters", "\r\x1b[K{\"summary\":"} {
		if !strings.Contains(s, want) {
			t.Errorf("terminal lacks %q:\n%q", want, s)
		}
	}
}
