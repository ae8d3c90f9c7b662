package replay

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// A replay with workers (Options.Workers > 1) spreads its keys over as many
// engines, each on a goroutine of its own with a Pebble store of its own
// (docs/SEMANTICS.md, Replay, "Workers"). The input is cut into chunks of
// lines, and a chunk goes through four steps:
//
//  1. read: this goroutine reads the chunk's lines into its buffer;
//  2. decode: the decoders read the lines (lineDecoder.read), each a share
//     of them, in parallel; when the pipeline's records depend on their
//     offset or processing time (an expression, max_future), this
//     goroutine reads them in order in step 3 instead;
//  3. settle: this goroutine settles the lines in input order (offsets,
//     the clock, counts, dead letters) and names each record's worker, a
//     hash of its key;
//  4. run: every worker walks the whole chunk in order: Record for the
//     records of its keys, Observe for the others' and Tick for clock
//     lines, so every engine has one engine's frontier at every line
//     (windowing.Engine.Observe), writing its panes and drops into a
//     buffer of the chunk's of its own.
//
// The writer goroutine writes each chunk's output once every worker has
// run it, chunk after chunk: the dead letters, then each worker's late
// records and panes, in worker order. A key's panes are in the order one
// engine emits them, and the output is the same from run to run for the
// same number of workers; across keys it differs from one engine's order.
// Reading a chunk, decoding the next and running the ones before overlap.

const (
	chunkLines = 4096 // lines per chunk
	chunkBytes = 1 << 20
	// inFlight chunks at most: one being read, one decoding, the rest
	// with the workers and the writer.
	inFlight = 4
	// MaxWorkers bounds Options.Workers.
	MaxWorkers = 64
)

// workers returns the number of engines a replay runs: 1 when it
// repartitions (one process's replay of both stages keeps one engine).
func workers(opts *Options) int {
	if opts.Workers <= 1 || opts.Pipeline.Repartition != nil {
		return 1
	}
	return min(opts.Workers, MaxWorkers)
}

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
	oor    []int64 // per worker: records dead-lettered as out of range, so far
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

func (c *chunk) text(l *chunkLine) []byte { return c.buf[l.start:l.end] }

// worker is one of a replay's engines.
type worker struct {
	id  int32
	em  emitter
	eng *windowing.Engine
	cur *piece      // the output being filled
	to  chan *piece // the current chunk's pieces
}

// send hands the piece being filled to the writer.
func (w *worker) send() {
	if w.cur.out.Len()+w.cur.errs.Len() == 0 {
		return
	}
	w.to <- w.cur
	w.cur = pieces.Get().(*piece)
}

// run is step 4 for chunk c.
func (w *worker) run(c *chunk) error {
	w.to = c.pieces[w.id]
	defer func() {
		w.send()
		close(w.to)
	}()
	for i := range c.steps {
		s := &c.steps[i]
		var err error
		switch {
		case s.worker == -1:
			err = w.eng.Tick(s.t)
		case s.worker == w.id:
			l := &c.lines[i]
			w.em.line, w.em.cur = l.n, c.text(l)
			err = w.eng.Record(&c.outs[i].ev, s.now)
		case s.worker >= 0:
			err = w.eng.Observe(s.part, s.t, s.now)
		default:
			continue
		}
		if err != nil {
			return err
		}
		if err := w.checkpoint(); err != nil {
			return err
		}
	}
	if c.last {
		if err := w.eng.Finish(); err != nil {
			return err
		}
		if err := w.eng.Checkpoint(false); err != nil {
			return err
		}
	}
	c.stats[w.id], c.oor[w.id] = w.eng.Stats(), w.em.outOfRange
	if w.id == 0 {
		c.f = w.eng.Frontier()
	}
	return nil
}

// checkpoint commits the engine's state when it passes its budget: as in
// one engine's replay (lines), Pebble commits only to bound memory.
func (w *worker) checkpoint() error {
	if w.eng.NeedsCheckpoint() {
		return w.eng.Checkpoint(false)
	}
	return nil
}

// keyWorker is the worker of key among n: FNV-1a, so a replay's output
// is the same from run to run.
func keyWorker(key string, n int) int32 {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return int32(h % uint32(n))
}

// flow is what the goroutines of a parallel replay share: the chunks not
// in use and the first failure, which stops them all.
type flow struct {
	free   chan *chunk
	failed atomic.Bool
	mu     sync.Mutex
	err    error // the first failure
}

