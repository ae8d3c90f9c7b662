package source

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	metro "github.com/dgryski/go-metro"

	"github.com/tidwall/gjson"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/windowing"
)

// pipeline returns a pipeline reading key from keyField (empty: record key)
// and time from tsField in format (empty tsField: the record timestamp).
func pipeline(keyField, tsField string, format config.TimeFormat, aggs ...windowing.AggSpec) *config.Pipeline {
	p := &config.Pipeline{Name: "test"}
	p.Key.Field = keyField
	if tsField == "" {
		p.Timestamp.FromRecord = true
	} else {
		p.Timestamp.Field = tsField
		p.Timestamp.Format = format
	}
	p.Spec.Aggregates = aggs
	return p
}

func reason(err error) string {
	if err == nil {
		return ""
	}
	var de *DecodeError
	if !errors.As(err, &de) {
		return "not a *DecodeError: " + err.Error()
	}
	return de.Reason
}

func TestDecodeKey(t *testing.T) {
	tests := []struct {
		name    string
		field   string
		key     []byte
		value   string
		want    string
		wantErr string
	}{
		{name: "record key", key: []byte("u1"), value: `{"a":1}`, want: "u1"},
		{name: "empty record key", key: []byte{}, value: `{}`, want: ""},
		{name: "null record key", key: nil, value: `{}`, wantErr: `record key is null`},
		{name: "record key, non-object value", key: []byte("k"), value: `[1,2]`, want: "k"},
		{name: "field string", field: "user_id", value: `{"user_id":"u1"}`, want: "u1"},
		{name: "field string with escapes", field: "user_id", value: `{"user_id":"a\"b\u00e9"}`, want: "a\"bé"},
		{name: "nested field", field: "payload.user.id", value: `{"payload":{"x":1,"user":{"id":"u9"}}}`, want: "u9"},
		{name: "number", field: "k", value: `{"k":7}`, want: "7"},
		{name: "number as written", field: "k", value: `{"k":7.50}`, want: "7.50"},
		{name: "negative exponent number", field: "k", value: `{"k":-1e3}`, want: "-1e3"},
		{name: "true", field: "k", value: `{"k":true}`, want: "true"},
		{name: "false", field: "k", value: `{"k":false}`, want: "false"},
		{name: "object as it appears", field: "k", value: `{"k":{"a": 1, "b":[1, 2]}}`, want: `{"a": 1, "b":[1, 2]}`},
		{name: "array", field: "k", value: `{"k":[1,"x"]}`, want: `[1,"x"]`},
		{name: "empty string", field: "k", value: `{"k":""}`, want: ""},
		{name: "record key ignored", field: "k", key: []byte("rk"), value: `{"k":"fk"}`, want: "fk"},
		{name: "missing", field: "user_id", value: `{"user":"u1"}`, wantErr: `key field "user_id" is missing`},
		{name: "null", field: "user_id", value: `{"user_id":null}`, wantErr: `key field "user_id" is null`},
		{name: "nested missing", field: "a.b", value: `{"a":{"c":1}}`, wantErr: `key field "a.b" is missing`},
		{name: "nested through non-object", field: "a.b", value: `{"a":"b"}`, wantErr: `key field "a.b" is missing`},
		{name: "nested through array", field: "a.b", value: `{"a":[{"b":1}]}`, wantErr: `key field "a.b" is missing`},
		{name: "digit segment is not an array index", field: "a.0", value: `{"a":["x"]}`, wantErr: `key field "a.0" is missing`},
		{name: "digit segment is a member name", field: "a.0", value: `{"a":{"0":"zero"}}`, want: "zero"},
		{name: "top-level digit member", field: "0", value: `{"0":"zero"}`, want: "zero"},
		{name: "first of duplicate members", field: "k", value: `{"k":"one","k":"two"}`, want: "one"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoder(pipeline(tc.field, "", config.UnixMS))
			var ev windowing.Event
			err := d.Decode(&Record{Key: tc.key, Value: []byte(tc.value)}, &ev)
			if got := reason(err); got != tc.wantErr {
				t.Fatalf("error = %q, want %q", got, tc.wantErr)
			}
			if err == nil && ev.Key != tc.want {
				t.Fatalf("key = %q, want %q", ev.Key, tc.want)
			}
		})
	}
}

func TestDecodeSpecialFieldNames(t *testing.T) {
	// Each name holds its own value; decoys placed first would be matched by
	// a wildcard, a query or a modifier if the name were not read literally.
	value := `{
		"axb": "decoy", "ab": "decoy",
		"a*b": "star", "a?b": "question", "#": "hash", "a#b": "hash2",
		"@this": "at", "a|b": "pipe", "a\\b": "backslash", "!true": "bang",
		"a=b": "eq", "<": "lt", ">": "gt", "%": "pct", "(x)": "parens",
		"[0]": "brackets", "{}": "braces", "a,b": "comma", "a b": "space",
		"a\"b": "quote", "'": "apos", "$": "dollar", "~": "tilde", "a/b": "slash",
		"é": "eacute", "a:b": "colon", "a-b_c": "dash", "..": "dots-not-reachable",
		"n": {"a*b": "nested-star", "#": "nested-hash", "@this": "nested-at", "0": "nested-zero"},
		"arr": [1, 2, 3]
	}`
	tests := []struct {
		field, want, wantErr string
	}{
		{field: "a*b", want: "star"},
		{field: "a?b", want: "question"},
		{field: "#", want: "hash"},
		{field: "a#b", want: "hash2"},
		{field: "@this", want: "at"},
		{field: "a|b", want: "pipe"},
		{field: `a\b`, want: "backslash"},
		{field: "!true", want: "bang"},
		{field: "a=b", want: "eq"},
		{field: "<", want: "lt"},
		{field: ">", want: "gt"},
		{field: "%", want: "pct"},
		{field: "(x)", want: "parens"},
		{field: "[0]", want: "brackets"},
		{field: "{}", want: "braces"},
		{field: "a,b", want: "comma"},
		{field: "a b", want: "space"},
		{field: `a"b`, want: "quote"},
		{field: "'", want: "apos"},
		{field: "$", want: "dollar"},
		{field: "~", want: "tilde"},
		{field: "a/b", want: "slash"},
		{field: "é", want: "eacute"},
		{field: "a:b", want: "colon"},
		{field: "a-b_c", want: "dash"},
		{field: "n.a*b", want: "nested-star"},
		{field: "n.#", want: "nested-hash"},
		{field: "n.@this", want: "nested-at"},
		{field: "n.0", want: "nested-zero"},
		{field: "a?", wantErr: `key field "a?" is missing`},
		{field: "*", wantErr: `key field "*" is missing`},
		{field: "arr.#", wantErr: `key field "arr.#" is missing`},
		{field: "arr.0", wantErr: `key field "arr.0" is missing`},
		{field: "@reverse", wantErr: `key field "@reverse" is missing`},
		// Empty segments never match (config should reject them anyway).
		{field: "..", wantErr: `key field ".." is missing`},
		{field: "n.", wantErr: `key field "n." is missing`},
	}
	for _, tc := range tests {
		t.Run(tc.field, func(t *testing.T) {
			d := NewDecoder(pipeline(tc.field, "", config.UnixMS))
			var ev windowing.Event
			err := d.Decode(&Record{Value: []byte(value)}, &ev)
			if got := reason(err); got != tc.wantErr {
				t.Fatalf("error = %q, want %q", got, tc.wantErr)
			}
			if err == nil && ev.Key != tc.want {
				t.Fatalf("key = %q, want %q", ev.Key, tc.want)
			}
		})
	}
}

