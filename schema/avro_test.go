package schema

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/tidwall/gjson"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/windowd/windowd/config"
)

// newTestRegistry is pkg/sr's in-process fake registry and a Registry on it.
func newTestRegistry(t *testing.T) (*srfake.Registry, *Registry) {
	t.Helper()
	fake := srfake.New()
	t.Cleanup(fake.Close)
	reg, err := New(Options{URL: fake.URL()})
	if err != nil {
		t.Fatal(err)
	}
	return fake, reg
}

// wire encodes v with the Avro schema text s, registered under subject,
// in the Confluent wire format (pkg/sr's serde).
func wire(t *testing.T, fake *srfake.Registry, subject, s string, v any) []byte {
	t.Helper()
	id, _, err := fake.RegisterSchema(subject, sr.Schema{Schema: s, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	sch := avro.MustParse(s)
	var serde sr.Serde
	serde.Register(id, v, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(sch, v) }))
	b, err := serde.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const allTypes = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"string"},
 {"name":"n","type":"int"},
 {"name":"big","type":"long"},
 {"name":"f","type":"float"},
 {"name":"d","type":"double"},
 {"name":"ok","type":"boolean"},
 {"name":"raw","type":"bytes"},
 {"name":"nothing","type":"null"},
 {"name":"color","type":{"type":"enum","name":"Color","symbols":["RED","GREEN"]}},
 {"name":"tags","type":{"type":"array","items":"string"}},
 {"name":"attrs","type":{"type":"map","values":"long"}},
 {"name":"maybe","type":["null","string"]},
 {"name":"either","type":["null","long","string"]},
 {"name":"customer","type":{"type":"record","name":"Customer","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}]}},
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"ts_us","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"local_us","type":{"type":"long","logicalType":"local-timestamp-micros"}},
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"tm","type":{"type":"int","logicalType":"time-millis"}},
 {"name":"tu","type":{"type":"long","logicalType":"time-micros"}},
 {"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
 {"name":"fprice","type":{"type":"fixed","name":"FP","size":3,"logicalType":"decimal","precision":6,"scale":3}},
 {"name":"uid","type":{"type":"string","logicalType":"uuid"}},
 {"name":"fx","type":{"type":"fixed","name":"F2","size":2}},
 {"name":"dur","type":{"type":"fixed","name":"D12","size":12,"logicalType":"duration"}}
]}`

func TestAvroMapping(t *testing.T) {
	fake, reg := newTestRegistry(t)
	v := map[string]any{
		"id": "o-1 \"quoted\"", "n": int32(-7), "big": int64(math.MinInt64), "f": float32(1.5), "d": 0.1,
		"ok": true, "raw": []byte{0xff, 0x00}, "nothing": nil, "color": "GREEN",
		"tags": []any{"a", "b"}, "attrs": map[string]any{"x": int64(1)},
		"maybe": nil, "either": map[string]any{"long": int64(42)},
		"customer": map[string]any{"id": int64(9), "name": "Ann"},
		"ts":       time.UnixMilli(1767225600123).UTC(),
		"ts_us":    time.UnixMicro(-1).UTC(),
		"local_us": time.UnixMicro(1767225600123456).UTC(),
		"day":      time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC),
		"tm":       1500 * time.Millisecond,
		"tu":       1500500 * time.Microsecond,
		"price":    big.NewRat(-12345, 100),
		"fprice":   big.NewRat(5, 1000),
		"uid":      "6ba7b810-9dad-11d1-80b4-00c04fd430c8",
		"fx":       [2]byte{1, 2},
		"dur":      avro.LogicalDuration{Months: 1, Days: 2, Milliseconds: 3},
	}
	b := wire(t, fake, "orders-value", allTypes, v)
	d := NewDecoder(reg, config.Avro, "ts", nil)
	out, ts, err := d.AppendJSON(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"o-1 \"quoted\"","n":-7,"big":-9223372036854775808,"f":1.5,"d":0.1,"ok":true,"raw":"/wA=","nothing":null,` +
		`"color":"GREEN","tags":["a","b"],"attrs":{"x":1},"maybe":null,"either":42,"customer":{"id":9,"name":"Ann"},` +
		`"ts":1767225600123,"ts_us":-0.001,"local_us":1767225600123.456,"day":"2026-12-02","tm":1500,"tu":1500.5,` +
		`"price":-123.45,"fprice":0.005,"uid":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","fx":"AQI=","dur":{"months":1,"days":2,"milliseconds":3}}`
	if string(out) != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
	if !json.Valid(out) {
		t.Fatal("not valid JSON")
	}
	if !ts.OK || ts.MS != 1767225600123 {
		t.Fatalf("instant %+v", ts)
	}
	// Keeping one field reads past every other (each type's skip) and
	// writes that field alone, as the full object has it.
	full := gjson.ParseBytes(out)
	full.ForEach(func(k, v gjson.Result) bool {
		got, _, err := NewDecoder(reg, config.Avro, "", []string{k.Str}).AppendJSON(nil, b)
		if want := `{"` + k.Str + `":` + v.Raw + `}`; err != nil || string(got) != want {
			t.Errorf("keeping %s: got %s, %v; want %s", k.Str, got, err, want)
		}
		return true
	})
	if got, _, err := NewDecoder(reg, config.Avro, "", []string{}).AppendJSON(nil, b); err != nil || string(got) != "{}" {
		t.Errorf("keeping nothing: got %s, %v", got, err)
	}
	// timestamp-micros floors: -1 µs is in the millisecond before 0.
	d = NewDecoder(reg, config.Avro, "ts_us", nil)
	if _, ts, _ = d.AppendJSON(nil, b); !ts.OK || ts.MS != -1 {
		t.Fatalf("ts_us instant %+v", ts)
	}
	// A long that is not a timestamp type is no instant: the format reads it.
	d = NewDecoder(reg, config.Avro, "big", nil)
	if _, ts, _ = d.AppendJSON(nil, b); ts.OK {
		t.Fatalf("big instant %+v", ts)
	}
}

