package replay

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/windowd/windowd/expr"
	"github.com/windowd/windowd/source"
	"github.com/windowd/windowd/windowing"
)

// One input line: a record (decoded and fed to the engine), a clock line,
// or a dead letter with its reason.

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