func TestDecodeTime(t *testing.T) {
	const (
		s   = config.UnixS
		ms  = config.UnixMS
		us  = config.UnixUS
		ns  = config.UnixNS
		rfc = config.RFC3339
	)
	tests := []struct {
		format  config.TimeFormat
		ts      string // the JSON text of field "ts"; empty: absent
		want    int64
		wantErr string
	}{
		// unix_ms
		{format: ms, ts: `1700000000000`, want: 1700000000000},
		{format: ms, ts: `0`, want: 0},
		{format: ms, ts: `-0`, want: 0},
		{format: ms, ts: `-5`, want: -5},
		{format: ms, ts: `1.5`, want: 1},
		{format: ms, ts: `-1.5`, want: -2},
		{format: ms, ts: `-0.0`, want: 0},
		{format: ms, ts: `1.7e12`, want: 1700000000000},
		{format: ms, ts: `17E11`, want: 1700000000000},
		{format: ms, ts: `1e-400`, want: 0},
		{format: ms, ts: `-1e-400`, want: -1},
		{format: ms, ts: `9223372036854775807`, want: math.MaxInt64},
		{format: ms, ts: `-9223372036854775808`, want: math.MinInt64},
		{format: ms, ts: `-9223372036854775808.0`, want: math.MinInt64},
		{format: ms, ts: `9223372036854775807.9`, want: math.MaxInt64},
		{format: ms, ts: `9223372036854775808`, wantErr: `timestamp field "ts" is out of range`},
		{format: ms, ts: `-9223372036854775808.5`, wantErr: `timestamp field "ts" is out of range`},
		{format: ms, ts: `-9223372036854775809`, wantErr: `timestamp field "ts" is out of range`},
		{format: ms, ts: `1e400`, wantErr: `timestamp field "ts" is out of range`},
		{format: ms, ts: `1e999999999999999999999`, wantErr: `timestamp field "ts" is out of range`},
		{format: ms, ts: `1e-999999999999999999999`, want: 0},
		{format: ms, ts: `0e999999999`, want: 0},
		{format: ms, ts: `"1700000000000"`, want: 1700000000000},
		{format: ms, ts: `"-1.5"`, want: -2},
		{format: ms, ts: `"1.7e12"`, want: 1700000000000},
		// unix_s
		{format: s, ts: `1700000000`, want: 1700000000000},
		{format: s, ts: `1.5`, want: 1500},
		{format: s, ts: `-1.5`, want: -1500},
		{format: s, ts: `-0.0005`, want: -1},
		{format: s, ts: `0.0005`, want: 0},
		{format: s, ts: `1.005`, want: 1005}, // float64: 1.005*1000 = 1004.99...
		{format: s, ts: `1700000000.123`, want: 1700000000123},
		{format: s, ts: `1700000000.123456`, want: 1700000000123},
		{format: s, ts: `-1700000000.123456`, want: -1700000000124},
		{format: s, ts: `1.7e9`, want: 1700000000000},
		{format: s, ts: `1E+9`, want: 1000000000000},
		{format: s, ts: `170000000000e-2`, want: 1700000000000},
		{format: s, ts: `"1700000000.999"`, want: 1700000000999},
		{format: s, ts: `"1700000000"`, want: 1700000000000},
		{format: s, ts: `9223372036854775`, want: 9223372036854775000},
		{format: s, ts: `-9223372036854775.808`, want: math.MinInt64},
		{format: s, ts: `9223372036854776`, wantErr: `timestamp field "ts" is out of range`},
		{format: s, ts: `-9223372036854776`, wantErr: `timestamp field "ts" is out of range`},
		{format: s, ts: `9223372036854775.808`, wantErr: `timestamp field "ts" is out of range`},
		// unix_us
		{format: us, ts: `1999`, want: 1},
		{format: us, ts: `-1`, want: -1},
		{format: us, ts: `-1000`, want: -1},
		{format: us, ts: `-1001`, want: -2},
		{format: us, ts: `-1999`, want: -2},
		{format: us, ts: `1999.9`, want: 1},
		{format: us, ts: `1700000000123456`, want: 1700000000123},
		{format: us, ts: `"1700000000123456"`, want: 1700000000123},
		// unix_ns
		{format: ns, ts: `1700000000123456789`, want: 1700000000123},
		{format: ns, ts: `-1700000000123456789`, want: -1700000000124},
		{format: ns, ts: `"1700000000999999999"`, want: 1700000000999},
		{format: ns, ts: `-1`, want: -1},
		{format: ns, ts: `1999999`, want: 1},
		{format: ns, ts: `-1000000`, want: -1},
		{format: ns, ts: `-1000001`, want: -2},
		{format: ns, ts: `1.7e18`, want: 1700000000000},
		{format: ns, ts: `9223372036854775807`, want: 9223372036854},
		{format: ns, ts: `-9223372036854775808`, want: -9223372036855},
		// Beyond int64 nanoseconds but within int64 milliseconds.
		{format: ns, ts: `9223372036854775808`, want: 9223372036854},
		{format: ns, ts: `99999999999999999999999`, want: 99999999999999999},
		{format: ns, ts: `1` + strings.Repeat("0", 30), wantErr: `timestamp field "ts" is out of range`},
		// Not numbers.
		{format: ms, ts: `"abc"`, wantErr: `timestamp field "ts" is not a number`},
		{format: ms, ts: `""`, wantErr: `timestamp field "ts" is not a number`},
		{format: ms, ts: `" 1"`, wantErr: `timestamp field "ts" is not a number`},
		{format: ms, ts: `"1 "`, wantErr: `timestamp field "ts" is not a number`},
		{format: ms, ts: `"+1"`, wantErr: `timestamp field "ts" is not a number`},
		{format: ms, ts: `"0x10"`, wantErr: `timestamp field "ts" is not a number`},
		{format: ms, ts: `"1_000"`, wantErr: `timestamp field "ts" is not a number`},
		{format: ms, ts: `"NaN"`, wantErr: `timestamp field "ts" is not a number`},
		{format: ms, ts: `"Infinity"`, wantErr: `timestamp field "ts" is not a number`},
		{format: ms, ts: `"1."`, wantErr: `timestamp field "ts" is not a number`},
		{format: ms, ts: `".5"`, wantErr: `timestamp field "ts" is not a number`},
		{format: ms, ts: `"1e"`, wantErr: `timestamp field "ts" is not a number`},
		{format: ms, ts: `"01"`, wantErr: `timestamp field "ts" is not a number`},
		{format: ms, ts: `"-"`, wantErr: `timestamp field "ts" is not a number`},
		{format: ns, ts: `"2023-11-14T22:13:20Z"`, wantErr: `timestamp field "ts" is not a number`},
		{format: ms, ts: `true`, wantErr: `timestamp field "ts" is not a number`},
		{format: ms, ts: `{"t":1}`, wantErr: `timestamp field "ts" is not a number`},
		{format: ms, ts: `[1]`, wantErr: `timestamp field "ts" is not a number`},
		{format: ms, ts: `null`, wantErr: `timestamp field "ts" is missing`},
		{format: ms, ts: ``, wantErr: `timestamp field "ts" is missing`},
		// rfc3339
		{format: rfc, ts: `"2023-11-14T22:13:20Z"`, want: 1700000000000},
		{format: rfc, ts: `"2023-11-14T23:13:20+01:00"`, want: 1700000000000},
		{format: rfc, ts: `"2023-11-14T17:13:20-05:00"`, want: 1700000000000},
		{format: rfc, ts: `"2023-11-15T03:58:20+05:45"`, want: 1700000000000},
		{format: rfc, ts: `"2023-11-14T22:13:20.123456789Z"`, want: 1700000000123},
		{format: rfc, ts: `"2023-11-14T23:13:20.5+01:00"`, want: 1700000000500},
		{format: rfc, ts: `"1970-01-01T00:00:00Z"`, want: 0},
		{format: rfc, ts: `"1969-12-31T23:59:59.9995Z"`, want: -1},
		{format: rfc, ts: `"1969-12-31T23:59:59Z"`, want: -1000},
		{format: rfc, ts: `"1970-01-01T01:00:00.001+01:00"`, want: 1},
		{format: rfc, ts: `"0001-01-01T00:00:00Z"`, want: -62135596800000},
		{format: rfc, ts: `"2023-11-14 22:13:20Z"`, wantErr: `timestamp field "ts" is not an RFC 3339 time: "2023-11-14 22:13:20Z"`},
		{format: rfc, ts: `"2023-11-14T22:13:20"`, wantErr: `timestamp field "ts" is not an RFC 3339 time: "2023-11-14T22:13:20"`},
		{format: rfc, ts: `"2023-13-01T00:00:00Z"`, wantErr: `timestamp field "ts" is not an RFC 3339 time: "2023-13-01T00:00:00Z": month out of range`},
		{format: rfc, ts: `"2023-11-14T25:13:20Z"`, wantErr: `timestamp field "ts" is not an RFC 3339 time: "2023-11-14T25:13:20Z": hour out of range`},
		{format: rfc, ts: `"1700000000"`, wantErr: `timestamp field "ts" is not an RFC 3339 time: "1700000000"`},
		{format: rfc, ts: `""`, wantErr: `timestamp field "ts" is not an RFC 3339 time: ""`},
		{format: rfc, ts: `"bad\nline"`, wantErr: `timestamp field "ts" is not an RFC 3339 time: "bad\nline"`},
		{format: rfc, ts: `"` + strings.Repeat("x", 100) + `"`, wantErr: `timestamp field "ts" is not an RFC 3339 time: "` + strings.Repeat("x", 64) + `"...`},
		{format: rfc, ts: `1700000000`, wantErr: `timestamp field "ts" is not a string`},
		{format: rfc, ts: `null`, wantErr: `timestamp field "ts" is missing`},
		{format: rfc, ts: ``, wantErr: `timestamp field "ts" is missing`},
	}
	names := map[config.TimeFormat]string{s: "unix_s", ms: "unix_ms", us: "unix_us", ns: "unix_ns", rfc: "rfc3339"}
	for _, tc := range tests {
		t.Run(names[tc.format]+"/"+tc.ts, func(t *testing.T) {
			d := NewDecoder(pipeline("", "ts", tc.format))
			value := `{"other":1}`
			if tc.ts != "" {
				value = `{"other":1,"ts":` + tc.ts + `}`
			}
			var ev windowing.Event
			err := d.Decode(&Record{Key: []byte("k"), Value: []byte(value), Timestamp: 42}, &ev)
			if got := reason(err); got != tc.wantErr {
				t.Fatalf("error = %q, want %q", got, tc.wantErr)
			}
			if err == nil && ev.Time != tc.want {
				t.Fatalf("time = %d, want %d", ev.Time, tc.want)
			}
		})
	}
}