// newFlow returns a flow with inFlight chunks for workers workers.
func newFlow(workers int) *flow {
	f := &flow{free: make(chan *chunk, inFlight)}
	for range inFlight {
		f.free <- &chunk{pieces: make([]chan *piece, workers), stats: make([]windowing.Stats, workers), oor: make([]int64, workers)}
	}
	return f
}

// fail records err, when it is the first, and stops the flow.
func (f *flow) fail(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
	f.failed.Store(true)
}

// runWorkers replays the input with workers(r.opts) engines, their
// Pebble directories under dir, and returns their counts summed and the
// records they dead-lettered as out of range.
func (r *runner) runWorkers(dir string, wmSpec watermark.Spec) (windowing.Stats, int64, error) {
	n := workers(&r.opts)
	p := r.opts.Pipeline
	cache := r.opts.CacheBytes
	if cache <= 0 {
		cache = int(windowing.DefaultCacheBytes)
	}
	ws := make([]*worker, n)
	for i := range ws {
		// Pebble's caches and memtables are shared too: the workers'
		// stores hold about what one store would (state.PebbleMemoryBytes),
		// at least 4 MiB each.
		db, err := state.Open(filepath.Join(dir, fmt.Sprint(i)), state.Options{FS: r.opts.FS, Ephemeral: true,
			BlockCacheBytes: max(state.DefaultBlockCacheBytes/int64(n), 4<<20), MemTableBytes: max(state.DefaultMemTableBytes/int64(n), 4<<20)})
		if err != nil {
			return windowing.Stats{}, 0, err
		}
		defer db.Close()
		w := &worker{id: int32(i), em: newEmitter(p), cur: pieces.Get().(*piece)}
		w.em.out, w.em.errs = pieceWriter{w: w}, pieceWriter{w: w, err: true}
		// The cache budget and the uncommitted writes' are shared: the
		// workers' windows take what one engine's would.
		opts := windowing.Options{CacheBytes: max(cache/n, 1), MaxPendingBytes: max(windowing.DefaultMaxPendingBytes/n, 1), CommitWhenPending: true}
		if w.eng, err = windowing.New(p.Spec, wmSpec, db, &w.em, opts); err != nil {
			return windowing.Stats{}, 0, err
		}
		w.em.eng = w.eng
		for q := 0; q < r.opts.Partitions; q++ {
			w.eng.Assign(int32(q), 0, true)
		}
		ws[i] = w
	}

	f := newFlow(n)
	var wg sync.WaitGroup
	// Step 4: the workers.
	runIn := make([]chan *chunk, n)
	for i, w := range ws {
		runIn[i] = make(chan *chunk, inFlight)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range runIn[i] {
				if f.failed.Load() {
					close(c.pieces[i])
				} else if err := w.run(c); err != nil {
					f.fail(err)
				}
				c.ran.Done()
			}
		}()
	}
	// The writer.
	toWriter := make(chan *chunk, inFlight)
	var st windowing.Stats
	var outOfRange int64
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for c := range toWriter {
			st, outOfRange = r.write(f, c)
			f.free <- c
		}
	}()
	if err := r.read(f, n, func(c *chunk) {
		c.ran.Add(n)
		toWriter <- c
		for i := range runIn {
			runIn[i] <- c
		}
	}); err != nil {
		f.fail(err)
	}
	for _, in := range runIn {
		close(in)
	}
	wg.Wait()
	close(toWriter)
	<-wrote
	return st, outOfRange, f.err
}

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
		d.dec.HoldsEvents()
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

// write writes chunk c's output as its workers send it (c.dead, then
// each worker's pieces in turn) and, once they all ran it, the progress
// line and the live counts; it returns the workers' counts after c and
// the records they dead-lettered as out of range. After a failure it only
// drains the pieces, so that no worker waits on them.
func (r *runner) write(f *flow, c *chunk) (windowing.Stats, int64) {
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
	var oor int64
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
		oor += c.oor[i]
	}
	st.QuietAdvances = c.stats[0].QuietAdvances // every worker made the same steps
	if f.failed.Load() {
		return st, oor
	}
	if r.opts.Progress {
		if err := r.progress(c.f, st); err != nil {
			f.fail(err)
		}
	}
	if r.opts.Live != nil {
		r.publish(&c.sum, c.f, st, oor)
	}
	return st, oor
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
