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
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tidwall/gjson"

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

// MaxSpoolBytes bounds the standard input `windowd replay` spools to a
// temporary file to count partitions when --partitions is not given
// (docs/OPERATIONS.md, Limits); with --partitions it streams.
const MaxSpoolBytes = 256 << 20

// MaxSkipBytes bounds how much of a line past MaxLineBytes replay skips
// looking for its end: an input with no newline in that much more (a
// binary file, /dev/zero) stops the replay (docs/OPERATIONS.md, Limits).
const MaxSkipBytes = 4 * MaxLineBytes

// MaxEchoBytes bounds the input a dead letter echoes; a longer line is
// echoed up to it, with its length (docs/OPERATIONS.md, Limits).
const MaxEchoBytes = 1 << 10

// errLineTooLong is a line whose text (without its "\n" or "\r\n")
// passes MaxLineBytes; lineReader.long holds its start.
var errLineTooLong = errors.New("line longer than 16 MiB")

// errNoLineEnd is a line with no end within MaxSkipBytes past MaxLineBytes.
var errNoLineEnd = errors.New("no line end")

// lineReader reads the input's lines; a UTF-8 byte order mark at its start
// (some editors write one) is skipped, not read as part of the first line.
type lineReader struct {
	br   *bufio.Reader
	pos  int64  // input bytes read up to the end of the last line
	at   int64  // where the last line starts
	size int64  // the last line's length without its line end
	head []byte // the start of the last line when it was too long (at most MaxEchoBytes)
	long []byte // a line longer than the buffer, assembled
}

func newLineReader(r io.Reader) *lineReader {
	br := bufio.NewReaderSize(r, 1<<16)
	lr := &lineReader{br: br}
	if b, err := br.Peek(len(utf8BOM)); err == nil && string(b) == utf8BOM {
		_, _ = br.Discard(len(utf8BOM))
		lr.pos = int64(len(utf8BOM))
	}
	return lr
}

const utf8BOM = "\xef\xbb\xbf"

// next returns the next line without its line end ("\n", "\r\n" or any
// run of those bytes at its end). A line whose text passes MaxLineBytes
// is skipped and reported as errLineTooLong (exactly: a line of
// MaxLineBytes is read); one with no end within MaxSkipBytes after that is
// an error that stops the replay.
func (lr *lineReader) next() ([]byte, error) {
	lr.at = lr.pos
	lr.long = lr.long[:0]
	for {
		frag, err := lr.br.ReadSlice('\n')
		lr.pos += int64(len(frag))
		if errors.Is(err, bufio.ErrBufferFull) {
			// +1: a "\r" that may end the line is not part of its text.
			if len(lr.long)+len(frag) > MaxLineBytes+1 {
				return nil, lr.skip(append(lr.long, frag...))
			}
			lr.long = append(lr.long, frag...)
			continue
		}
		if len(lr.long) > 0 {
			frag = append(lr.long, frag...)
			lr.long = frag
		}
		n := len(frag) // bytes.TrimRight(frag, "\r\n"), without its set
		for n > 0 && (frag[n-1] == '\n' || frag[n-1] == '\r') {
			n--
		}
		lr.size = int64(n)
		if n > MaxLineBytes {
			lr.head = append(lr.head[:0], frag[:MaxEchoBytes]...)
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return nil, errLineTooLong
		}
		return frag[:n], err
	}
}

