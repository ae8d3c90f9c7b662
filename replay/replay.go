// Package replay runs one pipeline over a JSON-lines file (docs/SEMANTICS.md,
// Replay) with the same engine as the Kafka service, printing panes to an
// output stream. Processing time starts at 0 and moves only through clock
// lines, so idleness and processing-time triggers replay deterministically.
//
// Invariants: a malformed line never stops a replay (it is dead-lettered
// with its line number and counted); panes are printed in emission order
// (with workers, workers.go: each key's; the panes are one engine's); at
// end of input the frontier becomes +infinity and every window fires.
package replay

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/schema"
	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// MaxLineBytes is the longest input line read; a longer one is dead-lettered.
const MaxLineBytes = 16 << 20

// MaxPartitions bounds the partitions of one replay (docs/OPERATIONS.md,
// Limits): --partitions, and the partition a line may name.
const MaxPartitions = config.MaxPartitions

// Options configure one replay.
type Options struct {
	Pipeline   *config.Pipeline
	Input      io.Reader
	Partitions int    // partitions 0..N-1; must be >= 1 (see ScanPartitions)
	StateDir   string // where the Pebble directory is made (removed afterwards); empty: the system's temporary directory
	FS         vfs.FS // nil: the OS; else (tests pass vfs.NewMem()) StateDir, or "replay", is the Pebble directory itself
	CacheBytes int    // window cache budget; 0: the pipeline's default
	Out        io.Writer
	Errs       io.Writer // dead letters and dropped records, one JSON line each
	Live       *Live     // nil: none; else updated as the replay runs (live.go)
	// Progress: print progress lines among the panes (progress.go).
	Progress bool
	// Workers is the number of engines the pipeline's keys are spread
	// over, each on a goroutine (workers.go); 0 or 1: one, and the panes
	// come in one engine's order. A repartitioning pipeline runs one.
	Workers int
	// Registry holds the schemas of an avro or protobuf pipeline, whose
	// lines' values are {"base64": "..."} (docs/SEMANTICS.md, Replay).
	Registry *schema.Registry
}

// Summary counts what a replay did.
type Summary struct {
	Lines       int64
	Records     int64
	Clocks      int64
	DeadLetters int64
	Filtered    int64 // records the pipeline's filter rejected
	LateDropped int64
	OutOfRange  int64 // records dead-lettered because their windows fall outside the int64 range
	Panes       int64
	Retractions int64
}

type runner struct {
	opts Options
	out  *bufio.Writer
	errs *bufio.Writer
	em   emitter // the engine's output (one replay goroutine; workers.go has one per worker)
	buf  []byte
	sum  Summary
	line int64 // the number of the line being handled
	set  settler
	rp   *repartitioner // nil unless the pipeline repartitions

	progressAt, progressPanes int64 // the frontier and pane count at the last progress line
}

