package replay

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/windowd/windowd/config"
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
//     the clock, counts, dead letters); each record's worker is a hash of
//     its key (keyWorker);
//  4. run: every worker walks the whole chunk in order: Record for the
//     records of its keys, Observe for the others' and Tick for clock
//     lines, so every engine has one engine's frontier at every line
//     (windowing.Engine.Observe), handing its panes and drops to the
//     writer in pieces (pieces.go).
//
// Steps 1 to 3 are in chunks.go. The writer goroutine writes each chunk's
// output in order: its dead letters, then each worker's pieces, worker
// after worker. A key's panes are in the order one engine emits them, and
// the output is the same from run to run for the same number of workers;
// across keys it differs from one engine's order. Reading a chunk,
// decoding the next and running the ones before overlap.

const (
	chunkLines = 4096 // lines per chunk
	chunkBytes = 1 << 20
	// inFlight chunks at most: one being read, one decoding, the rest
	// with the workers and the writer.
	inFlight = 4
	// MaxWorkers bounds Options.Workers.
	MaxWorkers = config.MaxWorkers
)

// workers returns the number of engines a replay runs: 1 when it
// repartitions (one process's replay of both stages keeps one engine).
func workers(opts *Options) int {
	if opts.Workers <= 1 || opts.Pipeline.Repartition != nil || opts.Pipeline.Join != nil {
		return 1
	}
	return min(opts.Workers, MaxWorkers)
}

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
	c.stats[w.id] = w.eng.Stats()
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
		f.free <- &chunk{pieces: make([]chan *piece, workers), stats: make([]windowing.Stats, workers)}
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
// Pebble directories under dir, and returns their counts summed.
func (r *runner) runWorkers(dir string, wmSpec watermark.Spec) (windowing.Stats, error) {
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
			return windowing.Stats{}, err
		}
		defer db.Close()
		w := &worker{id: int32(i), em: newEmitter(p, r.opts.Partitions), cur: pieces.Get().(*piece)}
		w.em.out, w.em.errs = pieceWriter{w: w}, pieceWriter{w: w, err: true}
		// The cache budget and the uncommitted writes' are shared: the
		// workers' windows take what one engine's would.
		opts := windowing.Options{CacheBytes: max(cache/n, 1), MaxPendingBytes: max(windowing.DefaultMaxPendingBytes/n, 1), CommitWhenPending: true}
		if w.eng, err = windowing.New(p.Spec, wmSpec, db, &w.em, opts); err != nil {
			return windowing.Stats{}, err
		}
		w.em.eng = w.eng
		assignAll(w.eng, p, r.opts.Partitions)
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
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for c := range toWriter {
			st = r.write(f, c)
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
	return st, f.err
}
