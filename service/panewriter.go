package service

import (
	"github.com/windowd/windowd/windowing"
)

// Writing panes behind the loop: building a pane's output record (its JSON
// value and eight headers) and handing it to the producer was about a third
// of the poll loop with windows of one record. The loop copies each pane
// into a batch; a writer goroutine builds and produces the batches' records
// in the order the engine emitted them. A commit cycle first waits until
// every pane handed over is produced (sync), so a flush, a transaction's
// end or a rollback sees exactly the panes it saw before, and in which
// transaction a pane lands does not change.
const (
	// paneBatchLen is how many panes the loop hands over at a time.
	paneBatchLen = 256
	// paneBatchesQueued bounds the batches waiting for the writer: past it
	// the loop waits, so a slow producer holds back the engine as before.
	paneBatchesQueued = 16
)

// paneBatch is a batch of panes copied from the engine: pane i's values
// are values[ends[i-1]:ends[i]].
type paneBatch struct {
	panes  []windowing.Pane
	values []windowing.Value
	ends   []int
	sync   chan struct{} // not nil: no panes; closed once the batches before it are written
}

// paneWriter hands panes to write, on a goroutine of its own unless
// inline (then write is called at once). add, flush and
// sync are called by one side at a time (the pipeline's mu).
type paneWriter struct {
	write  func(*windowing.Pane) // builds and produces a pane's record
	inline bool

	cur     *paneBatch
	work    chan *paneBatch // nil until the first pane
	free    chan *paneBatch // written batches, for reuse
	stopped chan struct{}
}

func newPaneWriter(write func(*windowing.Pane), inline bool) *paneWriter {
	return &paneWriter{write: write, inline: inline}
}

// add hands over a copy of pn: it is written after the panes added before
// it. pn (and its Values) may be reused once add returns.
func (w *paneWriter) add(pn *windowing.Pane) {
	if w.inline {
		w.write(pn)
		return
	}
	if w.work == nil {
		w.work = make(chan *paneBatch, paneBatchesQueued)
		w.free = make(chan *paneBatch, paneBatchesQueued+2)
		w.stopped = make(chan struct{})
		go w.run()
	}
	if w.cur == nil {
		select {
		case w.cur = <-w.free:
			w.cur.panes, w.cur.values, w.cur.ends = w.cur.panes[:0], w.cur.values[:0], w.cur.ends[:0]
		default:
			w.cur = &paneBatch{}
		}
	}
	b := w.cur
	c := *pn
	c.Values = nil
	b.panes = append(b.panes, c)
	b.values = append(b.values, pn.Values...)
	b.ends = append(b.ends, len(b.values))
	if len(b.panes) >= paneBatchLen {
		w.flush()
	}
}

// flush hands over the panes added since the last flush without waiting
// for them to be written.
func (w *paneWriter) flush() {
	if w.cur != nil && len(w.cur.panes) > 0 {
		w.work <- w.cur
		w.cur = nil
	}
}

// sync returns once every pane added so far has been written (handed to
// the producer).
func (w *paneWriter) sync() {
	if w.work == nil {
		return
	}
	w.flush()
	done := make(chan struct{})
	w.work <- &paneBatch{sync: done}
	<-done
}

// stop writes what was added and ends the goroutine.
func (w *paneWriter) stop() {
	if w.work == nil {
		return
	}
	w.flush()
	close(w.work)
	<-w.stopped
	w.work = nil
}

func (w *paneWriter) run() {
	defer close(w.stopped)
	for b := range w.work {
		if b.sync != nil {
			close(b.sync)
			continue
		}
		from := 0
		for i := range b.panes {
			pn := &b.panes[i]
			pn.Values = b.values[from:b.ends[i]:b.ends[i]]
			from = b.ends[i]
			w.write(pn)
		}
		clear(b.panes) // drop the keys until the batch is reused
		select {
		case w.free <- b:
		default:
		}
	}
}
