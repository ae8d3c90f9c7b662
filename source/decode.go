package source

import (
	"math"
	"strconv"
	"strings"
	"unsafe"

	metro "github.com/dgryski/go-metro"
	"github.com/tidwall/gjson"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/expr"
	"github.com/windowd/windowd/schema"
	"github.com/windowd/windowd/windowing"
)

// Record is one raw input record as Kafka (or a replay line) delivers it.
type Record struct {
	Partition int32
	Offset    int64
	Key       []byte // nil: null key
	Value     []byte
	Timestamp int64 // Kafka record timestamp, Unix ms
	// Headers are the record's headers, read only by expressions
	// (Decoder.UsesExpressions): fill them only then.
	Headers []expr.Header
	// ValidJSON says Value is already known to be valid JSON (replay checked
	// the whole line), so Decode skips its own check.
	ValidJSON bool
	// Now is processing time (Unix ms: the wall clock in run, the last
	// clock line in replay), read only for timestamp.max_future
	// (Decoder.UsesNow): fill it only then.
	Now int64
}

// DecodeError is why a record could not be decoded. Reason is short,
// lower-case and names the offending field; it is what goes into the
// dead-letter "error" header.
type DecodeError struct{ Reason string }

// Error returns the reason.
func (e *DecodeError) Error() string { return e.Reason }

// distinctSeed is the metro hash seed axiomhq/hyperloglog uses in Insert, so
// Input.Hash can be fed to the sketch's InsertHash and count the same as
// Insert of the field's text would.
const distinctSeed = 1337

// maxQuoted bounds how much of a bad RFC 3339 string is echoed in a reason.
const maxQuoted = 64

// gjson validates recursively, one stack frame or more per nesting level: a
// value of millions of '[' would overflow the goroutine stack, which is a fatal
// error and not a recoverable panic. Values longer than deepCheckLen (which
// cannot nest deeper than their length) are first checked, without
// recursion, to nest at most maxDepth levels, the limit encoding/json uses.
const (
	deepCheckLen = 1 << 16
	maxDepth     = 10000
)

