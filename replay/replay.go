// Package replay runs one pipeline over a JSON-lines file (docs/SEMANTICS.md,
// Replay) with the same engine as the Kafka service, printing panes to an
// output stream. Processing time starts at 0 and moves only through clock
// lines, so idleness and processing-time triggers replay deterministically.
//
// Invariants: a malformed line never stops a replay (it is dead-lettered
// with its line number and counted); panes are printed in emission order;
// at end of input the frontier becomes +infinity and every window fires.
package replay

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/windowd/windowd/codec"
	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/expr"
	"github.com/windowd/windowd/schema"
	"github.com/windowd/windowd/source"
	"github.com/windowd/windowd/state"
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

// ScanPartitions returns one more than the largest partition of a valid
// record of p in r (at least 1): the partition count a replay without
// --partitions uses. Each line is read as Run reads it (clock lines
// included, and the decoder's checks); a line Run would dead-letter adds no
// partition, so an invalid line never changes the result (docs/SEMANTICS.md,
// Replay). A partition must be below MaxPartitions.
func ScanPartitions(p *config.Pipeline, reg *schema.Registry, r io.Reader) (int, error) {
	s := &runner{opts: Options{Pipeline: p, Partitions: MaxPartitions, Registry: reg}, scan: true}
	if err := s.lines(nil, r); err != nil {
		return 0, err
	}
	return int(s.largest) + 1, nil
}

type runner struct {
	opts    Options
	out     *bufio.Writer
	errs    *bufio.Writer
	panes   *windowing.PaneJSON
	buf     []byte
	sum     Summary
	line    int64
	cur     []byte // the input line being processed
	eng     *windowing.Engine
	windows windowing.Assigner // the fixed windows a late record missed
	spans   []windowing.Span
	rp      *repartitioner // nil unless the pipeline repartitions
	headers []expr.Header  // the line's headers, for expressions
	offsets []int64        // the next offset of each partition
	raw     []byte         // a binary value decoded from its base64
	// lineAt and lineSize: where a line too long to keep starts and its
	// length, for its dead letter (lineSize 0: the line is raw).
	lineAt, lineSize int64

	// scan: ScanPartitions reads the lines without an engine, noting the
	// largest partition of a valid record.
	scan    bool
	largest int32

	progressAt, progressPanes int64 // the frontier and pane count at the last progress line
}

// Pane implements windowing.Emitter.
func (r *runner) Pane(p *windowing.Pane) error {
	r.buf = r.panes.Append(r.buf[:0], p)
	r.buf = append(r.buf, '\n')
	_, err := r.out.Write(r.buf)
	return err
}

// Dropped implements windowing.Emitter: a record with no representable
// window is a dead letter; a late one is reported on the error stream,
// with or without a late_topic, with the window it missed and the frontier
// that expired it (docs/SEMANTICS.md, Replay: nothing is dropped unseen).
func (r *runner) Dropped(ev *windowing.Event, reason windowing.DropReason) error {
	part := ev.Partition
	if r.rp != nil {
		part = r.rp.input // report the input partition, not the repartition one
	}
	if reason == windowing.DropOutOfRange {
		return r.deadLetter(reason.String(), part, ev.Offset, r.cur)
	}
	// The window it missed: its session [t, t+gap) (a transaction window's
	// [t, t+timeout)), or the latest of its fixed windows (the last to
	// expire).
	var missed windowing.Span
	if w := r.opts.Pipeline.Spec.Window; w.Kind == windowing.Session || w.Kind == windowing.Transaction {
		missed = windowing.Span{Start: ev.Time, End: ev.Time + w.Gap} // Dropped only sees representable windows
	} else if r.spans = r.windows.Windows(r.spans[:0], ev.Time); len(r.spans) > 0 {
		missed = r.spans[len(r.spans)-1]
	}
	b := append(r.buf[:0], `{"late_dropped":{"reason":`...)
	b = codec.AppendJSONString(b, reason.String())
	b = append(b, `,"line":`...)
	b = strconv.AppendInt(b, r.line, 10)
	b = append(b, `,"partition":`...)
	b = strconv.AppendInt(b, int64(part), 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, ev.Offset, 10)
	b = append(b, `,"key":`...)
	b = codec.AppendJSONString(b, ev.Key)
	b = append(b, `,"timestamp":`...)
	b = strconv.AppendInt(b, ev.Time, 10)
	b = append(b, `,"window":{"start":`...)
	b = strconv.AppendInt(b, missed.Start, 10)
	b = append(b, `,"end":`...)
	b = strconv.AppendInt(b, missed.End, 10)
	b = append(b, `},"frontier":`...)
	b = strconv.AppendInt(b, r.eng.Frontier(), 10)
	b = append(b, "}}\n"...)
	r.buf = b
	_, err := r.errs.Write(b)
	return err
}

