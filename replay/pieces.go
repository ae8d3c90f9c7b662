package replay

import (
	"bytes"
	"sync"

	"github.com/windowd/windowd/windowing"
)

// A worker's output on its way out: pieces of it, and the writer that
// writes them in order (workers.go).

// piece is a run of a worker's output: its panes and its late and
// out-of-range records. A worker sends a piece to the writer once it holds
// pieceBytes (also in the middle of an engine step: a frontier step may
// fire millions of windows), and at the end of a chunk; the writer writes
// a chunk's pieces worker after worker. A worker whose pieces the writer
// is not at yet waits once pieceQueue of them are queued, so a worker's
// output in memory stays bounded.
type piece struct {
	out, errs bytes.Buffer
}

const (
	pieceBytes = 256 << 10
	pieceQueue = 2
)

var pieces = sync.Pool{New: func() any { return new(piece) }}

// pieceWriter is a worker's output or error stream (an emitter's).
type pieceWriter struct {
	w   *worker
	err bool // the error stream
}

func (pw pieceWriter) Write(b []byte) (int, error) {
	w := pw.w
	if pw.err {
		w.cur.errs.Write(b)
	} else {
		w.cur.out.Write(b)
	}
	if w.cur.out.Len()+w.cur.errs.Len() >= pieceBytes {
		w.send()
	}
	return len(b), nil
}

// write writes chunk c's output as its workers send it (c.dead, then
// each worker's pieces in turn) and, once they all ran it, the progress
// line and the live counts; it returns the workers' counts after c. After
// a failure it only drains the pieces, so that no worker waits on them.
func (r *runner) write(f *flow, c *chunk) windowing.Stats {
	if !f.failed.Load() {
		if _, err := r.errs.Write(c.dead.Bytes()); err != nil {
			f.fail(err)
		}
	}
	for _, ch := range c.pieces {
		for p := range ch {
			if !f.failed.Load() {
				if err := r.writePiece(p); err != nil {
					f.fail(err)
				}
			}
			p.out.Reset()
			p.errs.Reset()
			pieces.Put(p)
		}
	}
	c.ran.Wait()
	var st windowing.Stats
	for i := range c.stats {
		s := c.stats[i]
		st.Records += s.Records
		st.LateDropped += s.LateDropped
		st.OutOfRange += s.OutOfRange
		for k := range st.Panes {
			st.Panes[k] += s.Panes[k]
		}
		st.Retractions += s.Retractions
		st.Evictions += s.Evictions
		st.Discarded += s.Discarded
	}
	st.QuietAdvances = c.stats[0].QuietAdvances // every worker made the same steps
	if f.failed.Load() {
		return st
	}
	if r.opts.Progress {
		if err := r.progress(c.f, st); err != nil {
			f.fail(err)
		}
	}
	if r.opts.Live != nil {
		r.publish(&c.sum, c.f, st)
	}
	return st
}

// writePiece writes a worker's piece: its late and out-of-range records
// on the error stream, its panes on the output (straight from the piece's
// buffer, not copied through r.out's, when it is the larger).
func (r *runner) writePiece(p *piece) error {
	if _, err := r.errs.Write(p.errs.Bytes()); err != nil {
		return err
	}
	b := p.out.Bytes()
	if len(b) < r.out.Available() {
		_, err := r.out.Write(b)
		return err
	}
	if err := r.out.Flush(); err != nil {
		return err
	}
	_, err := r.opts.Out.Write(b)
	return err
}