// unixMillis must equal floor(x * 10^scale) computed with exact rationals.
func TestUnixMillisMatchesBig(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	digits := func(n int) string {
		var sb strings.Builder
		for range n {
			sb.WriteByte(byte('0' + rng.IntN(10)))
		}
		return sb.String()
	}
	minI, maxI := big.NewInt(math.MinInt64), big.NewInt(math.MaxInt64)
	for range 20000 {
		var sb strings.Builder
		if rng.IntN(2) == 0 {
			sb.WriteByte('-')
		}
		if in := digits(rng.IntN(22)); in == "" || in[0] == '0' {
			sb.WriteString("1" + in)
		} else {
			sb.WriteString(in)
		}
		if rng.IntN(2) == 0 {
			sb.WriteString("." + digits(1+rng.IntN(12)))
		}
		if rng.IntN(3) == 0 {
			sb.WriteString("e" + strconv.Itoa(rng.IntN(41)-20))
		}
		s := sb.String()
		scale := []int{3, 0, -3, -6}[rng.IntN(4)]

		r, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("big.Rat cannot parse %q", s)
		}
		p := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(scale))), nil))
		if scale >= 0 {
			r.Mul(r, p)
		} else {
			r.Quo(r, p)
		}
		floor := new(big.Int).Div(r.Num(), r.Denom()) // Euclidean: floor for a positive denominator
		wantOK := floor.Cmp(minI) >= 0 && floor.Cmp(maxI) <= 0

		got, gotOK := unixMillis(s, scale)
		if gotOK != wantOK || (wantOK && got != floor.Int64()) {
			t.Fatalf("unixMillis(%q, %d) = %d, %v; want %s, %v", s, scale, got, gotOK, floor, wantOK)
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func TestDecodeTimeFromRecord(t *testing.T) {
	d := NewDecoder(pipeline("", "", config.UnixMS))
	for _, ts := range []int64{0, -1, 1700000000000, math.MinInt64} {
		var ev windowing.Event
		// The value is not an object, and need not be: no field is read.
		if err := d.Decode(&Record{Partition: 3, Offset: 99, Key: []byte("k"), Value: []byte(`"s"`), Timestamp: ts}, &ev); err != nil {
			t.Fatal(err)
		}
		want := windowing.Event{Partition: 3, Offset: 99, Key: "k", Time: ts, Inputs: []windowing.Input{}}
		if ev.Partition != want.Partition || ev.Offset != want.Offset || ev.Key != want.Key || ev.Time != want.Time || len(ev.Inputs) != 0 {
			t.Fatalf("event = %+v, want %+v", ev, want)
		}
	}
}

func TestDecodeInputs(t *testing.T) {
	p := pipeline("", "", config.UnixMS,
		windowing.AggSpec{Name: "n", Op: windowing.Count},
		windowing.AggSpec{Name: "revenue", Op: windowing.Sum, Field: "amount"},
		windowing.AggSpec{Name: "lo", Op: windowing.Min, Field: "amount"},
		windowing.AggSpec{Name: "hi", Op: windowing.Max, Field: "price"},
		windowing.AggSpec{Name: "mean", Op: windowing.Avg, Field: "m.x"},
		windowing.AggSpec{Name: "users", Op: windowing.DistinctApprox, Field: "user"},
	)
	h := func(s string) uint64 { return metro.Hash64([]byte(s), 1337) }
	tests := []struct {
		name    string
		value   string
		want    []windowing.Input
		wantErr string
	}{
		{
			name:  "numbers and string",
			value: `{"amount":12.5,"price":-3,"m":{"x":1e3},"user":"u1"}`,
			want:  []windowing.Input{{}, {Num: 12.5}, {Num: 12.5}, {Num: -3}, {Num: 1000}, {Hash: h("u1")}},
		},
		{
			name:  "distinct of escaped string hashes the text",
			value: `{"amount":0,"price":0,"m":{"x":0},"user":"a\u0062\"c"}`,
			want:  []windowing.Input{{}, {}, {}, {}, {}, {Hash: h(`ab"c`)}},
		},
		{
			name:  "distinct of a number hashes its raw text",
			value: `{"amount":0,"price":0,"m":{"x":0},"user":7.0}`,
			want:  []windowing.Input{{}, {}, {}, {}, {}, {Hash: h("7.0")}},
		},
		{
			name:  "distinct of an object hashes its raw text",
			value: `{"amount":0,"price":0,"m":{"x":0},"user":{"id": 1}}`,
			want:  []windowing.Input{{}, {}, {}, {}, {}, {Hash: h(`{"id": 1}`)}},
		},
		{
			name:  "distinct of true",
			value: `{"amount":0,"price":0,"m":{"x":0},"user":true}`,
			want:  []windowing.Input{{}, {}, {}, {}, {}, {Hash: h("true")}},
		},
		{
			name:  "large and tiny numbers",
			value: `{"amount":1.7976931348623157e308,"price":5e-324,"m":{"x":-0},"user":""}`,
			want:  []windowing.Input{{}, {Num: math.MaxFloat64}, {Num: math.MaxFloat64}, {Num: 5e-324}, {Num: 0}, {Hash: h("")}},
		},
		{name: "missing number", value: `{"price":1,"m":{"x":1},"user":"u"}`, wantErr: `field "amount" (aggregate revenue) is missing`},
		{name: "null number", value: `{"amount":null,"price":1,"m":{"x":1},"user":"u"}`, wantErr: `field "amount" (aggregate revenue) is null`},
		{name: "numeric string", value: `{"amount":"12.5","price":1,"m":{"x":1},"user":"u"}`, wantErr: `field "amount" (aggregate revenue) is not a number`},
		{name: "bool", value: `{"amount":1,"price":true,"m":{"x":1},"user":"u"}`, wantErr: `field "price" (aggregate hi) is not a number`},
		{name: "object", value: `{"amount":1,"price":1,"m":{"x":{}},"user":"u"}`, wantErr: `field "m.x" (aggregate mean) is not a number`},
		{name: "nested missing", value: `{"amount":1,"price":1,"m":2,"user":"u"}`, wantErr: `field "m.x" (aggregate mean) is missing`},
		{name: "overflow", value: `{"amount":1e309,"price":1,"m":{"x":1},"user":"u"}`, wantErr: `field "amount" (aggregate revenue) is out of range`},
		{name: "negative overflow", value: `{"amount":1,"price":-1e309,"m":{"x":1},"user":"u"}`, wantErr: `field "price" (aggregate hi) is out of range`},
		{name: "distinct missing", value: `{"amount":1,"price":1,"m":{"x":1}}`, wantErr: `field "user" (aggregate users) is missing`},
		{name: "distinct null", value: `{"amount":1,"price":1,"m":{"x":1},"user":null}`, wantErr: `field "user" (aggregate users) is null`},
	}
	d := NewDecoder(p)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Inputs are reused: stale values must be overwritten.
			ev := windowing.Event{Inputs: make([]windowing.Input, 8)}
			for i := range ev.Inputs {
				ev.Inputs[i] = windowing.Input{Num: 99, Hash: 99}
			}
			backing := &ev.Inputs[0]
			err := d.Decode(&Record{Key: []byte("k"), Value: []byte(tc.value)}, &ev)
			if got := reason(err); got != tc.wantErr {
				t.Fatalf("error = %q, want %q", got, tc.wantErr)
			}
			if err != nil {
				return
			}
			if len(ev.Inputs) != len(tc.want) {
				t.Fatalf("len(Inputs) = %d, want %d", len(ev.Inputs), len(tc.want))
			}
			if &ev.Inputs[0] != backing {
				t.Fatalf("Inputs was reallocated")
			}
			for i := range tc.want {
				if ev.Inputs[i] != tc.want[i] {
					t.Fatalf("Inputs[%d] = %+v, want %+v", i, ev.Inputs[i], tc.want[i])
				}
			}
		})
	}
}

