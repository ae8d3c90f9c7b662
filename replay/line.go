package replay

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/expr"
	"github.com/windowd/windowd/repartition"
	"github.com/windowd/windowd/source"
	"github.com/windowd/windowd/windowing"
)

// One input line: a record, a clock line, or a dead letter with its
// reason. A line is read in two steps: read (lineDecoder), what the line
// says on its own, its checks and its record's decode; then settle
// (settler), what depends on the lines before it: its offset in its
// partition, whether a clock moves backwards, the counts and the dead
// letter's line. Replay's workers (workers.go) read lines in parallel and
// settle them in order.

// lineKind is what a line turned out to be.
type lineKind uint8

const (
	lineDead     lineKind = iota // dead-lettered: lineOut.reason
	lineClock                    // a clock line: lineOut.clock
	lineRecord                   // a record: lineOut.ev
	lineFiltered                 // a record the pipeline's filter rejected
	lineSkipped                  // ScanPartitions: a line that cannot raise the largest partition
)

// lineOut is one line's result.
type lineOut struct {
	kind   lineKind
	reason string
	// part is the line's partition, -1 when it names no valid one (a
	// line-level dead letter). A line with a partition takes the next
	// offset of it, also when it is dead-lettered after. With several
	// inputs it is the upstream partition (layoutOf): the partition and
	// its input in one.
	part   int32
	placed bool // offset is taken (read was given the sequence)
	offset int64
	clock  int64
	ev     windowing.Event
	// at and size: where a line too long to keep starts and its length,
	// for its dead letter (size 0: the line is whole).
	at, size int64
}

// sequence is what a line's reading depends on from the lines before it.
type sequence struct {
	now     int64   // the last clock line's time
	offsets []int64 // the next offset of each partition
}

// take returns partition p's next offset.
func (s *sequence) take(p int32) int64 {
	for int(p) >= len(s.offsets) {
		s.offsets = append(s.offsets, 0)
	}
	o := s.offsets[p]
	s.offsets[p]++
	return o
}

// layoutOf numbers the partitions 0..partitions-1 of each of p's input
// topics as the frontier's upstream partitions, one input after the other,
// as run numbers them (docs/SEMANTICS.md, Several inputs); with one input
// a partition keeps its number.
func layoutOf(p *config.Pipeline, partitions int) repartition.Layout {
	counts := make([]int32, max(1, len(p.Inputs)))
	for i := range counts {
		counts[i] = int32(partitions)
	}
	return repartition.NewLayout(counts)
}

// lineDecoder reads lines: one per goroutine that reads them.
type lineDecoder struct {
	opts    *Options
	decs    []*source.Decoder // each input's
	layout  repartition.Layout
	rec     source.Record
	headers []expr.Header // the line's headers, for expressions
	raw     []byte        // a binary value decoded from its base64
	// scanning: ScanPartitions with an orderFree decoder, which skips
	// a line whose partition is at most scanMax, the largest of the valid
	// records it decoded (skipLine).
	scanning bool
	scanMax  int32
}

func newLineDecoder(opts *Options) (*lineDecoder, error) {
	newDecoder := func(p *config.Pipeline) (*source.Decoder, error) {
		dec := source.NewDecoder(p)
		if f := p.Input.Format; f != config.JSON {
			if opts.Registry == nil {
				return nil, fmt.Errorf("pipeline %s reads %s values: give --schema-registry URL, or schema_registry in the configuration", p.Name, f)
			}
			dec.WithSchemas(p, opts.Registry)
		}
		return dec, nil
	}
	p := opts.Pipeline
	d := &lineDecoder{opts: opts, layout: layoutOf(p, opts.Partitions)}
	for i := range d.layout.Inputs() {
		dec, err := newDecoder(p.ForInput(i))
		if err != nil {
			return nil, err
		}
		d.decs = append(d.decs, dec)
	}
	return d, nil
}

// orderFree reports whether a record decodes the same whatever its offset
// and processing time: no expression reads its offset and the pipeline has
// no timestamp.max_future (then lines may be read in parallel).
func (d *lineDecoder) orderFree() bool {
	for _, dec := range d.decs {
		if dec.UsesExpressions() || dec.UsesNow() {
			return false
		}
	}
	return true
}

