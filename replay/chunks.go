package replay

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/windowd/windowd/windowing"
)

// Steps 1 to 3 of a replay with workers (workers.go): the input read into
// chunks of lines, decoded, and settled in order.

// chunk is a run of input lines on their way to the workers.
type chunk struct {
	buf   []byte      // the lines' text
	lines []chunkLine // the lines, in order
	outs  []lineOut   // their results, one per line
	steps []step      // what every worker reads of them, one per line
	read  int64       // lines read through the chunk's end (Summary.Lines)
	last  bool        // the end of the input: the workers Finish after it

	decoded sync.WaitGroup // the decoders
	ran     sync.WaitGroup // the workers

	dead   bytes.Buffer  // dead letters settled by this goroutine
	pieces []chan *piece // per worker: its output, as it goes
	stats  []windowing.Stats
	f      int64   // the frontier after the chunk
	sum    Summary // the counts settled, after the chunk
}

// chunkLine is one non-blank line of a chunk.
type chunkLine struct {
	start, end int   // the line's text in buf
	n          int64 // its line number
	tooLong    bool  // the line is longer than MaxLineBytes; buf holds its start
	at, size   int64 // tooLong: where it starts and its length
}

// step is what every worker reads of a settled line: a record's worker
// (a hash of its key), partition and event time, or a clock line's time;
// the processing time at it.
type step struct {
	t, now int64
	part   int32
	worker int32 // the record's worker; -1: every worker (a clock line); -2: none
}

func (c *chunk) text(l *chunkLine) []byte { return c.buf[l.start:l.end] }

// read runs steps 1 to 3 on this goroutine, with up to decoders decoders
// for step 2, and hands each settled chunk to take, in order.
func (r *runner) read(f *flow, decoders int, take func(*chunk)) error {
	// A chunk's events live until its workers ran it: HoldsEvents. When
	// the lines' order matters, one decoder, in step 3.
	var decs []*lineDecoder
	for range decoders {
		d, err := newLineDecoder(&r.opts)
		if err != nil {
			return err
		}
		for _, dec := range d.decs {
			dec.HoldsEvents()
		}
		decs = append(decs, d)
		if !d.orderFree() {
			break
		}
	}
	var wg sync.WaitGroup
	type share struct {
		c      *chunk
		lo, hi int
	}
	var decodeIn []chan share
	if len(decs) > 1 {
		for _, d := range decs {
			in := make(chan share, inFlight)
			decodeIn = append(decodeIn, in)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for sh := range in {
					if !f.failed.Load() {
						if err := decodeLines(d, sh.c, sh.lo, sh.hi, nil); err != nil {
							f.fail(err)
						}
					}
					sh.c.decoded.Done()
				}
			}()
		}
	}
	defer func() {
		for _, in := range decodeIn {
			close(in)
		}
		wg.Wait()
	}()
	decode := func(c *chunk) {
		if len(decodeIn) == 0 {
			return
		}
		per := (len(c.lines) + len(decs) - 1) / len(decs)
		c.decoded.Add(len(decs))
		for i, in := range decodeIn {
			in <- share{c, min(i*per, len(c.lines)), min((i+1)*per, len(c.lines))}
		}
	}
	settle := func(c *chunk) {
		c.decoded.Wait()
		if !f.failed.Load() {
			var seq *sequence
			if len(decodeIn) == 0 {
				seq = &r.set.seq // read in order, here
			}
			if err := r.settleChunk(decs[0], c, seq); err != nil {
				f.fail(err)
			}
		}
		c.sum = r.sum
		c.sum.Lines = c.read
		take(c)
	}
	return r.chunks(f.free, decode, settle, &f.failed)
}

// decodeLines reads lines lo to hi of c with d (step 2, or with seq, in
// order in step 3), and names the worker of each record.
func decodeLines(d *lineDecoder, c *chunk, lo, hi int, seq *sequence) error {
	for i := lo; i < hi; i++ {
		l, o := &c.lines[i], &c.outs[i]
		if l.tooLong {
			*o = lineOut{kind: lineDead, reason: fmt.Sprintf("line longer than %d MiB", MaxLineBytes>>20), part: -1, at: l.at, size: l.size}
		} else if err := d.read(c.text(l), o, seq); err != nil {
			return fmt.Errorf("line %d: %w", l.n, err)
		}
		if o.kind == lineRecord {
			c.steps[i].worker = keyWorker(o.ev.Key, len(c.pieces))
		}
	}
	return nil
}

// settleChunk is step 3 for c: with seq, it reads each line with d first.
func (r *runner) settleChunk(d *lineDecoder, c *chunk, seq *sequence) error {
	r.em.errs = &c.dead
	for i := range c.lines {
		l, o, s := &c.lines[i], &c.outs[i], &c.steps[i]
		if seq != nil {
			if err := decodeLines(d, c, i, i+1, seq); err != nil {
				return err
			}
		}
		feed, offset, err := r.set.settle(o, c.text(l), l.n, true)
		if err != nil {
			return err
		}
		o.ev.Offset = offset
		worker := s.worker // a record's, named in decodeLines
		*s = step{worker: -2, now: r.set.seq.now}
		if feed {
			s.worker, s.t = -1, o.clock
			if o.kind == lineRecord {
				s.worker, s.t, s.part = worker, o.ev.Time, o.ev.Partition
			}
		}
	}
	return nil
}

// chunks is step 1: it reads the input into chunks taken from free and
// hands each to decode once read and to settle one chunk later (so that
// reading, decoding and settling overlap); the last it settles is marked
// last.
func (r *runner) chunks(free chan *chunk, decode, settle func(*chunk), failed *atomic.Bool) error {
	lr := newLineReader(r.opts.Input)
	var pending *chunk
	next := func() *chunk {
		c := <-free
		c.buf, c.lines, c.last = c.buf[:0], c.lines[:0], false
		c.dead.Reset()
		for i := range c.pieces {
			c.pieces[i] = make(chan *piece, pieceQueue)
		}
		return c
	}
	hand := func(c *chunk) {
		if cap(c.outs) < len(c.lines) {
			c.outs = make([]lineOut, len(c.lines), max(len(c.lines), chunkLines))
			c.steps = make([]step, len(c.lines), max(len(c.lines), chunkLines))
		}
		c.outs, c.steps = c.outs[:len(c.lines)], c.steps[:len(c.lines)]
		c.read = r.sum.Lines
		decode(c)
		if pending != nil {
			settle(pending)
		}
		pending = c
	}
	c := next()
	err := r.eachLine(lr, func(line []byte, tooLong bool) (bool, error) {
		start := len(c.buf)
		if tooLong {
			c.buf = append(c.buf, lr.head...)
			c.lines = append(c.lines, chunkLine{start: start, end: len(c.buf), n: r.line, tooLong: true, at: lr.at, size: lr.size})
		} else {
			c.buf = append(c.buf, line...)
			c.lines = append(c.lines, chunkLine{start: start, end: len(c.buf), n: r.line})
		}
		if len(c.lines) >= chunkLines || len(c.buf) >= chunkBytes {
			hand(c)
			c = next()
		}
		return !failed.Load(), nil
	})
	c.last = err == nil
	hand(c)
	settle(pending)
	return err
}
