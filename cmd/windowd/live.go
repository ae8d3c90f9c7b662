package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/windowd/windowd/replay"
	"github.com/windowd/windowd/service"
	"github.com/windowd/windowd/watermark"
)

// replay's live status line (docs/OPERATIONS.md, Replay): drawn on stderr
// only when stderr is a terminal, redrawn in place, erased before any other
// line reaches the terminal and at the end, so what scripts read from a
// pipe or a file is unchanged.

// liveInterval is how often the status line is redrawn.
const liveInterval = 250 * time.Millisecond

// isTerminal reports whether f is a terminal: a character device other
// than /dev/null (a pipe or a regular file is not).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	if null, err := os.Stat(os.DevNull); err == nil && os.SameFile(fi, null) {
		return false
	}
	return true
}

// liveStatus draws the status line of a replay on a terminal. Writes of
// other lines to the same terminal go through passThrough, which erases
// the status line first and lets the next redraw bring it back.
type liveStatus struct {
	live *replay.Live
	read atomic.Int64 // input bytes read
	size int64        // input bytes; 0: unknown (standard input)
	now  func() time.Time

	start time.Time
	mu    sync.Mutex
	term  io.Writer
	shown bool // the status line is on the terminal
	mid   bool // a line written through is not complete yet: no redraw
	// records/s over the last redraws
	rateAt      time.Time
	rateRecords int64
	rate        float64
}

func newLiveStatus(term io.Writer, size int64, now func() time.Time) *liveStatus {
	t := now()
	return &liveStatus{live: replay.NewLive(), size: size, now: now, term: term, start: t, rateAt: t}
}

// text is the status line.
func (s *liveStatus) text(now time.Time) string {
	records := s.live.Records.Load()
	if d := now.Sub(s.rateAt); d >= time.Second {
		s.rate = float64(records-s.rateRecords) / d.Seconds()
		s.rateAt, s.rateRecords = now, records
	} else if s.rateAt == s.start && now.After(s.start) {
		s.rate = float64(records) / now.Sub(s.start).Seconds() // the first second
	}
	read := "read " + service.FormatBytes(s.read.Load())
	if s.size > 0 {
		read = fmt.Sprintf("%3.0f%% of %s", 100*min(1, float64(s.read.Load())/float64(s.size)), service.FormatBytes(s.size))
	}
	frontier := "none yet"
	switch f := s.live.Frontier.Load(); f {
	case watermark.MinTime:
	case watermark.MaxTime:
		frontier = "end of input"
	default:
		frontier = time.UnixMilli(f).UTC().Format("2006-01-02 15:04:05.000")
	}
	return fmt.Sprintf("replay %s · %d records, %.0f/s · frontier %s · %d panes · %d dead letters",
		read, records, s.rate, frontier, s.live.Panes.Load(), s.live.DeadLetters.Load())
}

// draw redraws the status line in place.
func (s *liveStatus) draw() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mid {
		return
	}
	_, _ = io.WriteString(s.term, "\r"+s.text(s.now())+"\x1b[K")
	s.shown = true
}

// erase takes the status line off the terminal (mu held).
func (s *liveStatus) erase() {
	if s.shown {
		_, _ = io.WriteString(s.term, "\r\x1b[K")
		s.shown = false
	}
}

// run redraws the status line until stop is closed, then erases it.
func (s *liveStatus) run(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(liveInterval)
	defer t.Stop()
	s.draw()
	for {
		select {
		case <-t.C:
			s.draw()
		case <-stop:
			s.draw() // the final counts, then off
			s.mu.Lock()
			s.erase()
			s.mu.Unlock()
			return
		}
	}
}

// passThrough is w (the terminal the status line is on) for other lines.
func (s *liveStatus) passThrough(w io.Writer) io.Writer { return &throughWriter{s: s, w: w} }

type throughWriter struct {
	s *liveStatus
	w io.Writer
}

func (t *throughWriter) Write(p []byte) (int, error) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	t.s.erase()
	n, err := t.w.Write(p)
	if n > 0 {
		t.s.mid = p[n-1] != '\n'
	}
	return n, err
}

// counted counts the bytes read from r into s.read.
func (s *liveStatus) counted(r io.Reader) io.Reader { return &countingReader{r: r, n: &s.read} }

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