// tooDeep reports whether arrays and objects in v nest deeper than maxDepth.
func tooDeep(v []byte) bool {
	depth := 0
	inString, escaped := false, false
	for _, c := range v {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			if depth > maxDepth {
				return true
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return false
}

// aggInput is how one aggregate's input is read.
type aggInput struct {
	op    windowing.AggOp
	field int // index into Decoder.fields; -1 for count and expressions
	// exprErr prefixes an expression's error: "aggregate NAME: ".
	exprErr string
	// skip: the aggregate reads another input's records
	// (config.Pipeline.ForInput): it reads nothing of this one's.
	skip bool

	// Precomputed reasons.
	missing, null, notNumber, outOfRange string
}

// Decoder turns records of one pipeline into events. It is not safe for
// concurrent use (it reuses buffers).
type Decoder struct {
	fields  []fieldPath     // distinct paths read from the value
	results []gjson.Result  // per record: the value of each of fields
	keyIdx  int             // index into fields; -1: the record key
	tsIdx   int             // index into fields; -1: the record timestamp
	future  int64           // timestamp.max_future (ms); 0: off
	tsScale int             // power of ten from the time unit to ms: s 3, ms 0, us -3, ns -6
	rfc3339 bool            // timestamp is an RFC 3339 string
	aggs    []aggInput      // aligned with the pipeline's aggregates
	errs    decodeErrorText // precomputed reasons for the key and timestamp
	// key.fields: the indexes of the fields, their reasons, and the
	// buffer the key is built in.
	keyFields    []int
	keyFieldErrs []keyFieldErr
	keyBuf       []byte
	interned     map[string]string // recent composite keys (intern)
	x            *exprs            // nil: no expression
	// bin reads Avro and Protobuf values (input.format) as JSON objects,
	// into binBuf; inst is the event time of the record's schema-typed
	// timestamp field (docs/SEMANTICS.md, Input formats).
	bin    *schema.Decoder
	binBuf []byte
	inst   schema.Instant
	holds  bool // events outlive the next Decode (HoldsEvents)
	values bool // events carry the record's value (Event.Value): a join

	// The lookup state of checkAndLookUp and CheckLine: fields found (a
	// bit each), all of them, and the nesting CheckLine hands validObject.
	found, all uint64
	nest       nesting
	// byLen[n]: the fields whose first segment is n bytes long (a bit
	// each; the last entry: that long or longer), so that a member name
	// is compared only with the fields it can be.
	byLen [16]uint64
}

type decodeErrorText struct {
	keyMissing, keyNull, keyField                     string
	tsMissing, tsNotNumber, tsOutOfRange, tsNotString string
	tsNotRFC3339                                      string // prefix; the value follows
}

// NewDecoder returns a decoder for p. It expects a validated pipeline: the
// key, timestamp and aggregate fields are dotted paths of non-empty segments.
func NewDecoder(p *config.Pipeline) *Decoder {
	d := &Decoder{keyIdx: -1, tsIdx: -1, x: newExprs(p), future: p.Timestamp.MaxFuture, values: p.Join != nil}
	index := func(name string) int {
		for i := range d.fields {
			if d.fields[i].name == name {
				return i
			}
		}
		d.fields = append(d.fields, newFieldPath(name))
		return len(d.fields) - 1
	}
	if p.Key.Field != "" {
		d.keyIdx = index(p.Key.Field)
		q := strconv.Quote(p.Key.Field)
		d.errs.keyMissing = "key field " + q + " is missing"
		d.errs.keyNull = "key field " + q + " is null"
		d.errs.keyField = "key field " + q
	}
	if len(p.Key.Fields) > 0 {
		d.interned = map[string]string{}
	}
	for _, f := range p.Key.Fields {
		d.keyFields = append(d.keyFields, index(f))
		d.keyFieldErrs = append(d.keyFieldErrs, newKeyFieldErr(f))
	}
	if !p.Timestamp.FromRecord && p.Timestamp.Expr == nil {
		d.tsIdx = index(p.Timestamp.Field)
		q := "timestamp field " + strconv.Quote(p.Timestamp.Field)
		d.errs.tsMissing = q + " is missing"
		d.errs.tsNotNumber = q + " is not a number"
		d.errs.tsOutOfRange = q + " is out of range"
		d.errs.tsNotString = q + " is not a string"
		d.errs.tsNotRFC3339 = q + " is not an RFC 3339 time: "
		switch p.Timestamp.Format {
		case config.UnixS:
			d.tsScale = 3
		case config.UnixMS:
			d.tsScale = 0
		case config.UnixUS:
			d.tsScale = -3
		case config.UnixNS:
			d.tsScale = -6
		case config.RFC3339:
			d.rfc3339 = true
		}
	}
	d.aggs = make([]aggInput, len(p.Spec.Aggregates))
	for i, a := range p.Spec.Aggregates {
		in := aggInput{op: a.Op, field: -1}
		if i < len(p.SkipAggregates) && p.SkipAggregates[i] {
			in.skip = true
		} else if i < len(p.AggregateExprs) && p.AggregateExprs[i] != nil {
			in.exprErr = "aggregate " + a.Name + ": "
		} else if a.Op.NeedsNumber() || a.Op.NeedsText() {
			in.field = index(a.Field)
			if a.Op.NeedsNumber() {
				d.fields[in.field].numeric = true
			}
			q := "field " + strconv.Quote(a.Field) + " (aggregate " + a.Name + ")"
			in.missing = q + " is missing"
			in.null = q + " is null"
			in.notNumber = q + " is not a number"
			in.outOfRange = q + " is out of range"
		}
		d.aggs[i] = in
	}
	if d.x != nil {
		// A member an expression reads is a CEL double when it is a
		// number: its Num is needed.
		d.x.findMembers(func(name string) int {
			i := index(name)
			d.fields[i].numeric = true
			return i
		})
	}
	d.results = make([]gjson.Result, len(d.fields))
	d.all = uint64(1)<<len(d.fields) - 1
	for j := range d.fields {
		d.byLen[min(len(d.fields[j].first), len(d.byLen)-1)] |= 1 << j
	}
	return d
}

// WithSchemas makes d read its pipeline's Avro or Protobuf values with
// schemas from reg, and returns d. A pipeline whose input.format is not
// json needs it.
func (d *Decoder) WithSchemas(p *config.Pipeline, reg *schema.Registry) *Decoder {
	tsField := ""
	if d.tsIdx >= 0 {
		tsField = p.Timestamp.Field
	}
	// Without expressions (which may read any member) only the members
	// the fields start with are looked up: the rest need not be written.
	var members []string
	if d.x == nil {
		members = []string{}
		for _, f := range d.fields {
			members = append(members, f.first)
		}
	}
	d.bin = schema.NewDecoder(reg, p.Input.Format, tsField, members)
	return d
}

// HoldsEvents says the caller keeps an event past the next Decode (it
// decodes ahead): then an event's key and texts never point into the
// decoder's own buffers.
func (d *Decoder) HoldsEvents() { d.holds = true }

// unalias returns s, copied when it points into binBuf.
func (d *Decoder) unalias(s string) string {
	if s == "" || len(d.binBuf) == 0 {
		return s
	}
	p, start := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.SliceData(d.binBuf)))
	if p >= start && p < start+uintptr(cap(d.binBuf)) {
		return strings.Clone(s)
	}
	return s
}

