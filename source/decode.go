package source

import (
	"math"
	"strconv"
	"strings"
	"time"
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

// fieldPath is a precomputed lookup of one dotted path.
type fieldPath struct {
	name  string   // the dotted path as configured
	path  string   // gjson path for a single segment
	segs  []string // gjson-escaped segments when the path is nested
	first string   // the first segment: the member name it matches
	// numeric: the field is an aggregate's number. For the other fields
	// (key, timestamp, distinct_approx) a number's text is all that is
	// read, so lookUp leaves its Num unset (see ParseMember).
	numeric bool
}

// ParseMember is gjson.Parse of a member's raw value as CheckObject hands
// it out (valid JSON, no space around it), except that a number is only
// typed unless num is set: its Raw is set and its Num, a float conversion
// a caller that reads the number's text does not need, is left zero.
//
// The other kinds are built here as gjson.Parse builds them (an object or
// array is only typed, its Raw the whole text), so that a member's value
// is not scanned a second time; a string with an escape goes to
// gjson.Parse, which unescapes it.
func ParseMember(raw string, num bool) gjson.Result {
	if raw == "" {
		return gjson.Result{}
	}
	switch c := raw[0]; {
	case c == '-' || c >= '0' && c <= '9':
		if !num {
			return gjson.Result{Type: gjson.Number, Raw: raw}
		}
		return gjson.Result{Type: gjson.Number, Raw: raw, Num: parseFloat(raw)}
	case c == '"':
		if strings.IndexByte(raw, '\\') < 0 {
			return gjson.Result{Type: gjson.String, Raw: raw, Str: raw[1 : len(raw)-1]}
		}
	case c == '{' || c == '[':
		return gjson.Result{Type: gjson.JSON, Raw: raw}
	case raw == "true":
		return gjson.Result{Type: gjson.True, Raw: raw}
	case raw == "false":
		return gjson.Result{Type: gjson.False, Raw: raw}
	case raw == "null":
		return gjson.Result{Type: gjson.Null, Raw: raw}
	}
	return gjson.Parse(raw)
}

// pow10 are the powers of ten a float64 holds exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseFloat is strconv.ParseFloat(s, 64) (what gjson.Parse gives as Num)
// for the valid JSON number s. A decimal of at most 15 digits without an
// exponent, the usual aggregate input, is read here: its digits are an
// integer below 2^53 and its fraction a power of ten up to 1e15, both exact
// in a float64, so one correctly rounded division is the nearest float64,
// as strconv's own exact path computes it. Anything else goes to strconv.
func parseFloat(s string) float64 {
	i, neg := 0, s[0] == '-'
	if neg {
		i = 1
	}
	var mant uint64
	digits, frac, dot := 0, 0, false
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			if digits++; digits > 15 {
				return slowFloat(s)
			}
			mant = mant*10 + uint64(c-'0')
			if dot {
				frac++
			}
		case c == '.':
			dot = true
		default: // an exponent
			return slowFloat(s)
		}
	}
	f := float64(mant) / pow10[frac]
	if neg {
		f = -f
	}
	return f
}

func slowFloat(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64) // out of range: ±Inf, as gjson
	return f
}

// get returns the value at the path in obj, a JSON object. Each segment is a
// literal member name of an object: nested paths are walked one object at a
// time, so a digit segment never indexes into an array and no segment is
// read as a gjson wildcard, modifier or query.
func (f *fieldPath) get(obj string) gjson.Result {
	if f.segs == nil {
		return gjson.Get(obj, f.path)
	}
	res := gjson.Result{Type: gjson.JSON, Raw: obj}
	for _, seg := range f.segs {
		if !res.IsObject() {
			return gjson.Result{}
		}
		res = gjson.Get(res.Raw, seg)
	}
	return res
}

// rest returns the value at the path's segments after the first in v, the
// value of the member its first segment names.
func (f *fieldPath) rest(v gjson.Result) gjson.Result {
	if len(f.segs) > 1 {
		for _, seg := range f.segs[1:] {
			if !v.IsObject() {
				return gjson.Result{}
			}
			v = gjson.Get(v.Raw, seg)
		}
	}
	return v
}

