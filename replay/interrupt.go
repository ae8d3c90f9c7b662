package replay

import (
	"context"
	"io"
)

// Interruptible returns a reader of r whose reads return ctx's error once
// ctx is done, even while r blocks (standard input with nothing to read):
// a replay interrupted by a signal then returns, and Run removes its state
// directory (docs/SEMANTICS.md, Replay). Each read of r runs on a goroutine
// of its own; one left blocked after ctx is done is abandoned.
func Interruptible(ctx context.Context, r io.Reader) io.Reader {
	return &ctxReader{ctx: ctx, r: r, res: make(chan readResult, 1)}
}

type readResult struct {
	n   int
	err error
}

type ctxReader struct {
	ctx     context.Context
	r       io.Reader
	res     chan readResult
	buf     []byte
	pending bool // a read of r into buf is under way
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !c.pending {
		if cap(c.buf) < len(p) {
			c.buf = make([]byte, len(p))
		}
		buf := c.buf[:len(p)]
		c.pending = true
		go func() {
			n, err := c.r.Read(buf)
			c.res <- readResult{n, err}
		}()
	}
	select {
	case rr := <-c.res:
		c.pending = false
		// A read asked for at most the len(p) of the Read that started it,
		// and a later Read's p may be shorter: keep what does not fit.
		n := copy(p, c.buf[:rr.n])
		if n < rr.n {
			c.rest(n, rr)
			return n, nil
		}
		return n, rr.err
	case <-c.ctx.Done():
		return 0, c.ctx.Err()
	}
}

// rest keeps the part of a finished read that p had no room for: it is
// handed out as a finished read again.
func (c *ctxReader) rest(n int, rr readResult) {
	left := append([]byte(nil), c.buf[n:rr.n]...)
	copy(c.buf, left)
	c.pending = true
	c.res <- readResult{len(left), rr.err}
}