// TestDecodeSketchInputs: quantiles reads a number as sum does; top_k
// reads the text distinct_approx hashes (a string's value, any other
// value's JSON text as it appears).
func TestDecodeSketchInputs(t *testing.T) {
	d := NewDecoder(pipeline("", "", config.UnixMS,
		windowing.AggSpec{Name: "lat", Op: windowing.Quantiles, Field: "ms"},
		windowing.AggSpec{Name: "pages", Op: windowing.TopK, Field: "page"},
	))
	tests := []struct {
		value   string
		want    []windowing.Input
		wantErr string
	}{
		{value: `{"ms":-2.5,"page":"/home"}`, want: []windowing.Input{{Num: -2.5}, {Text: "/home"}}},
		{value: `{"ms":0,"page":"a\u0062\"c"}`, want: []windowing.Input{{}, {Text: `ab"c`}}},
		{value: `{"ms":1e3,"page":7.0}`, want: []windowing.Input{{Num: 1000}, {Text: "7.0"}}},
		{value: `{"ms":1,"page":{"id": 1}}`, want: []windowing.Input{{Num: 1}, {Text: `{"id": 1}`}}},
		{value: `{"ms":"12","page":"/"}`, wantErr: `field "ms" (aggregate lat) is not a number`},
		{value: `{"ms":1e309,"page":"/"}`, wantErr: `field "ms" (aggregate lat) is out of range`},
		{value: `{"ms":1}`, wantErr: `field "page" (aggregate pages) is missing`},
		{value: `{"ms":1,"page":null}`, wantErr: `field "page" (aggregate pages) is null`},
	}
	for _, tc := range tests {
		ev := windowing.Event{Inputs: []windowing.Input{{Num: 99, Text: "stale"}, {Num: 99, Text: "stale"}}}
		err := d.Decode(&Record{Key: []byte("k"), Value: []byte(tc.value)}, &ev)
		if got := reason(err); got != tc.wantErr {
			t.Fatalf("%s: error = %q, want %q", tc.value, got, tc.wantErr)
		}
		if err == nil && !slices.Equal(ev.Inputs, tc.want) {
			t.Fatalf("%s: inputs %+v, want %+v", tc.value, ev.Inputs, tc.want)
		}
	}
}

func TestDecodeInputsGrow(t *testing.T) {
	d := NewDecoder(pipeline("", "", config.UnixMS,
		windowing.AggSpec{Name: "n", Op: windowing.Count},
		windowing.AggSpec{Name: "s", Op: windowing.Sum, Field: "v"},
	))
	var ev windowing.Event
	if err := d.Decode(&Record{Key: []byte("k"), Value: []byte(`{"v":2}`)}, &ev); err != nil {
		t.Fatal(err)
	}
	if len(ev.Inputs) != 2 || ev.Inputs[0] != (windowing.Input{}) || ev.Inputs[1] != (windowing.Input{Num: 2}) {
		t.Fatalf("Inputs = %+v", ev.Inputs)
	}
}

func TestDecodeBadValue(t *testing.T) {
	fieldPipe := pipeline("k", "", config.UnixMS)
	recordPipe := pipeline("", "", config.UnixMS, windowing.AggSpec{Name: "n", Op: windowing.Count})
	tests := []struct {
		name    string
		p       *config.Pipeline
		value   []byte
		wantErr string
	}{
		{name: "nil", p: fieldPipe, value: nil, wantErr: `value is not valid JSON`},
		{name: "empty", p: fieldPipe, value: []byte{}, wantErr: `value is not valid JSON`},
		{name: "blank", p: fieldPipe, value: []byte("  \n"), wantErr: `value is not valid JSON`},
		{name: "truncated", p: fieldPipe, value: []byte(`{"k":`), wantErr: `value is not valid JSON`},
		{name: "trailing garbage", p: fieldPipe, value: []byte(`{"k":1}x`), wantErr: `value is not valid JSON`},
		{name: "trailing comma", p: fieldPipe, value: []byte(`{"k":1,}`), wantErr: `value is not valid JSON`},
		{name: "single quotes", p: fieldPipe, value: []byte(`{'k':1}`), wantErr: `value is not valid JSON`},
		{name: "text", p: fieldPipe, value: []byte(`hello`), wantErr: `value is not valid JSON`},
		{name: "two values", p: fieldPipe, value: []byte(`{} {}`), wantErr: `value is not valid JSON`},
		{name: "array", p: fieldPipe, value: []byte(`[{"k":1}]`), wantErr: `value is not a JSON object`},
		{name: "string", p: fieldPipe, value: []byte(`"k"`), wantErr: `value is not a JSON object`},
		{name: "number", p: fieldPipe, value: []byte(`1`), wantErr: `value is not a JSON object`},
		{name: "null", p: fieldPipe, value: []byte(`null`), wantErr: `value is not a JSON object`},
		{name: "spaced array", p: fieldPipe, value: []byte(" \n\t[ ]"), wantErr: `value is not a JSON object`},
		{name: "spaced object", p: fieldPipe, value: []byte(" \r\n\t{\"k\":\"v\"} \n"), wantErr: ``},
		// No field is read: any JSON value will do, but it must be JSON.
		{name: "no fields, array", p: recordPipe, value: []byte(`[1]`), wantErr: ``},
		{name: "no fields, null", p: recordPipe, value: []byte(`null`), wantErr: ``},
		{name: "no fields, bad JSON", p: recordPipe, value: []byte(`{bad`), wantErr: `value is not valid JSON`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ev windowing.Event
			err := NewDecoder(tc.p).Decode(&Record{Partition: 1, Offset: 5, Key: []byte("rk"), Value: tc.value}, &ev)
			if got := reason(err); got != tc.wantErr {
				t.Fatalf("error = %q, want %q", got, tc.wantErr)
			}
			if ev.Partition != 1 || ev.Offset != 5 {
				t.Fatalf("partition/offset = %d/%d, want 1/5", ev.Partition, ev.Offset)
			}
		})
	}
}