// skip reads the rest of a line too long to keep, whose start is read; it
// returns errLineTooLong, or why the replay must stop.
func (lr *lineReader) skip(start []byte) error {
	lr.head = append(lr.head[:0], start[:MaxEchoBytes]...)
	skipped := int64(0)
	for {
		frag, err := lr.br.ReadSlice('\n')
		lr.pos += int64(len(frag))
		skipped += int64(len(frag))
		switch {
		case err == nil || errors.Is(err, io.EOF):
			n := len(frag)
			for n > 0 && (frag[n-1] == '\n' || frag[n-1] == '\r') {
				n--
			}
			lr.size = lr.pos - lr.at - int64(len(frag)-n)
			return errLineTooLong
		case !errors.Is(err, bufio.ErrBufferFull):
			return err
		case skipped > MaxSkipBytes:
			return errNoLineEnd
		}
	}
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
	// The window it missed: its session [t, t+gap), or the latest of its
	// fixed windows (the last to expire).
	var missed windowing.Span
	if w := r.opts.Pipeline.Spec.Window; w.Kind == windowing.Session {
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
	if p.Spec.Window.Kind != windowing.Session {
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

// handle processes one non-blank input line.
func (r *runner) handle(eng *windowing.Engine, dec *source.Decoder, line []byte, now *int64, rec *source.Record, ev *windowing.Event) error {
	// One pass validates the line and hands out its members; the first
	// of duplicate names wins (as gjson.Get would); when the value is an
	// object, the same pass looks up the decoder's fields in it (found).
	// The line is only read during this call and nothing that points into
	// it outlives the call (the engine copies the group keys it keeps), so
	// the members are no-copy views of it, and so are the record's key and
	// value.
	var clock, pv, kv, tv, vv, hv gjson.Result
	why, object, found := dec.CheckLine(line, func(name, value string) {
		var dst *gjson.Result
		switch name {
		case "clock":
			dst = &clock
		case "partition":
			dst = &pv
		case "key":
			dst = &kv
		case "timestamp":
			dst = &tv
		case "value":
			dst = &vv
		case "headers":
			dst = &hv
		default:
			return
		}
		if !dst.Exists() {
			*dst = source.ParseMember(value, false) // wholeNumber reads numbers from their text
		}
	}, "value")
	if why != "" {
		return r.deadLetter("line is "+why, -1, 0, line)
	}
	if !object {
		return r.deadLetter("line is not a JSON object", -1, 0, line)
	}
	if clock.Exists() {
		v, ok := wholeNumber(clock)
		if !ok {
			return r.deadLetter("clock is not an integer of milliseconds", -1, 0, line)
		}
		if v < *now {
			return r.deadLetter(fmt.Sprintf("clock moves backwards from %d to %d", *now, v), -1, 0, line)
		}
		*now = v
		r.sum.Clocks++
		if r.scan {
			return nil
		}
		if r.rp != nil {
			r.rp.tick(eng, v)
		}
		return eng.Tick(v)
	}
	partition := int64(0)
	if pv.Exists() {
		v, ok := wholeNumber(pv)
		if !ok || v < 0 || v >= int64(r.opts.Partitions) {
			return r.deadLetter(fmt.Sprintf("partition must be an integer in [0, %d)", r.opts.Partitions), -1, 0, line)
		}
		partition = v
	}
	for int(partition) >= len(r.offsets) {
		r.offsets = append(r.offsets, 0)
	}
	*rec = source.Record{Partition: int32(partition), Offset: r.offsets[partition], Now: *now}
	r.offsets[partition]++
	if kv.Exists() && kv.Type != gjson.Null {
		if kv.Type == gjson.String {
			if esc := source.LoneSurrogate(&kv); esc != "" {
				// Keys are byte-exact (docs/SEMANTICS.md, Records and keys).
				return r.deadLetter("key has a lone surrogate escape "+esc+", which is no character", rec.Partition, rec.Offset, line)
			}
			rec.Key = bytesView(kv.Str)
		} else {
			rec.Key = bytesView(kv.Raw)
		}
	}
	if tv.Exists() {
		v, ok := wholeNumber(tv)
		if !ok {
			return r.deadLetter("timestamp is not an integer of milliseconds", rec.Partition, rec.Offset, line)
		}
		rec.Timestamp = v
	} else if dec.UsesRecordTimestamp() {
		// Event time is the record's timestamp, and this line has none:
		// not the 1970 window.
		return r.deadLetter("timestamp is missing (the pipeline reads the record timestamp)", rec.Partition, rec.Offset, line)
	}
	if hv.Exists() && dec.UsesExpressions() {
		r.headers = r.headers[:0]
		hv.ForEach(func(k, v gjson.Result) bool {
			r.headers = append(r.headers, expr.Header{Key: k.String(), Value: v.String()})
			return true
		})
		rec.Headers = r.headers
	}
	if !vv.Exists() {
		return r.deadLetter("value is missing", rec.Partition, rec.Offset, line)
	}
	if dec.Binary() {
		// Raw bytes, as {"base64": "..."} (docs/SEMANTICS.md, Replay).
		raw, why := r.base64Value(vv)
		if why != "" {
			return r.deadLetter(why, rec.Partition, rec.Offset, line)
		}
		rec.Value = raw
		found = false
	} else if vv.Type == gjson.String {
		rec.Value = bytesView(vv.Str)
	} else {
		// Part of the line, which is valid JSON: no second check.
		rec.Value = bytesView(vv.Raw)
		rec.ValidJSON = true
	}
	var err error
	if found { // the record's value is the object CheckLine read
		err = dec.DecodeFound(rec, ev)
	} else {
		err = dec.Decode(rec, ev)
	}
	if err != nil {
		if err == source.ErrFiltered {
			r.sum.Filtered++
			return nil
		}
		var de *source.DecodeError
		if errors.As(err, &de) {
			return r.deadLetter(de.Error(), rec.Partition, rec.Offset, line)
		}
		// The registry could not be asked (replay does not wait for it).
		return fmt.Errorf("line %d: %w", r.line, err)
	}
	r.sum.Records++
	if r.scan {
		r.largest = max(r.largest, rec.Partition)
		return nil
	}
	r.cur = line
	if r.rp != nil {
		return r.rp.record(eng, ev, *now)
	}
	return eng.Record(ev, *now)
}

// base64Value decodes the member "base64" of v, a line's value, into
// r.raw; or says why it cannot. The usual value, {"base64":"..."} alone,
// is decoded without parsing it first; if that fails (another member, an
// escape), the object is parsed.
func (r *runner) base64Value(v gjson.Result) ([]byte, string) {
	const prefix, suffix = `{"base64":"`, `"}`
	if raw := v.Raw; len(raw) >= len(prefix)+len(suffix) && strings.HasPrefix(raw, prefix) && strings.HasSuffix(raw, suffix) {
		if b, err := r.decodeBase64(raw[len(prefix) : len(raw)-len(suffix)]); err == nil {
			return b, ""
		}
	}
	var b64 gjson.Result
	if v.IsObject() {
		b64 = v.Get("base64")
	}
	if b64.Type != gjson.String {
		return nil, `value must be {"base64": "..."}, the record's bytes, for a pipeline of input.format ` + r.opts.Pipeline.Input.Format.String()
	}
	b, err := r.decodeBase64(b64.Str)
	if err != nil {
		return nil, "value's base64 is not valid: " + err.Error()
	}
	return b, ""
}

// decodeBase64 decodes s into r.raw.
func (r *runner) decodeBase64(s string) ([]byte, error) {
	n := base64.StdEncoding.DecodedLen(len(s))
	if cap(r.raw) < n {
		r.raw = make([]byte, n)
	}
	m, err := base64.StdEncoding.Decode(r.raw[:n], bytesView(s))
	return r.raw[:m], err
}

// wholeNumber reads an integral JSON number.
func wholeNumber(v gjson.Result) (int64, bool) {
	if v.Type != gjson.Number {
		return 0, false
	}
	i, err := strconv.ParseInt(v.Raw, 10, 64)
	if err == nil {
		return i, true
	}
	f, err := strconv.ParseFloat(v.Raw, 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}