// Run replays opts.Input through the pipeline and returns what it did. Bad
// lines are dead-lettered and do not stop it; an error means the replay
// itself failed (state, output).
func Run(opts Options) (Summary, error) {
	p := opts.Pipeline
	if opts.Partitions < 1 || opts.Partitions > MaxPartitions {
		return Summary{}, fmt.Errorf("replay: partitions must be between 1 and %d, got %d", MaxPartitions, opts.Partitions)
	}
	if opts.Progress && p.Spec.Window.Kind == windowing.CountWindow {
		return Summary{}, errors.New("replay: --progress says through which event time the panes are final; count windows have no event-time end")
	}
	dir := opts.StateDir
	if opts.FS != nil {
		if dir == "" {
			dir = "replay"
		}
	} else {
		// A directory of its own, under StateDir when given: a replay's
		// state starts empty, whatever an earlier replay into StateDir
		// left there (one killed midway leaves its windows and frontier,
		// which would turn this replay's records late).
		if dir != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return Summary{}, fmt.Errorf("replay: state dir: %w", err)
			}
		}
		tmp, err := os.MkdirTemp(dir, "windowd-replay-")
		if err != nil {
			return Summary{}, fmt.Errorf("replay: state dir: %w", err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	r := &runner{
		opts: opts,
		out:  bufio.NewWriterSize(opts.Out, 1<<16),
		errs: bufio.NewWriterSize(opts.Errs, 1<<12),
		em:   newEmitter(p, opts.Partitions),
	}
	r.em.out, r.em.errs = r.out, r.errs
	r.set = settler{sum: &r.sum, em: &r.em, layout: r.em.layout}
	wmSpec := p.Watermark
	if p.Repartition != nil {
		r.rp = newRepartitioner(p, opts.Partitions)
		r.em.rp = r.rp
		wmSpec = r.rp.downstreamSpec()
	}
	var st windowing.Stats
	var err error
	if p.Join != nil {
		st, err = r.runJoin(wmSpec)
	} else if workers(&opts) > 1 {
		st, err = r.runWorkers(dir, wmSpec)
	} else {
		st, err = r.runOne(dir, wmSpec)
	}
	if ferr := r.out.Flush(); err == nil {
		err = ferr
	}
	if ferr := r.errs.Flush(); err == nil {
		err = ferr
	}
	// A record without a representable window is a dead letter too.
	r.sum.DeadLetters += st.OutOfRange
	r.sum.LateDropped = st.LateDropped
	r.sum.OutOfRange = st.OutOfRange
	r.sum.Panes = st.Panes[0] + st.Panes[1] + st.Panes[2]
	r.sum.Retractions = st.Retractions
	return r.sum, err
}

// runJoin replays the input through p.Join's Joiner and returns its counts.
func (r *runner) runJoin(wmSpec watermark.Spec) (windowing.Stats, error) {
	je := newJoinEmitter(&r.em)
	j, err := windowing.NewJoiner(*r.opts.Pipeline.Join, wmSpec, je, windowing.JoinOptions{})
	if err != nil {
		return windowing.Stats{}, err
	}
	je.j = j
	err = r.run(j)
	return j.Stats(), err
}

// runOne replays the input with one engine, its Pebble directory dir, and
// returns the engine's counts.
func (r *runner) runOne(dir string, wmSpec watermark.Spec) (windowing.Stats, error) {
	db, err := state.Open(dir, state.Options{FS: r.opts.FS, Ephemeral: true})
	if err != nil {
		return windowing.Stats{}, err
	}
	defer db.Close()
	eng, err := windowing.New(r.opts.Pipeline.Spec, wmSpec, db, &r.em, windowing.Options{CacheBytes: r.opts.CacheBytes, CommitWhenPending: true})
	if err != nil {
		return windowing.Stats{}, err
	}
	r.em.eng = eng
	err = r.run(eng)
	return eng.Stats(), err
}

// stepper is what a replay drives: the engine, or a join's Joiner.
type stepper interface {
	Assign(p int32, now int64, caughtUp bool)
	Record(ev *windowing.Event, now int64) error
	Tick(now int64) error
	Finish() error
	Checkpoint(final bool) error
	NeedsCheckpoint() bool
	Frontier() int64
	Stats() windowing.Stats
	// For the repartitioner: stage 1's markers set the partitions'
	// watermarks.
	Watermarks() *watermark.Frontier
	Advance() error
}

func (r *runner) run(eng stepper) error {
	n := r.opts.Partitions
	if r.rp != nil {
		if err := r.rp.start(eng, 0); err != nil {
			return err
		}
	} else {
		assignAll(eng, r.opts.Pipeline, n)
	}
	if err := r.lines(eng, r.opts.Input); err != nil {
		return err
	}
	if err := eng.Finish(); err != nil {
		return err
	}
	if r.opts.Progress {
		if err := r.progress(eng.Frontier(), eng.Stats()); err != nil {
			return err
		}
	}
	if r.opts.Live != nil {
		r.publish(&r.sum, eng.Frontier(), eng.Stats())
	}
	return eng.Checkpoint(false)
}

// assignAll assigns partitions 0..n-1 of each of p's inputs to eng.
func assignAll(eng stepper, p *config.Pipeline, n int) {
	for u := range layoutOf(p, n).Total() {
		eng.Assign(u, 0, true)
	}
}

// eachLine reads lr's lines, numbering them in r.line and counting them
// in r.sum.Lines, and calls each with every non-blank one (tooLong: the
// line is longer than MaxLineBytes, and lr.head is its start) until the
// input ends or each returns false or an error. It also returns why
// reading stopped early: an unreadable input, a line with no end.
func (r *runner) eachLine(lr *lineReader, each func(line []byte, tooLong bool) (bool, error)) error {
	for {
		line, rerr := lr.next()
		eof := rerr != nil && errors.Is(rerr, io.EOF)
		if eof && len(line) == 0 {
			return nil
		}
		r.line++
		tooLong := false
		switch {
		case rerr == nil || eof:
			if len(bytes.TrimSpace(line)) == 0 {
				if eof {
					return nil
				}
				continue
			}
		case errors.Is(rerr, errLineTooLong):
			tooLong = true
		case errors.Is(rerr, errNoLineEnd):
			return noLineEnd(r.line, lr.at)
		default:
			return fmt.Errorf("replay: read input: %w", rerr)
		}
		r.sum.Lines++
		if more, err := each(line, tooLong); err != nil || !more || eof {
			return err
		}
	}
}

// lines reads every line of in and handles it; eng is nil when scanning.
func (r *runner) lines(eng stepper, in io.Reader) error {
	d, err := newLineDecoder(&r.opts)
	if err != nil {
		return err
	}
	d.scanning = r.set.scan && d.orderFree()
	var o lineOut
	lr := newLineReader(in)
	return r.eachLine(lr, func(line []byte, tooLong bool) (bool, error) {
		if tooLong {
			// Counted and echoed like any bad line, with where it starts
			// and how long it is (docs/SEMANTICS.md, Replay).
			if err := r.tooLong(&o, lr); err != nil {
				return false, err
			}
			if !r.set.scan {
				// Shown at once: the rest of the input may be slow to come.
				if err := r.errs.Flush(); err != nil {
					return false, err
				}
			}
			return true, nil
		}
		if err := d.read(line, &o, &r.set.seq); err != nil {
			return false, fmt.Errorf("line %d: %w", r.line, err)
		}
		if feed, _, err := r.set.settle(&o, line, r.line, true); err != nil {
			return false, err
		} else if feed {
			if err := r.step(eng, &o, line); err != nil {
				return false, err
			}
		}
		if eng == nil {
			return true, nil
		}
		if r.opts.Progress {
			if err := r.progress(eng.Frontier(), eng.Stats()); err != nil {
				return false, err
			}
		}
		if r.opts.Live != nil && r.sum.Lines%liveEvery == 0 {
			r.publish(&r.sum, eng.Frontier(), eng.Stats())
		}
		// A replay commits its Pebble state only to bound memory: when the
		// uncommitted writes pass the engine's budget (cache evictions,
		// timers), and at the end. Nothing reads a replay's checkpoints,
		// so committing every N records would only write windows that
		// open and close between two commits to Pebble and delete them
		// again.
		if eng.NeedsCheckpoint() {
			if err := eng.Checkpoint(false); err != nil {
				return false, err
			}
		}
		return true, nil
	})
}

// tooLong settles a line longer than MaxLineBytes: a dead letter with the
// start of the line.
func (r *runner) tooLong(o *lineOut, lr *lineReader) error {
	*o = lineOut{kind: lineDead, reason: fmt.Sprintf("line longer than %d MiB", MaxLineBytes>>20), part: -1, at: lr.at, size: lr.size}
	_, _, err := r.set.settle(o, lr.head, r.line, true)
	return err
}

// noLineEnd is the error of an input whose line, number line from byte
// at, has no end.
func noLineEnd(line, at int64) error {
	return fmt.Errorf("line %d (from byte %d) has no end within %d MiB past the %d MiB line limit: is the input JSON lines?",
		line, at, MaxSkipBytes>>20, MaxLineBytes>>20)
}

// step hands a settled clock line or record to the engine.
func (r *runner) step(eng stepper, o *lineOut, line []byte) error {
	if o.kind == lineClock {
		if r.rp != nil {
			r.rp.tick(eng, o.clock)
		}
		return eng.Tick(o.clock)
	}
	r.em.line, r.em.cur = r.line, line
	if r.rp != nil {
		return r.rp.record(eng, &o.ev, r.set.seq.now)
	}
	return eng.Record(&o.ev, r.set.seq.now)
}

// bytesView is a no-copy []byte of s, which must not be written to.
func bytesView(s string) []byte {
	if s == "" {
		return []byte{}
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