func TestDecodeDeepValue(t *testing.T) {
	d := NewDecoder(pipeline("k", "", config.UnixMS))
	nested := func(depth, pad int) []byte {
		return []byte(`{"k":"v","p":"` + strings.Repeat("[", pad) + `","a":` +
			strings.Repeat("[", depth) + strings.Repeat("]", depth) + "}")
	}
	tests := []struct {
		name    string
		value   []byte
		wantErr string
	}{
		// Would overflow the stack in gjson's recursive validation.
		{name: "ten million [", value: bytes.Repeat([]byte("["), 10_000_000), wantErr: `value is nested too deeply`},
		{name: "deep but valid", value: nested(maxDepth, deepCheckLen), wantErr: `value is nested too deeply`},
		{name: "at the limit", value: nested(maxDepth-1, deepCheckLen), wantErr: ``},
		// Brackets in strings do not count.
		{name: "brackets in a string", value: nested(10, 2*maxDepth+deepCheckLen), wantErr: ``},
		{name: "escaped quote in a string", value: []byte(`{"k":"v","p":"\"` + strings.Repeat("[", deepCheckLen) + `"}`), wantErr: ``},
		// Short values are not checked, and are shallow enough for gjson.
		{name: "short and deep", value: bytes.Repeat([]byte("["), deepCheckLen), wantErr: `value is not valid JSON`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ev windowing.Event
			err := d.Decode(&Record{Value: tc.value}, &ev)
			if got := reason(err); got != tc.wantErr {
				t.Fatalf("error = %q, want %q", got, tc.wantErr)
			}
		})
	}
}

func TestDecodeErrorType(t *testing.T) {
	d := NewDecoder(pipeline("k", "", config.UnixMS))
	err := d.Decode(&Record{Value: []byte(`{`)}, &windowing.Event{})
	de, ok := err.(*DecodeError)
	if !ok {
		t.Fatalf("error %T, want *DecodeError", err)
	}
	if de.Error() != de.Reason || de.Reason != "value is not valid JSON" {
		t.Fatalf("Error() = %q, Reason = %q", de.Error(), de.Reason)
	}
}

