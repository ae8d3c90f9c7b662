package source

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// This file holds the lookup of a pipeline's field paths in a JSON value
// and the checks of what it finds.

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