func newFieldPath(name string) fieldPath {
	f := fieldPath{name: name}
	parts := strings.Split(name, ".")
	f.first = parts[0]
	if len(parts) == 1 && parts[0] != "" {
		f.path = gjson.Escape(parts[0])
		return f
	}
	// Nested, or an empty name or segment: walk it (an empty segment
	// matches the member named "", and a path such as "..x" must not
	// reach gjson, which reads a leading ".." as JSON Lines).
	f.segs = make([]string, len(parts))
	for i, p := range parts {
		f.segs[i] = gjson.Escape(p)
	}
	return f
}

// aggInput is how one aggregate's input is read.
type aggInput struct {
	op    windowing.AggOp
	field int // index into Decoder.fields; -1 for count and expressions
	// exprErr prefixes an expression's error: "aggregate NAME: ".
	exprErr string

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
	d := &Decoder{keyIdx: -1, tsIdx: -1, x: newExprs(p), future: p.Timestamp.MaxFuture}
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
		if i < len(p.AggregateExprs) && p.AggregateExprs[i] != nil {
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
		if a.exprErr != "" {
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
	return nil
}

// LoneSurrogate returns the first \uXXXX escape of the JSON string r that
// is a lone surrogate (U+D800 … U+DFFF not in a high-low pair), or "".
// JSON readers turn every such escape into U+FFFD, so keys that differ in
// one would merge: a key with one is a dead letter (docs/SEMANTICS.md,
// Records and keys). A string without escapes (its text as long as its raw
// form less the quotes) is not scanned.
func LoneSurrogate(r *gjson.Result) string {
	raw := r.Raw
	if r.Type != gjson.String || len(raw) == len(r.Str)+2 {
		return ""
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++
		if i >= len(raw) || raw[i] != 'u' || i+4 >= len(raw) {
			continue
		}
		v, err := strconv.ParseUint(raw[i+1:i+5], 16, 16)
		if err != nil {
			continue
		}
		esc := raw[i-1 : i+5]
		i += 4
		switch {
		case v >= 0xdc00 && v <= 0xdfff:
			return esc
		case v >= 0xd800 && v <= 0xdbff:
			if i+6 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
				if lo, err := strconv.ParseUint(raw[i+3:i+7], 16, 16); err == nil && lo >= 0xdc00 && lo <= 0xdfff {
					i += 6
					continue
				}
			}
			return esc
		}
	}
	return ""
}

// UsesNow says Decode reads Record.Now (timestamp.max_future is set).
func (d *Decoder) UsesNow() bool { return d.future > 0 }

// msText is ms milliseconds as a Go duration string when it fits one.
func msText(ms uint64) string {
	if ms > uint64(math.MaxInt64/int64(time.Millisecond)) {
		return strconv.FormatUint(ms, 10) + "ms"
	}
	return time.Duration(int64(ms) * int64(time.Millisecond)).String()
}

// eventTime reads the timestamp field; it returns the time in Unix ms, or a
// non-empty reason.
func (d *Decoder) eventTime(r *gjson.Result) (int64, string) {
	if r.Type == gjson.Null { // missing or JSON null
		return 0, d.errs.tsMissing
	}
	if d.rfc3339 {
		if r.Type != gjson.String {
			return 0, d.errs.tsNotString
		}
		t, err := parseRFC3339(r.Str)
		if err != nil {
			return 0, d.errs.tsNotRFC3339 + quoteBounded(r.Str) + parseErrorDetail(err)
		}
		return t.UnixMilli(), "" // floors: nanoseconds are in [0, 1e9)
	}
	var text string
	switch r.Type {
	case gjson.Number:
		text = r.Raw
	case gjson.String:
		text = r.Str
		if !isJSONNumber(text) {
			return 0, d.errs.tsNotNumber
		}
	default:
		return 0, d.errs.tsNotNumber
	}
	ms, ok := unixMillis(text, d.tsScale)
	if !ok {
		return 0, d.errs.tsOutOfRange
	}
	return ms, ""
}

// quoteBounded quotes s, cut to maxQuoted bytes.
func quoteBounded(s string) string {
	if len(s) > maxQuoted {
		return strconv.Quote(s[:maxQuoted]) + "..."
	}
	return strconv.Quote(s)
}

// parseErrorDetail returns ": <what>" for a time.ParseError that says more
// than "cannot parse" (such as "month out of range"), else "".
func parseErrorDetail(err error) string {
	if pe, ok := err.(*time.ParseError); ok && pe.Message != "" {
		return ": " + strings.TrimPrefix(pe.Message, ": ")
	}
	return ""
}

// skipDigits returns the index of the first non-digit of s at or after i.
func skipDigits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// isJSONNumber reports whether s is a number in JSON syntax.
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i = skipDigits(s, i)
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		j := skipDigits(s, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := skipDigits(s, i)
		if j == i {
			return false
		}
		i = j
	}
	return i == len(s)
}