func TestDecodeFull(t *testing.T) {
	d := NewDecoder(pipeline("user_id", "ts", config.UnixMS,
		windowing.AggSpec{Name: "clicks", Op: windowing.Count},
		windowing.AggSpec{Name: "revenue", Op: windowing.Sum, Field: "amount"},
		windowing.AggSpec{Name: "users", Op: windowing.DistinctApprox, Field: "user_id"},
	))
	var ev windowing.Event
	rec := &Record{Partition: 2, Offset: 17, Key: []byte("ignored"), Value: []byte(`{"user_id":"u1","ts":1700000000123,"amount":9.75}`), Timestamp: 5}
	if err := d.Decode(rec, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Partition != 2 || ev.Offset != 17 || ev.Key != "u1" || ev.Time != 1700000000123 {
		t.Fatalf("event = %+v", ev)
	}
	want := []windowing.Input{{}, {Num: 9.75}, {Hash: metro.Hash64([]byte("u1"), 1337)}}
	for i := range want {
		if ev.Inputs[i] != want[i] {
			t.Fatalf("Inputs[%d] = %+v, want %+v", i, ev.Inputs[i], want[i])
		}
	}
	// Errors are reported key first, then time, then aggregates in order.
	err := d.Decode(&Record{Value: []byte(`{"amount":"x"}`)}, &ev)
	if got := reason(err); got != `key field "user_id" is missing` {
		t.Fatalf("error = %q", got)
	}
	err = d.Decode(&Record{Value: []byte(`{"user_id":1,"amount":"x"}`)}, &ev)
	if got := reason(err); got != `timestamp field "ts" is missing` {
		t.Fatalf("error = %q", got)
	}
}

func TestDecodeNoAllocs(t *testing.T) {
	// Nothing is allocated: the key points into the value (Event.Key;
	// windowing's TestEventKeysMayBeOverwritten checks that the engine
	// copies the keys it keeps).
	d := NewDecoder(pipeline("user_id", "ts", config.UnixMS,
		windowing.AggSpec{Name: "n", Op: windowing.Count},
		windowing.AggSpec{Name: "revenue", Op: windowing.Sum, Field: "amount"},
		windowing.AggSpec{Name: "users", Op: windowing.DistinctApprox, Field: "page.path"},
	))
	rec := &Record{Value: []byte(`{"user_id":"u1","ts":"1700000000123","amount":1.5,"page":{"path":"/x"}}`)}
	var ev windowing.Event
	allocs := testing.AllocsPerRun(100, func() {
		if err := d.Decode(rec, &ev); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("allocs per Decode = %v, want 0", allocs)
	}
}

func fuzzDecoders() []*Decoder {
	aggs := []windowing.AggSpec{
		{Name: "n", Op: windowing.Count},
		{Name: "s", Op: windowing.Sum, Field: "v"},
		{Name: "m", Op: windowing.Max, Field: "a.b"},
		{Name: "d", Op: windowing.DistinctApprox, Field: "k"},
	}
	var ds []*Decoder
	for _, f := range []config.TimeFormat{config.UnixS, config.UnixMS, config.UnixUS, config.UnixNS, config.RFC3339} {
		ds = append(ds, NewDecoder(pipeline("k", "ts", f, aggs...)))
	}
	ds = append(ds,
		NewDecoder(pipeline("", "", config.UnixMS)),
		NewDecoder(pipeline("a.b.c", "x.ts", config.UnixNS, aggs[1:]...)),
		NewDecoder(pipeline("a*b", "#", config.UnixMS, windowing.AggSpec{Name: "q", Op: windowing.Avg, Field: "@this"})),
		NewDecoder(pipeline("..", "a.", config.RFC3339)),
	)
	return ds
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte("k"), []byte(`{"k":"u1","ts":1700000000000,"v":1.5,"a":{"b":2}}`), int64(0))
	f.Add([]byte(nil), []byte(`{"k":7,"ts":"2023-11-14T23:13:20+01:00","v":"x"}`), int64(-1))
	f.Add([]byte{}, []byte(`{"k":{"a":[1,2]},"ts":-1.5e-3,"a":{"b":{"c":null}},"x":{"ts":1e400}}`), int64(1))
	f.Add([]byte("k"), []byte(`{"k":null,"ts":"1700000000.123","a*b":1,"#":"-0"}`), int64(math.MaxInt64))
	f.Add([]byte("k"), []byte(`[1,{"k":1}]`), int64(math.MinInt64))
	f.Add([]byte("k"), []byte(`{"ts":1`), int64(0))
	// Timestamps at the edges of each format and of int64 milliseconds.
	for _, ts := range []string{
		`9223372036854775807`, `-9223372036854775808`, `9223372036854775808`, `-9223372036854775809`,
		`9223372036854775.807`, `9223372036854775.808`, `-9223372036854775.808`, `-9223372036854775.809`,
		`9223372036854775807999`, `-9223372036854775808999999`, `"9223372036854775807"`, `"-9223372036854775808"`,
		`1e3`, `1E+3`, `-1e-3`, `1e-400`, `1e400`, `-0`, `-0.0`, `0.0000001`, `0.99999999999999999999`,
		`123456789012345678901234567890`, `1.7976931348623157e308`, `5e-324`, `"1e3"`, `" 1"`, `"1 "`,
		`"01"`, `"+1"`, `".5"`, `"1."`, `"0x10"`, `"NaN"`, `"Infinity"`, `""`, `true`, `[1]`, `{"ts":1}`,
		`"2023-11-14T23:13:20.123456789+01:00"`, `"0000-01-01T00:00:00Z"`, `"9999-12-31T23:59:59.999999999Z"`,
		`"2023-02-30T00:00:00Z"`, `"2023-11-14T23:13:20+24:00"`, `"2023-11-14t23:13:20z"`, `"2016-12-31T23:59:60Z"`,
		`"2023-11-14T23:13:20.1234567891Z"`, `"2023-11-14 23:13:20Z"`, `"-0001-01-01T00:00:00Z"`,
		`"` + strings.Repeat("2023-11-14T", 20) + `"`, "\"2023-11-14T23:13:20\xffZ\"", `"\u0032023-11-14T23:13:20Z"`,
	} {
		f.Add([]byte("k"), []byte(`{"k":"u","ts":`+ts+`,"v":1,"a":{"b":2},"x":{"ts":`+ts+`},"#":`+ts+`,"a.":`+ts+`}`), int64(0))
	}
	// Aggregate inputs: huge, tiny, negative zero, not numbers, gjson path syntax as member names.
	for _, v := range []string{`1e308`, `-1e308`, `1e309`, `-1e400`, `5e-324`, `-0`, `"1"`, `null`, `[]`, `{}`, `NaN`, `Infinity`, `01`, `1.`, `.5`, `+1`} {
		f.Add([]byte("k"), []byte(`{"k":"u","ts":1,"v":`+v+`,"a":{"b":`+v+`},"x":{"ts":1},"#":1,"a*b":"k","@this":`+v+`}`), int64(0))
	}
	f.Add([]byte("k"), []byte(`{"a*b":1,"ab":2,"#":3,"@this":4,"..":5,"a.":6,"":7,"a":{"":8,"b":{"c":"x"}},"x":{"ts":9}}`), int64(0))
	f.Add([]byte("k"), []byte(`{"a":{"b":{"c":{"d":1}}},"x":{"ts":[1]},"a.b.c":"flat","x.ts":2}`), int64(0))
	f.Add([]byte("k"), []byte(`{"k":"first","k":"second","ts":1,"ts":"x","v":1,"v":"y","a":{"b":1},"a":{"b":"z"}}`), int64(0))
	// Whitespace, byte order marks, invalid UTF-8, escapes, control characters.
	f.Add([]byte("\xff\xfe"), []byte(" \t\r\n{\"k\":\"\xff\",\"ts\":1,\"v\":1,\"a\":{\"b\":1}} \n"), int64(0))
	f.Add([]byte{}, []byte("\ufeff{\"k\":\"u\",\"ts\":1}"), int64(0))
	f.Add([]byte("k"), []byte(`{"k":"\ud800\udc00\ud800\u0000\"\\","ts":"\u0031","v":1,"a":{"b":1}}`), int64(0))
	f.Add([]byte("k"), []byte("{\"k\":\"a\x00b\",\"ts\":1}"), int64(0))
	f.Add([]byte("k"), []byte(""), int64(0))
	f.Add([]byte("k"), []byte("   "), int64(0))
	f.Add([]byte("k"), []byte(`"{\"k\":\"u\",\"ts\":1}"`), int64(0))
	f.Add([]byte("k"), []byte(`null`), int64(0))
	// Nesting: deep but valid below the size at which tooDeep is checked,
	// too deep above it, and brackets inside strings (which do not nest).
	f.Add([]byte("k"), []byte(`{"k":"u","ts":1,"deep":`+strings.Repeat("[", 5000)+strings.Repeat("]", 5000)+`}`), int64(0))
	f.Add([]byte("k"), []byte(strings.Repeat("[", deepCheckLen+1)), int64(0))
	f.Add([]byte("k"), []byte(`{"k":"u","ts":1,"a":`+strings.Repeat(`{"b":`, maxDepth+1)+`1`+strings.Repeat("}", maxDepth+1)+`}`), int64(0))
	f.Add([]byte("k"), []byte(`{"k":"u","ts":1,"s":"`+strings.Repeat(`[\"`, deepCheckLen/3+1)+`"}`), int64(0))
	f.Add([]byte("k"), []byte(`{"k":"u","ts":1,"s":"\\\"`+strings.Repeat(`{`, deepCheckLen+1)+`"}`), int64(0))
	// Grammar edges for the validating pass: each must be judged as
	// gjson.ValidBytes judges it.
	for _, v := range []string{
		`-`, `01`, `1.`, `1.e1`, `1e`, `1e+`, `-0.0e-0`, `"\u12"`, `"\u12G4"`, `"\x"`, "\"a\x01\"", "\"a\tb\"", "\"\x1f\"", "\"a\x7f\xff\"",
		`tru`, `nul`, `falsey`, `[1,]`, `[,1]`, `[]`, `[ ]`, `{"a" 1}`, `{"a":}`, `{:1}`, `{"a":1,}`, `{,}`,
		`{} x`, `{}}`, `{"a":[1,{"b":[]}]} `, `{"a":"\"}`, `{"a\"b":1}`, `{"a":01}`, `{"a":-}`, `{"a":1 2}`,
	} {
		f.Add([]byte("k"), []byte(`{"k":"u","ts":1,"v":`+v+`}`), int64(0))
		f.Add([]byte("k"), []byte(v), int64(0))
	}
	ds := fuzzDecoders()
	f.Fuzz(func(t *testing.T, key, value []byte, ts int64) {
		sameCheckObject(t, value)
		var ev windowing.Event
		line := append(append([]byte(`{"key":"k","value":`), value...), `,"value":{"ts":5,"k":"x","v":1}}`...)
		for _, d := range ds {
			sameLookUp(t, d, value)
			sameCheckAndLookUp(t, d, value)
			sameCheckLine(t, d, value)
			sameCheckLine(t, d, line)
			err := d.Decode(&Record{Key: key, Value: value, Timestamp: ts}, &ev)
			if err != nil {
				var de *DecodeError
				if !errors.As(err, &de) || de.Reason == "" {
					t.Fatalf("error %v (%T) is not a *DecodeError with a reason", err, err)
				}
				continue
			}
			if len(ev.Inputs) != len(d.aggs) {
				t.Fatalf("len(Inputs) = %d, want %d", len(ev.Inputs), len(d.aggs))
			}
		}
	})
}

// sameCheckLine checks that CheckLine judges line as CheckObject does and
// hands out the same members, that it found the fields exactly when the
// first member named "value" is an object, and that DecodeFound then
// decodes a record of that value as Decode does.
func sameCheckLine(t *testing.T, d *Decoder, line []byte) {
	t.Helper()
	var names, raws, wantNames, wantRaws []string
	why, object, found := d.CheckLine(line, func(name, value string) {
		names, raws = append(names, name), append(raws, value)
	}, "value")
	wantWhy, wantObject := CheckObject(line, func(name, value string) {
		wantNames, wantRaws = append(wantNames, name), append(wantRaws, value)
	})
	if why != wantWhy || object != wantObject || !slices.Equal(names, wantNames) || !slices.Equal(raws, wantRaws) {
		t.Fatalf("%q: CheckLine gives %q %v %q %q, CheckObject %q %v %q %q", line, why, object, names, raws, wantWhy, wantObject, wantNames, wantRaws)
	}
	if why != "" || !object {
		return
	}
	first := slices.Index(names, "value")
	if want := first >= 0 && strings.HasPrefix(raws[first], "{"); found != want {
		t.Fatalf("%q: CheckLine found %v, want %v", line, found, want)
	}
	if !found {
		return
	}
	rec := Record{Partition: 2, Offset: 9, Key: []byte("rk"), Value: []byte(raws[first]), Timestamp: 7, ValidJSON: true}
	var got, want windowing.Event
	gotErr := d.DecodeFound(&rec, &got)
	wantErr := d.Decode(&rec, &want)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || (wantErr == nil && !reflect.DeepEqual(got, want)) {
		t.Fatalf("%q: DecodeFound gives %+v, %v; Decode %+v, %v", line, got, gotErr, want, wantErr)
	}
}

// sameLookUp checks that the decoder's one walk over a valid JSON object
// finds for every field what a gjson lookup of the field alone finds.
func sameLookUp(t *testing.T, d *Decoder, value []byte) {
	t.Helper()
	obj := strings.TrimLeft(string(value), " \t\r\n")
	if CheckJSON(value) != "" || !strings.HasPrefix(obj, "{") {
		return
	}
	var names, raws []string
	eachMember(obj, func(name, value string) bool {
		names, raws = append(names, name), append(raws, value)
		return true
	})
	sameMembers(t, "eachMember", obj, names, raws)
	d.lookUp(obj)
	sameResults(t, "one walk", d, obj)
}

// sameCheckObject checks that CheckObject gives CheckJSON's reason, tells
// an object, and for a valid object hands out the members gjson's ForEach
// gives (the envelope of a replay line is read this way).
func sameCheckObject(t *testing.T, b []byte) {
	t.Helper()
	var names, raws []string
	why, object := CheckObject(b, func(name, value string) {
		names, raws = append(names, name), append(raws, value)
	})
	if want := CheckJSON(b); why != want {
		t.Fatalf("%q: CheckObject gives %q, CheckJSON %q", b, why, want)
	}
	if why != "" {
		return
	}
	if want := gjson.ParseBytes(b).IsObject(); object != want {
		t.Fatalf("%q: CheckObject says object %v, gjson %v", b, object, want)
	}
	if !object {
		return
	}
	sameMembers(t, "CheckObject", string(b), names, raws)
}

// sameMembers checks that how handed out the names and raw values of the
// members of the JSON object obj that gjson's ForEach gives, in order.
func sameMembers(t *testing.T, how, obj string, names, raws []string) {
	t.Helper()
	i := 0
	gjson.Parse(obj).ForEach(func(k, v gjson.Result) bool {
		if i >= len(names) || names[i] != k.Str || raws[i] != v.Raw {
			t.Fatalf("member %d of %q: %s gives %q, %q; gjson's ForEach %q, %q", i, obj, how, names, raws, k.Str, v.Raw)
		}
		i++
		return true
	})
	if i != len(names) {
		t.Fatalf("%s gives %d members of %q, gjson's ForEach %d", how, len(names), obj, i)
	}
}

// sameResults checks that d.results hold, for every field, what a gjson
// lookup of the field alone finds in obj; a number's Num only for the
// numeric fields (ParseMember).
func sameResults(t *testing.T, how string, d *Decoder, obj string) {
	t.Helper()
	for i := range d.fields {
		got, want := d.results[i], d.fields[i].get(obj)
		sameNum := got.Num == want.Num || (math.IsNaN(got.Num) && math.IsNaN(want.Num)) ||
			(!d.fields[i].numeric && got.Type == gjson.Number && got.Num == 0)
		if got.Type != want.Type || got.Raw != want.Raw || got.Str != want.Str || got.Exists() != want.Exists() || !sameNum {
			t.Fatalf("field %q of %q: %s finds %#v, gjson %#v", d.fields[i].name, obj, how, got, want)
		}
	}
}

// sameCheckAndLookUp checks that the one pass that validates a value and
// finds the fields gives the reason CheckJSON and the object check give,
// and for a good value what a gjson lookup of each field alone finds.
func sameCheckAndLookUp(t *testing.T, d *Decoder, value []byte) {
	t.Helper()
	want := ""
	if why := CheckJSON(value); why != "" {
		want = "value is " + why
	} else if obj := strings.TrimLeft(string(value), " \t\r\n"); len(d.fields) > 0 && !strings.HasPrefix(obj, "{") {
		want = "value is not a JSON object"
	}
	if got := d.checkAndLookUp(value); got != want {
		t.Fatalf("value %q: one pass gives %q, CheckJSON and the object check %q", value, got, want)
	}
	if want != "" || len(d.fields) == 0 {
		return
	}
	sameResults(t, "one pass", d, strings.TrimLeft(string(value), " \t\r\n"))
}

// The walk and gjson agree on names with escapes, duplicates, members
// after nested values with brackets and quotes in strings, and space.
func TestLookUpMatchesGjson(t *testing.T) {
	d := NewDecoder(pipeline("k", "ts", config.UnixMS,
		windowing.AggSpec{Name: "s", Op: windowing.Sum, Field: "v"},
		windowing.AggSpec{Name: "m", Op: windowing.Max, Field: "a.b"},
		windowing.AggSpec{Name: "q", Op: windowing.Sum, Field: "x.y.z"},
	))
	for _, v := range []string{
		`{"k":"u","ts":1,"v":2,"a":{"b":3},"x":{"y":{"z":4}}}`,
		`{ "k" : "u" , "ts" : 1 , "v" : 2 }`,
		`{"\u006b":"escaped name","k":"plain","v":[1,{"v":9}],"ts":"\"}{[","a":{"b":"]}\\"},"v":5}`,
		`{"s":"{\"k\":1}","o":{"k":"inner","ts":{"a":[[["]"]]]}},"k":7,"ts":-1.5e3}`,
		`{"a":1,"a":{"b":2},"x":{"y":[1]},"x":{"y":{"z":3}}}`,
		`{"k":null,"ts":true,"v":false,"a":{"b":null},"x":{}}`,
		`{}`, "{\n\t\"k\"\r:\n\"u\"}",
	} {
		sameLookUp(t, d, []byte(v))
		sameCheckObject(t, []byte(v))
	}
	for _, v := range []string{``, ` `, `[1]`, `"s"`, `{"a":1`, `{"a":1}x`, `{"a":01}`, ` {"p":0,"v":{"x":[1,2]}} `, `{"a":{"b":` + strings.Repeat("[", deepCheckLen) + `}}`} {
		sameCheckObject(t, []byte(v))
	}
}

// Fields are compared only with member names of their first segment's
// length (the last length class holds every name of 15 bytes or more): names
// of one length, and long names that differ in the last byte, still find
// their own members.
func TestLookUpByNameLength(t *testing.T) {
	d := NewDecoder(pipeline("user", "time", config.UnixMS,
		windowing.AggSpec{Name: "c", Op: windowing.Sum, Field: "cost"},
		windowing.AggSpec{Name: "l1", Op: windowing.Sum, Field: "abcdefghijklmnopqrst"},
		windowing.AggSpec{Name: "l2", Op: windowing.Max, Field: "abcdefghijklmnopqrsu.v"},
		windowing.AggSpec{Name: "l3", Op: windowing.Sum, Field: "abcdefghijklmno"},
		windowing.AggSpec{Name: "l4", Op: windowing.Sum, Field: "abcdefghijklmn"},
	))
	for _, v := range []string{
		`{"user":"u","time":1,"cost":2,"abcdefghijklmnopqrst":3,"abcdefghijklmnopqrsu":{"v":4},"abcdefghijklmno":5,"abcdefghijklmn":6}`,
		`{"abcdefghijklmn":6,"abcdefghijklmno":5,"abcdefghijklmnopqrsu":{"v":4},"abcdefghijklmnopqrst":3,"cost":2,"time":1,"user":"u"}`,
		`{"usea":0,"timf":0,"cosu":0,"abcdefghijklmnopqrsx":0,"abcdefghijklmnopqrs":0,"abcdefghijklmnp":0,"abcdefghijklmnopqrst":7,"user":"w","cost":8}`,
		`{"us\u0065r":"escaped","c\u006fst":9,"time":2,"abcdefghijklmnopqrs\u0074":10}`,
	} {
		sameLookUp(t, d, []byte(v))
	}
}

func BenchmarkDecode(b *testing.B) {
	value := []byte(`{"user_id":"user-1234567","ts":1700000000123,"amount":42.5,"country":"DE","page":"/products/widget-3000","session":"c0ffee-1234-5678-9abc","ua":"Mozilla/5.0"}`)
	d := NewDecoder(pipeline("user_id", "ts", config.UnixMS,
		windowing.AggSpec{Name: "clicks", Op: windowing.Count},
		windowing.AggSpec{Name: "revenue", Op: windowing.Sum, Field: "amount"},
	))
	rec := &Record{Partition: 1, Offset: 1, Value: value}
	var ev windowing.Event
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	for b.Loop() {
		if err := d.Decode(rec, &ev); err != nil {
			b.Fatal(err)
		}
	}
}

// validString stops at every byte that needs a check: each special byte at
// each offset of a string gives gjson.ValidBytes' verdict and the string's
// end.
func TestValidStringFindsEverySpecialByte(t *testing.T) {
	for _, special := range []string{`"`, `\`, `\"`, `\n`, `\u00e9`, `\x`, "\x00", "\x1f", "\t", " ", "\x7f", "\x80", "\xff", "é"} {
		for off := 0; off < 20; off++ {
			for tail := 0; tail < 12; tail++ {
				str := strings.Repeat("a", off) + special + strings.Repeat("b", tail)
				doc := []byte(`"` + str + `"`)
				end, _, ok := validString(doc, 1)
				if want := gjson.ValidBytes(doc); ok != want || (ok && end != len(doc)) {
					// A lone quote ends the string early: the document is invalid, but the string is valid up to it.
					if special == `"` && ok && end == 1+off+1 && !want {
						continue
					}
					t.Fatalf("%q: validString ends at %d, ok %v; gjson valid %v (len %d)", doc, end, ok, want, len(doc))
				}
			}
		}
	}
}

// stringWordSpecials' lowest mark is the first byte of a word the
// stringSpecial table marks (none: no mark): for every byte at every
// position among ordinary bytes of either half of the byte range (a high
// byte must not hide or fake a match), and for random words holding
// several such bytes, whose borrows may mark bytes above the first.
func TestStringWordSpecialsMatchTable(t *testing.T) {
	first := func(w [8]byte) int {
		for i, c := range w {
			if stringSpecial[c] {
				return i
			}
		}
		return 8
	}
	check := func(w [8]byte) {
		t.Helper()
		got := 8
		if m := stringWordSpecials(binary.LittleEndian.Uint64(w[:])); m != 0 {
			got = bits.TrailingZeros64(m) >> 3
		}
		if want := first(w); got != want {
			t.Fatalf("word % x: lowest mark at %d, table's first at %d", w, got, want)
		}
	}
	for _, fill := range []byte{'a', ' ', '#', 0x7f, 0x80, 0xff} {
		for pos := 0; pos < 8; pos++ {
			for c := 0; c < 256; c++ {
				var w [8]byte
				for i := range w {
					w[i] = fill
				}
				w[pos] = byte(c)
				check(w)
			}
		}
	}
	picks := []byte{0, 1, 0x1f, ' ', '!', '"', '#', '[', '\\', ']', 0x7f, 0x80, 0xa2, 0xdc, 0xff}
	rng := rand.New(rand.NewPCG(3, 3))
	for range 1 << 20 {
		var w [8]byte
		for i := range w {
			w[i] = picks[rng.IntN(len(picks))]
		}
		check(w)
	}
}

// TestParseFloatMatchesStrconv: ParseMember's float reading gives
// strconv.ParseFloat's value (gjson's) bit for bit, on its own path (up
// to 15 digits, no exponent) and on strconv's.
func TestParseFloatMatchesStrconv(t *testing.T) {
	cases := []string{"0", "-0", "-0.0", "0.5", "318.47", "225.4", "-1.25", "999999999999999", "9999999999999999",
		"0.000000000000001", "0.1", "0.2", "0.3", "123456789012345", "1234567890.12345", "1.7976931348623157e308",
		"5e-324", "1e400", "-1e400", "1E+3", "12345678901234567890", "4.35", "8.875", "0.1000000000000000055511151231257827"}
	rng := rand.New(rand.NewPCG(6, 6))
	for range 200000 {
		var sb strings.Builder
		if rng.IntN(2) == 0 {
			sb.WriteByte('-')
		}
		if n := rng.IntN(13); n == 0 {
			sb.WriteByte('0')
		} else {
			sb.WriteByte(byte('1' + rng.IntN(9)))
			for range n - 1 {
				sb.WriteByte(byte('0' + rng.IntN(10)))
			}
		}
		if rng.IntN(4) != 0 {
			sb.WriteByte('.')
			for range 1 + rng.IntN(17) {
				sb.WriteByte(byte('0' + rng.IntN(10)))
			}
		}
		cases = append(cases, sb.String())
	}
	for _, s := range cases {
		want, _ := strconv.ParseFloat(s, 64)
		if got := parseFloat(s); math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("parseFloat(%q) = %v (%#x), strconv %v (%#x)", s, got, math.Float64bits(got), want, math.Float64bits(want))
		}
	}
}