// deadLetter reports a bad line or record on the error stream.
func (r *runner) deadLetter(reason string, partition int32, offset int64, raw []byte) error {
	r.sum.DeadLetters++
	if r.scan {
		return nil
	}
	b := append(r.buf[:0], `{"dead_letter":{"error":`...)
	b = codec.AppendJSONString(b, reason)
	b = append(b, `,"line":`...)
	b = strconv.AppendInt(b, r.line, 10)
	if partition >= 0 {
		b = append(b, `,"partition":`...)
		b = strconv.AppendInt(b, int64(partition), 10)
		b = append(b, `,"offset":`...)
		b = strconv.AppendInt(b, offset, 10)
	}
	size := int64(len(raw))
	if r.lineSize > 0 {
		size = r.lineSize // raw is the start of a line too long to keep
		b = append(b, `,"byte":`...)
		b = strconv.AppendInt(b, r.lineAt, 10)
	}
	b = append(b, `,"input":`...)
	b = codec.AppendJSONString(b, string(raw[:min(len(raw), MaxEchoBytes)]))
	if size > MaxEchoBytes {
		b = append(b, `,"input_bytes":`...)
		b = strconv.AppendInt(b, size, 10)
	}
	b = append(b, "}}\n"...)
	r.buf = b
	_, err := r.errs.Write(b)
	return err
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
	db, err := state.Open(dir, state.Options{FS: opts.FS, Ephemeral: true})
	if err != nil {
		return Summary{}, err
	}
	defer db.Close()

	r := &runner{
		opts:  opts,
		out:   bufio.NewWriterSize(opts.Out, 1<<16),
		errs:  bufio.NewWriterSize(opts.Errs, 1<<12),
		panes: windowing.NewPaneJSON(p.Spec.Aggregates),
	}
	if k := p.Spec.Window.Kind; k != windowing.Session && k != windowing.Transaction && k != windowing.CountWindow { // count windows drop nothing as late
		r.windows = windowing.NewAssigner(p.Spec.Window)
	}
	cacheBytes := opts.CacheBytes
	wmSpec := p.Watermark
	if p.Repartition != nil {
		r.rp = newRepartitioner(p, opts.Partitions)
		wmSpec = r.rp.downstreamSpec()
	}
	eng, err := windowing.New(p.Spec, wmSpec, db, r, windowing.Options{CacheBytes: cacheBytes, CommitWhenPending: true})
	if err != nil {
		return Summary{}, err
	}
	r.eng = eng
	err = r.run(eng)
	if ferr := r.out.Flush(); err == nil {
		err = ferr
	}
	if ferr := r.errs.Flush(); err == nil {
		err = ferr
	}
	st := eng.Stats()
	r.sum.LateDropped = st.LateDropped
	r.sum.OutOfRange = st.OutOfRange
	r.sum.Panes = st.Panes[0] + st.Panes[1] + st.Panes[2]
	r.sum.Retractions = st.Retractions
	return r.sum, err
}

func (r *runner) run(eng *windowing.Engine) error {
	n := r.opts.Partitions
	if r.rp != nil {
		if err := r.rp.start(eng, 0); err != nil {
			return err
		}
	} else {
		for i := 0; i < n; i++ {
			eng.Assign(int32(i), 0, true)
		}
	}
	if err := r.lines(eng, r.opts.Input); err != nil {
		return err
	}
	if err := eng.Finish(); err != nil {
		return err
	}
	if r.opts.Progress {
		if err := r.progress(eng); err != nil {
			return err
		}
	}
	if r.opts.Live != nil {
		r.publish(eng)
	}
	return eng.Checkpoint(false)
}

// lines reads every line of in and handles it; eng is nil when scanning.
func (r *runner) lines(eng *windowing.Engine, in io.Reader) error {
	var now int64
	dec := source.NewDecoder(r.opts.Pipeline)
	if f := r.opts.Pipeline.Input.Format; f != config.JSON {
		if r.opts.Registry == nil {
			return fmt.Errorf("pipeline %s reads %s values: give --schema-registry URL, or schema_registry in the configuration", r.opts.Pipeline.Name, f)
		}
		dec.WithSchemas(r.opts.Pipeline, r.opts.Registry)
	}
	var ev windowing.Event
	var rec source.Record
	lr := newLineReader(in)
	for {
		line, rerr := lr.next()
		eof := rerr != nil && errors.Is(rerr, io.EOF)
		if eof && len(line) == 0 {
			break
		}
		r.line++
		switch {
		case rerr == nil:
		case errors.Is(rerr, errLineTooLong):
			// Counted and echoed like any bad line, with where it starts
			// and how long it is (docs/SEMANTICS.md, Replay).
			r.sum.Lines++
			r.lineAt, r.lineSize = lr.at, lr.size
			err := r.deadLetter(fmt.Sprintf("line longer than %d MiB", MaxLineBytes>>20), -1, 0, lr.head)
			r.lineSize = 0
			if err != nil {
				return err
			}
			if !r.scan {
				// Shown at once: the rest of the input may be slow to come.
				if err := r.errs.Flush(); err != nil {
					return err
				}
			}
			continue
		case errors.Is(rerr, errNoLineEnd):
			return fmt.Errorf("line %d (from byte %d) has no end within %d MiB past the %d MiB line limit: is the input JSON lines?",
				r.line, lr.at, MaxSkipBytes>>20, MaxLineBytes>>20)
		case !eof:
			return fmt.Errorf("replay: read input: %w", rerr)
		}
		if len(bytes.TrimSpace(line)) > 0 {
			r.sum.Lines++
			if err := r.handle(eng, dec, line, &now, &rec, &ev); err != nil {
				return err
			}
			if r.opts.Progress && eng != nil {
				if err := r.progress(eng); err != nil {
					return err
				}
			}
			if r.opts.Live != nil && eng != nil && r.sum.Lines%liveEvery == 0 {
				r.publish(eng)
			}
			// A replay commits its Pebble state only to bound memory:
			// when the uncommitted writes pass the engine's budget
			// (cache evictions, timers), and at the end. Nothing reads
			// a replay's checkpoints, so committing every N records
			// would only write windows that open and close between two
			// commits to Pebble and delete them again.
			if eng != nil && eng.NeedsCheckpoint() {
				if err := eng.Checkpoint(false); err != nil {
					return err
				}
			}
		}
		if eof {
			break
		}
	}
	return nil
}

// bytesView is a no-copy []byte of s, which must not be written to.
func bytesView(s string) []byte {
	if s == "" {
		return []byte{}
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