// Binary reports whether values are Avro or Protobuf (WithSchemas).
func (d *Decoder) Binary() bool { return d.bin != nil }

func fail(reason string) error { return &DecodeError{Reason: reason} }

// CheckJSON reports why b is not JSON that is safe to read with gjson
// ("nested too deeply" or "not valid JSON"), or "" when it is.
func CheckJSON(b []byte) string {
	if len(b) > deepCheckLen && tooDeep(b) {
		return "nested too deeply"
	}
	if !gjson.ValidBytes(b) {
		return "not valid JSON"
	}
	return ""
}

// Decode fills ev from rec. ev.Inputs is reused (resliced to the number of
// aggregates). On a bad record it returns a *DecodeError and leaves ev
// partly filled; with schemas (WithSchemas), a registry that cannot be
// asked is a *schema.Unavailable, and the record should be tried again
// later. ev.Key may point into rec's buffers (Event.Key) or into d's: it is
// valid while they are not changed and, unless HoldsEvents, until the next
// Decode.
func (d *Decoder) Decode(rec *Record, ev *windowing.Event) error {
	ev.Partition = rec.Partition
	ev.Offset = rec.Offset

	if d.bin != nil {
		b, inst, err := d.bin.AppendJSON(d.binBuf[:0], rec.Value)
		if err != nil {
			if br, ok := err.(*schema.BadRecord); ok {
				return fail(br.Reason)
			}
			return err
		}
		d.binBuf, d.inst = b, inst
		if len(d.fields) > 0 {
			d.lookUp(bytesString(b))
		}
		if err := d.fill(rec, ev); err != nil {
			return err
		}
		if d.holds {
			// binBuf is the next record's too: what the event keeps
			// of it must not point into it.
			ev.Key = d.unalias(ev.Key)
			ev.Value = strings.Clone(ev.Value)
			for i := range ev.Inputs {
				ev.Inputs[i].Text = d.unalias(ev.Inputs[i].Text)
			}
		}
		return nil
	}
	// The value is only read during this call, and nothing derived from it
	// that points into it is kept but the key (see above), so a no-copy
	// string view is safe and saves a copy of every value.
	if !rec.ValidJSON {
		if why := d.checkAndLookUp(rec.Value); why != "" {
			return fail(why)
		}
	} else if len(d.fields) > 0 {
		obj := strings.TrimLeft(bytesString(rec.Value), " \t\r\n")
		if obj == "" || obj[0] != '{' {
			return fail("value is not a JSON object")
		}
		d.lookUp(obj)
	}
	return d.fill(rec, ev)
}

// DecodeFound is Decode for a record whose value's fields CheckLine has
// just looked up (found): the value is not read again.
func (d *Decoder) DecodeFound(rec *Record, ev *windowing.Event) error {
	ev.Partition = rec.Partition
	ev.Offset = rec.Offset
	return d.fill(rec, ev)
}