// read reads one non-blank line into o. With seq, the line is read in
// order: it takes its offset now, and the record sees seq's processing
// time; without, its offset is settled later (orderFree decoders only). An
// error stops the replay.
func (d *lineDecoder) read(line []byte, o *lineOut, seq *sequence) error {
	o.kind, o.reason, o.part, o.placed, o.offset, o.size = lineDead, "", -1, false, 0, 0
	if d.scanning && d.skipLine(line) {
		o.kind = lineSkipped
		return nil
	}
	// One pass validates the line and hands out its members; the first
	// of duplicate names wins (as gjson.Get would); when the value is an
	// object, the same pass looks up the decoder's fields in it (found).
	// The line is kept unchanged until the record is done with (the
	// engine copies the group keys it keeps), so the members are no-copy
	// views of it, and so are the record's key and value.
	var dec *source.Decoder // the line's input's
	if len(d.decs) == 1 {
		dec = d.decs[0]
	}
	var clock, pv, kv, tv, vv, hv, topic gjson.Result
	member := func(name, value string) {
		var dst *gjson.Result
		switch name {
		case "clock":
			dst = &clock
		case "topic":
			dst = &topic
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
	}
	var why string
	var object, found bool
	if dec != nil {
		why, object, found = dec.CheckLine(line, member, "value")
	} else {
		// The decoder is the line's topic's, known once the line is read.
		why, object = source.CheckObject(line, member)
	}
	if why != "" {
		o.reason = "line is " + why
		return nil
	}
	if !object {
		o.reason = "line is not a JSON object"
		return nil
	}
	if clock.Exists() {
		v, ok := wholeNumber(clock)
		if !ok {
			o.reason = "clock is not an integer of milliseconds"
			return nil
		}
		o.kind, o.clock = lineClock, v
		return nil
	}
	partition := int64(0)
	if pv.Exists() {
		v, ok := wholeNumber(pv)
		if !ok || v < 0 || v >= int64(d.opts.Partitions) {
			o.reason = fmt.Sprintf("partition must be an integer in [0, %d)", d.opts.Partitions)
			return nil
		}
		partition = v
	}
	input := 0
	if dec == nil {
		i, why := d.input(topic)
		if why != "" {
			o.reason = why
			return nil
		}
		input, dec = int(i), d.decs[i]
	}
	o.part = d.layout.ID(input, int32(partition))
	rec := &d.rec
	*rec = source.Record{Partition: int32(partition)}
	if seq != nil {
		o.offset, o.placed = seq.take(o.part), true
		rec.Offset, rec.Now = o.offset, seq.now
	}
	if kv.Exists() && kv.Type != gjson.Null {
		if kv.Type == gjson.String {
			if esc := source.LoneSurrogate(&kv); esc != "" {
				// Keys are byte-exact (docs/SEMANTICS.md, Records and keys).
				o.reason = "key has a lone surrogate escape " + esc + ", which is no character"
				return nil
			}
			rec.Key = bytesView(kv.Str)
		} else {
			rec.Key = bytesView(kv.Raw)
		}
	}
	if tv.Exists() {
		v, ok := wholeNumber(tv)
		if !ok {
			o.reason = "timestamp is not an integer of milliseconds"
			return nil
		}
		rec.Timestamp = v
	} else if dec.UsesRecordTimestamp() {
		// Event time is the record's timestamp, and this line has none:
		// not the 1970 window.
		o.reason = "timestamp is missing (the pipeline reads the record timestamp)"
		return nil
	}
	if hv.Exists() && dec.UsesExpressions() {
		d.headers = d.headers[:0]
		hv.ForEach(func(k, v gjson.Result) bool {
			d.headers = append(d.headers, expr.Header{Key: k.String(), Value: v.String()})
			return true
		})
		rec.Headers = d.headers
	}
	if !vv.Exists() {
		o.reason = "value is missing"
		return nil
	}
	if dec.Binary() {
		// Raw bytes, as {"base64": "..."} (docs/SEMANTICS.md, Replay).
		raw, why := d.base64Value(vv)
		if why != "" {
			o.reason = why
			return nil
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
		err = dec.DecodeFound(rec, &o.ev)
	} else {
		err = dec.Decode(rec, &o.ev)
	}
	if err != nil {
		if err == source.ErrFiltered {
			o.kind = lineFiltered
			return nil
		}
		var de *source.DecodeError
		if errors.As(err, &de) {
			o.reason = de.Error()
			return nil
		}
		// The registry could not be asked (replay does not wait for it).
		return err
	}
	o.kind = lineRecord
	o.ev.Partition, o.ev.Input = o.part, int32(input)
	if d.scanning {
		d.scanMax = max(d.scanMax, int32(partition))
	}
	return nil
}

// input returns the index of the input a line's topic names, or why the
// line names none (a pipeline with several inputs).
func (d *lineDecoder) input(topic gjson.Result) (int32, string) {
	ins := d.opts.Pipeline.Inputs
	if topic.Type == gjson.String {
		for i, in := range ins {
			if in.Topic == topic.Str {
				return int32(i), ""
			}
		}
	}
	names := make([]string, len(ins))
	for i, in := range ins {
		names[i] = strconv.Quote(in.Topic)
	}
	what := "topic must be"
	if !topic.Exists() {
		what = "topic is missing: a line of a pipeline with several inputs names its input topic,"
	}
	return 0, what + " one of " + strings.Join(names, ", ")
}

// scanSkips turns skipLine off for the test that compares.
var scanSkips = true

// skipLine reports whether a line cannot raise the largest partition a
// scan found so far: its top-level "partition", read by gjson without
// checking the line (the first of duplicate names, and names spelled with
// escapes, as the decoder reads them; none is partition 0), is at most
// scanMax. A line that is not valid JSON is no valid record anyway, so
// what is read from it does not matter.
func (d *lineDecoder) skipLine(line []byte) bool {
	if !scanSkips {
		return false
	}
	v := gjson.GetBytes(line, "partition")
	if !v.Exists() {
		return true // partition 0
	}
	p, ok := wholeNumber(v)
	return ok && p >= 0 && p <= int64(d.scanMax)
}

// settler settles lines in input order (a replay has one; with workers,
// each worker settles every line, workers.go).
type settler struct {
	seq  sequence
	sum  *Summary // the counts of the lines reported
	em   *emitter // where dead letters go
	scan bool     // ScanPartitions: count only, noting the largest partition
	// largest: the largest partition of a valid record (scan).
	largest int32
	layout  repartition.Layout // lineOut.part's numbering (layoutOf)
}

// settle finishes line o, number n, in input order: its offset, the
// clock and, when report, its counts and, for a dead letter, its line on
// the error stream. It changes nothing in o, and reports whether the line
// goes on to the engine (a record or a clock) and the line's offset in its
// partition (when it names one).
func (s *settler) settle(o *lineOut, line []byte, n int64, report bool) (feed bool, offset int64, err error) {
	offset = o.offset
	if o.part >= 0 && !o.placed {
		offset = s.seq.take(o.part)
	}
	reason := o.reason
	switch o.kind {
	case lineClock:
		if o.clock >= s.seq.now {
			s.seq.now = o.clock
			if report {
				s.sum.Clocks++
			}
			return !s.scan, offset, nil
		}
		reason = fmt.Sprintf("clock moves backwards from %d to %d", s.seq.now, o.clock)
	case lineFiltered:
		if report {
			s.sum.Filtered++
		}
		return false, offset, nil
	case lineSkipped:
		return false, offset, nil
	case lineRecord:
		if report {
			s.sum.Records++
			if s.scan {
				_, p := s.layout.Input(o.part)
				s.largest = max(s.largest, p)
			}
		}
		return !s.scan, offset, nil
	}
	if !report {
		return false, offset, nil
	}
	s.sum.DeadLetters++
	if s.scan {
		return false, offset, nil
	}
	e := s.em
	e.line = n
	e.lineAt, e.lineSize = o.at, o.size
	err = e.deadLetter(reason, o.part, offset, line)
	e.lineSize = 0
	return false, offset, err
}

// base64Value decodes the member "base64" of v, a line's value, into
// d.raw; or says why it cannot. The usual value, {"base64":"..."} alone,
// is decoded without parsing it first; if that fails (another member, an
// escape), the object is parsed.
func (d *lineDecoder) base64Value(v gjson.Result) ([]byte, string) {
	const prefix, suffix = `{"base64":"`, `"}`
	if raw := v.Raw; len(raw) >= len(prefix)+len(suffix) && strings.HasPrefix(raw, prefix) && strings.HasSuffix(raw, suffix) {
		if b, err := d.decodeBase64(raw[len(prefix) : len(raw)-len(suffix)]); err == nil {
			return b, ""
		}
	}
	var b64 gjson.Result
	if v.IsObject() {
		b64 = v.Get("base64")
	}
	if b64.Type != gjson.String {
		return nil, `value must be {"base64": "..."}, the record's bytes, for a pipeline of input.format ` + d.opts.Pipeline.Input.Format.String()
	}
	b, err := d.decodeBase64(b64.Str)
	if err != nil {
		return nil, "value's base64 is not valid: " + err.Error()
	}
	return b, ""
}

// decodeBase64 decodes s into d.raw.
func (d *lineDecoder) decodeBase64(s string) ([]byte, error) {
	n := base64.StdEncoding.DecodedLen(len(s))
	if cap(d.raw) < n {
		d.raw = make([]byte, n)
	}
	m, err := base64.StdEncoding.Decode(d.raw[:n], bytesView(s))
	return d.raw[:m], err
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