// unixMillis returns floor(x * 10^scale) for the JSON number text s, or
// false when that is outside int64. Integers are read with strconv.ParseInt;
// fractions, exponents and integers beyond int64 are scaled exactly in decimal, so that, say,
// 1700000000.123 seconds is 1700000000123 ms and not one less, as a float64
// product can give.
func unixMillis(s string, scale int) (int64, bool) {
	if v, ok := shortInt(s); ok {
		return scaleInt(v, scale)
	}
	if strings.ContainsAny(s, ".eE") {
		return scaleDecimal(s, scale)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		// Beyond int64 in its own unit; it may still fit in ms (say, 2^63 ns).
		return scaleDecimal(s, scale)
	}
	return scaleInt(v, scale)
}

// shortInt reads the JSON number s when it is an integer of at most 18
// digits (below 10^18, within int64), the usual timestamp.
func shortInt(s string) (int64, bool) {
	i, neg := 0, s != "" && s[0] == '-'
	if neg {
		i = 1
	}
	if len(s)-i < 1 || len(s)-i > 18 {
		return 0, false
	}
	var v int64
	for ; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

// scaleInt returns floor(v * 10^scale), or false when that is outside int64.
func scaleInt(v int64, scale int) (int64, bool) {
	switch scale {
	case 3:
		if v > math.MaxInt64/1000 || v < math.MinInt64/1000 {
			return 0, false
		}
		return v * 1000, true
	case 0:
		return v, true
	case -3:
		return floorDiv(v, 1000), true
	default: // -6
		return floorDiv(v, 1000000), true
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// scaleDecimal returns floor(x * 10^scale) for the JSON number text s
// (with a fraction or exponent), or false when that is outside int64.
func scaleDecimal(s string, scale int) (int64, bool) {
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		e := s[i+1:]
		eneg := false
		if e[0] == '+' || e[0] == '-' {
			eneg = e[0] == '-'
			e = e[1:]
		}
		for k := 0; k < len(e); k++ {
			if exp < 1<<30 { // saturate: far beyond any int64 anyway
				exp = exp*10 + int(e[k]-'0')
			}
		}
		if eneg {
			exp = -exp
		}
	}
	ip, fp := mant, ""
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		ip, fp = mant[:i], mant[i+1:]
	}
	// The digits are ip followed by fp; x = digits * 10^(exp - len(fp)).
	n := len(ip) + len(fp)
	digit := func(i int) byte {
		if i < len(ip) {
			return ip[i]
		}
		return fp[i-len(ip)]
	}
	first := 0
	for first < n && digit(first) == '0' {
		first++
	}
	if first == n {
		return 0, true
	}
	e := exp - len(fp) + scale
	last := n - 1
	for digit(last) == '0' {
		last--
		e++
	}
	// x * 10^scale = D * 10^e, D = digits[first..last] with no leading or
	// trailing zeros.
	l := last - first + 1
	var mag uint64
	if e >= 0 {
		if l+e > 19 { // >= 10^19 > 2^63
			return 0, false
		}
		for i := first; i <= last; i++ {
			mag = mag*10 + uint64(digit(i)-'0')
		}
		for ; e > 0; e-- {
			mag *= 10
		}
	} else {
		// Drop the last -e digits; they are not all zero (D's last digit
		// is not), so the value has a fraction.
		keep := l + e
		if keep > 19 {
			return 0, false
		}
		for i := first; i < first+keep; i++ {
			mag = mag*10 + uint64(digit(i)-'0')
		}
		if neg {
			mag++ // floor toward minus infinity
		}
	}
	if neg {
		if mag > 1<<63 {
			return 0, false
		}
		return int64(-mag), true
	}
	if mag > math.MaxInt64 {
		return 0, false
	}
	return int64(mag), true
}