// TestParseMemberMatchesGjsonParse: a member's value as ParseMember builds
// it is gjson.Parse's result, field for field, for every kind of value
// (with num set; without it a number only lacks its Num).
func TestParseMemberMatchesGjsonParse(t *testing.T) {
	for _, raw := range []string{
		`"u7887"`, `""`, `"a\"b"`, `"\\"`, `"\u00e9t\u00e9"`, `"x\ny"`, `"é"`, `"/products/4059"`,
		`{}`, `{"a":[1,{"b":"}"}]}`, `[]`, `[1,"]",null]`,
		`true`, `false`, `null`, `0`, `-0`, `318.47`, `-1.5e-3`, `1e400`, `12345678901234567890`,
	} {
		want := gjson.Parse(raw)
		if got := ParseMember(raw, true); !reflect.DeepEqual(got, want) {
			t.Errorf("ParseMember(%q, true) = %#v, gjson.Parse %#v", raw, got, want)
		}
		want.Num = 0
		if got := ParseMember(raw, false); want.Type != gjson.Number && !reflect.DeepEqual(got, want) {
			t.Errorf("ParseMember(%q, false) = %#v, gjson.Parse %#v", raw, got, want)
		}
	}
}

// RFC 3339 as written: lower-case t and z are valid (section 5.6); a
// comma before the fraction and an offset hour above 23 are not.
func TestParseRFC3339(t *testing.T) {
	for s, want := range map[string]int64{
		"2026-03-29T01:30:00Z":        1774747800000,
		"2026-03-29t01:30:00z":        1774747800000,
		"2026-03-29t01:30:00.5+01:00": 1774744200500,
		"2026-03-29T01:30:00-23:59":   1774747800000 + (23*60+59)*60000,
	} {
		got, err := parseRFC3339(s)
		if err != nil || got.UnixMilli() != want {
			t.Errorf("%s: %d, %v; want %d", s, got.UnixMilli(), err, want)
		}
	}
	for _, s := range []string{"2026-03-29T01:30:00,5Z", "2026-03-29T01:30:00+24:00", "2026-03-29T01:30:00+01:60", "2026-03-29 01:30:00Z", "2026-03-29T01:30:00"} {
		if got, err := parseRFC3339(s); err == nil {
			t.Errorf("%s accepted as %v", s, got)
		}
	}
}