// fill is Decode after the lookup: the rest of ev from rec and d.results.
func (d *Decoder) fill(rec *Record, ev *windowing.Event) error {
	if d.x != nil {
		if err := d.filter(rec); err != nil {
			return err
		}
	}
	// Key.
	switch {
	case d.keyFields != nil:
		k, err := d.compositeKey()
		if err != nil {
			return err
		}
		ev.Key = k
	case d.x != nil && d.x.key != nil:
		k, err := d.exprKey()
		if err != nil {
			return err
		}
		ev.Key = k
	case d.keyIdx < 0:
		if rec.Key == nil {
			return fail("record key is null")
		}
		ev.Key = bytesString(rec.Key)
	default:
		r := &d.results[d.keyIdx]
		switch r.Type {
		case gjson.Null:
			if !r.Exists() {
				return fail(d.errs.keyMissing)
			}
			return fail(d.errs.keyNull)
		case gjson.String:
			if esc := LoneSurrogate(r); esc != "" {
				return fail(d.errs.keyField + " has a lone surrogate escape " + esc + ", which is no character (docs/SEMANTICS.md, Records and keys)")
			}
			ev.Key = r.Str
		default:
			ev.Key = r.Raw
		}
	}

	// Event time.
	switch {
	case d.x != nil && d.x.ts != nil:
		t, err := d.exprTime()
		if err != nil {
			return err
		}
		ev.Time = t
	case d.tsIdx < 0:
		ev.Time = rec.Timestamp
	case d.inst.OK:
		ev.Time = d.inst.MS
	default:
		t, reason := d.eventTime(&d.results[d.tsIdx])
		if reason != "" {
			return fail(reason)
		}
		ev.Time = t
	}
	if d.future > 0 && ev.Time > rec.Now && ev.Time-rec.Now > d.future {
		// One far-future record would move the watermark past every
		// later one (docs/SEMANTICS.md, Bad input).
		return fail("event time " + strconv.FormatInt(ev.Time, 10) + " is " + msText(uint64(ev.Time)-uint64(rec.Now)) +
			" ahead of processing time " + strconv.FormatInt(rec.Now, 10) + ", more than timestamp.max_future " + msText(uint64(d.future)))
	}

	// Aggregate inputs.
	n := len(d.aggs)
	if cap(ev.Inputs) < n {
		ev.Inputs = make([]windowing.Input, n)
	} else {
		ev.Inputs = ev.Inputs[:n]
	}
	for i := range d.aggs {
		a := &d.aggs[i]
		in := windowing.Input{}
		if a.skip {
			in.Skip = true
		} else if a.exprErr != "" {
			if err := d.exprInput(i, a, &in); err != nil {
				return err
			}
		} else if a.field >= 0 {
			r := &d.results[a.field]
			if r.Type == gjson.Null {
				if !r.Exists() {
					return fail(a.missing)
				}
				return fail(a.null)
			}
			if a.op.NeedsText() {
				text := r.Raw
				if r.Type == gjson.String {
					text = r.Str
				}
				if a.op == windowing.TopK {
					in.Text = text
				} else {
					in.Hash = metro.Hash64Str(text, distinctSeed)
				}
			} else {
				if r.Type != gjson.Number {
					return fail(a.notNumber)
				}
				if math.IsInf(r.Num, 0) || math.IsNaN(r.Num) {
					return fail(a.outOfRange)
				}
				in.Num = r.Num
			}
		}
		ev.Inputs[i] = in
	}
	if d.values {
		ev.Value = bytesString(rec.Value)
		if d.bin != nil {
			ev.Value = bytesString(d.binBuf)
		}
	}
	ev.Ends = windowing.NotEnding
	if d.x != nil && (d.x.closes != nil || d.x.discards != nil) {
		ends, err := d.ending()
		if err != nil {
			return err
		}
		ev.Ends = ends
	}
	return nil
}

// UsesNow says Decode reads Record.Now (timestamp.max_future is set).
func (d *Decoder) UsesNow() bool { return d.future > 0 }