func TestAvroNaNAndNestedInstant(t *testing.T) {
	fake, reg := newTestRegistry(t)
	s := `{"type":"record","name":"E","fields":[{"name":"x","type":"double"},{"name":"meta","type":["null",{"type":"record","name":"M","fields":[{"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}}]}]}]}`
	b := wire(t, fake, "e-value", s, map[string]any{"x": math.Inf(-1), "meta": map[string]any{"M": map[string]any{"at": time.UnixMilli(5).UTC()}}})
	out, ts, err := NewDecoder(reg, config.Avro, "meta.at", nil).AppendJSON(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"x":null,"meta":{"at":5}}` || !ts.OK || ts.MS != 5 {
		t.Fatalf("got %s %+v", out, ts)
	}
	b = wire(t, fake, "e-value", s, map[string]any{"x": math.NaN(), "meta": nil})
	out, ts, err = NewDecoder(reg, config.Avro, "meta.at", nil).AppendJSON(nil, b)
	if err != nil || string(out) != `{"x":null,"meta":null}` || ts.OK {
		t.Fatalf("got %s %+v %v", out, ts, err)
	}
}

// Records of two schema versions in one topic decode each by its own id.
func TestAvroEvolution(t *testing.T) {
	fake, reg := newTestRegistry(t)
	v1 := `{"type":"record","name":"O","fields":[{"name":"id","type":"string"}]}`
	v2 := `{"type":"record","name":"O","fields":[{"name":"id","type":"string"},{"name":"amount","type":"double","default":0}]}`
	a := wire(t, fake, "o-value", v1, map[string]any{"id": "a"})
	b := wire(t, fake, "o-value", v2, map[string]any{"id": "b", "amount": 2.5})
	d := NewDecoder(reg, config.Avro, "", nil)
	for _, c := range []struct {
		v    []byte
		want string
	}{{a, `{"id":"a"}`}, {b, `{"id":"b","amount":2.5}`}, {a, `{"id":"a"}`}} {
		out, _, err := d.AppendJSON(nil, c.v)
		if err != nil || string(out) != c.want {
			t.Fatalf("got %s, %v; want %s", out, err, c.want)
		}
	}
	if reg.Fetched() != 2 {
		t.Fatalf("fetched %d schemas, want 2 (each id once)", reg.Fetched())
	}
}

func TestAvroReferencesAndRecursion(t *testing.T) {
	fake, reg := newTestRegistry(t)
	if _, _, err := fake.RegisterSchema("address", sr.Schema{Schema: `{"type":"record","name":"Address","namespace":"x","fields":[{"name":"city","type":"string"}]}`}); err != nil {
		t.Fatal(err)
	}
	main := `{"type":"record","name":"User","namespace":"x","fields":[{"name":"home","type":"Address"},{"name":"next","type":["null","User"]}]}`
	id, _, err := fake.RegisterSchema("user-value", sr.Schema{Schema: main, References: []sr.SchemaReference{{Name: "x.Address", Subject: "address", Version: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	// Hand-encoded: home.city "a", next: User{home.city "b", next null}.
	payload := []byte{2, 'a', 2, 2, 'b', 0}
	v := append([]byte{0, 0, 0, 0, byte(id)}, payload...)
	out, _, err := NewDecoder(reg, config.Avro, "", nil).AppendJSON(nil, v)
	if err != nil || string(out) != `{"home":{"city":"a"},"next":{"home":{"city":"b"},"next":null}}` {
		t.Fatalf("got %s, %v", out, err)
	}
}

func TestAvroBadRecords(t *testing.T) {
	fake, reg := newTestRegistry(t)
	s := `{"type":"record","name":"R","fields":[{"name":"s","type":"string"},{"name":"l","type":{"type":"array","items":"null"}}]}`
	id, _, err := fake.RegisterSchema("r-value", sr.Schema{Schema: s})
	if err != nil {
		t.Fatal(err)
	}
	hdr := []byte{0, 0, 0, 0, byte(id)}
	cases := []struct {
		name string
		v    []byte
		want string
	}{
		{"json", []byte(`{"a":1}`), "starts with byte 0x7b, not the magic byte 0"},
		{"empty", nil, "value is empty"},
		{"short", []byte{0, 0, 1}, "too short"},
		{"unknown id", []byte{0, 0, 0, 3, 0xe7, 0}, "schema id 999 is not in the registry"},
		{"cut", append(hdr, 10, 'a'), "value is cut short"},
		{"trailing", append(hdr, 2, 'a', 0, 7), "1 bytes left after the value"},
		{"negative length", append(hdr, 1), "negative length"},
		{"bad varint", append(hdr, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), "bad variable-length integer"},
		// 2^62 null items: refused, not looped over.
		{"items", append(hdr, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01), "more array or map items than the value has bytes"},
	}
	for _, c := range cases {
		d := NewDecoder(reg, config.Avro, "", nil)
		_, _, err := d.AppendJSON(nil, c.v)
		var br *BadRecord
		if !errors.As(err, &br) || !strings.Contains(br.Reason, c.want) {
			t.Errorf("%s: got %v, want a BadRecord with %q", c.name, err, c.want)
		}
	}
	// A Protobuf schema read as Avro.
	pid, _, err := fake.RegisterSchema("p-value", sr.Schema{Schema: `syntax = "proto3"; message M { string a = 1; }`, Type: sr.TypeProtobuf})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = NewDecoder(reg, config.Avro, "", nil).AppendJSON(nil, []byte{0, 0, 0, 0, byte(pid), 0})
	if err == nil || !strings.Contains(err.Error(), "is a PROTOBUF schema, but input.format is avro") {
		t.Fatalf("got %v", err)
	}
}

func TestAvroDeepRecursionBounded(t *testing.T) {
	fake, reg := newTestRegistry(t)
	id, _, err := fake.RegisterSchema("l-value", sr.Schema{Schema: `{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"]}]}`})
	if err != nil {
		t.Fatal(err)
	}
	v := []byte{0, 0, 0, 0, byte(id)}
	for range 20_000 {
		v = append(v, 2) // branch 1: another L
	}
	v = append(v, 0)
	_, _, err = NewDecoder(reg, config.Avro, "", nil).AppendJSON(nil, v)
	if err == nil || !strings.Contains(err.Error(), "nested more than 10000 levels deep") {
		t.Fatalf("got %v", err)
	}
}

func TestRegistryOutage(t *testing.T) {
	fake, reg0 := newTestRegistry(t)
	now := time.Unix(1000, 0)
	reg, err := New(Options{URL: fake.URL(), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	_ = reg0
	s := `{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}`
	cached := wire(t, fake, "r-value", s, map[string]any{"a": int64(1)})
	d := NewDecoder(reg, config.Avro, "", nil)
	if _, _, err := d.AppendJSON(nil, cached); err != nil {
		t.Fatal(err)
	}
	other := wire(t, fake, "r-value", `{"type":"record","name":"R","fields":[{"name":"a","type":"long"},{"name":"b","type":"long","default":0}]}`, map[string]any{"a": int64(1), "b": int64(2)})
	fake.Close() // the registry goes away
	_, _, err = d.AppendJSON(nil, other)
	var un *Unavailable
	if !errors.As(err, &un) || reg.Up() || reg.Failures() != 1 {
		t.Fatalf("got %v, up %v, failures %d; want Unavailable", err, reg.Up(), reg.Failures())
	}
	if !un.Retry.Equal(now.Add(firstBackoff)) {
		t.Fatalf("retry at %v", un.Retry)
	}
	// During the backoff no request is made; a cached schema still decodes.
	if _, _, err := d.AppendJSON(nil, other); !errors.As(err, &un) || reg.Failures() != 1 {
		t.Fatalf("got %v, failures %d", err, reg.Failures())
	}
	if out, _, err := d.AppendJSON(nil, cached); err != nil || string(out) != `{"a":1}` {
		t.Fatalf("cached: %s %v", out, err)
	}
	now = now.Add(firstBackoff)
	if _, _, err := d.AppendJSON(nil, other); !errors.As(err, &un) || reg.Failures() != 2 || !un.Retry.Equal(now.Add(2*firstBackoff)) {
		t.Fatalf("got %v, failures %d", err, reg.Failures())
	}
}

// schema_registry.basic_auth is sent; wrong credentials are an outage to
// wait out (the records are fine), named as a credentials problem.
func TestRegistryBasicAuth(t *testing.T) {
	fake := srfake.New(srfake.WithAuth("Basic " + base64.StdEncoding.EncodeToString([]byte("reader:s3cr3t"))))
	defer fake.Close()
	id, _, err := fake.RegisterSchema("r-value", sr.Schema{Schema: `{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}`})
	if err != nil {
		t.Fatal(err)
	}
	v := []byte{0, 0, 0, 0, byte(id), 2}
	for _, c := range []struct {
		user, password string
		ok             bool
	}{{"reader", "s3cr3t", true}, {"reader", "wrong", false}, {"", "", false}} {
		reg, err := New(Options{URL: fake.URL(), Username: c.user, Password: c.password})
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := NewDecoder(reg, config.Avro, "", nil).AppendJSON(nil, v)
		var un *Unavailable
		switch {
		case c.ok && (err != nil || string(out) != `{"a":1}`):
			t.Errorf("%s: got %s, %v", c.user, out, err)
		case !c.ok && (!errors.As(err, &un) || !strings.Contains(err.Error(), "check schema_registry.basic_auth")):
			t.Errorf("%q/%q: got %v, want an Unavailable naming basic_auth", c.user, c.password, err)
		}
	}
}

// Protobuf message indexes, read with pkg/sr's header: the [0] shortcut,
// an explicit index, and each kind of bad index a dead letter.
func TestProtobufMessageIndexes(t *testing.T) {
	fake, reg := newTestRegistry(t)
	id, _, err := fake.RegisterSchema("p-value", sr.Schema{Type: sr.TypeProtobuf,
		Schema: "syntax = \"proto3\";\nmessage A { string a = 1; }\nmessage B { int64 b = 1; message C { bool c = 1; } }\n"})
	if err != nil {
		t.Fatal(err)
	}
	hdr := []byte{0, 0, 0, 0, byte(id)}
	for _, c := range []struct {
		index, payload []byte
		want           string
	}{
		{[]byte{0}, []byte{0x0a, 1, 'x'}, `{"a":"x"}`},
		{[]byte{2, 0}, []byte{0x0a, 1, 'x'}, `{"a":"x"}`}, // [0] written out
		{[]byte{2, 2}, []byte{0x08, 7}, `{"b":7}`},        // [1]
		{[]byte{4, 2, 0}, []byte{0x08, 1}, `{"c":true}`},  // [1, 0]
		{[]byte{202, 1}, nil, "message indexes (schema id 1) are more than 100"},
		{[]byte{1}, nil, "have a negative count"},
		{[]byte{4, 2}, nil, "are cut short"},
		{[]byte{2, 4}, nil, "schema id 1, message [2]"},
	} {
		v := append(append(append([]byte(nil), hdr...), c.index...), c.payload...)
		out, _, err := NewDecoder(reg, config.Protobuf, "", nil).AppendJSON(nil, v)
		got := string(out)
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("index bytes %v: got %q, want %q", c.index, got, c.want)
		}
	}
}
