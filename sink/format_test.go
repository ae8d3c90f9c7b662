package sink

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/windowd/windowd/internal/panetest"
	"github.com/windowd/windowd/windowing"
)

// formatSpecs has every aggregate op, two top_k (the Avro schema defines
// its entry record once) and quantiles.
var formatSpecs = []windowing.AggSpec{
	{Name: "n", Op: windowing.Count},
	{Name: "users", Op: windowing.DistinctApprox},
	{Name: "total", Op: windowing.Sum},
	{Name: "low", Op: windowing.Min},
	{Name: "high", Op: windowing.Max},
	{Name: "mean", Op: windowing.Avg},
	{Name: "lat", Op: windowing.Quantiles, Quantiles: []windowing.Quantile{{Text: "0.5", Num: 1, Den: 2}, {Text: "0.99", Num: 99, Den: 100}}},
	{Name: "pages", Op: windowing.TopK, K: 3},
	{Name: "refs", Op: windowing.TopK, K: 2},
	{Name: "ctr", Op: windowing.Ratio, Of: 0, To: 1},
}

// formatPanes are panes with every field a window type gives a pane: a
// count window's record times, a calendar window's zone and local bounds,
// a partition, the quiet and timeout flags, a retraction, partial
// aggregates, null values (no value, NaN), negative times and a key that
// is not ASCII.
func formatPanes(t *testing.T) []*windowing.Pane {
	rome, err := time.LoadLocation("Europe/Rome")
	if err != nil {
		t.Fatal(err)
	}
	full := []windowing.Value{
		{Kind: windowing.IntValue, Int: 12}, {Kind: windowing.IntValue, Int: 7}, {Kind: windowing.NumValue, Num: 2306.04},
		{Kind: windowing.NumValue, Num: -3.5}, {Kind: windowing.NumValue, Num: 1e21}, {Kind: windowing.NumValue, Num: 192.17},
		{Kind: windowing.RawValue, Raw: `{"0.5":12.1,"0.99":97.3}`},
		{Kind: windowing.RawValue, Raw: `[{"value":"/home","count":120,"error":0},{"value":"/a\"b","count":3,"error":1}]`},
		{Kind: windowing.RawValue, Raw: `[]`},
		{Kind: windowing.NumValue, Num: 12.0 / 7},
	}
	empty := []windowing.Value{
		{Kind: windowing.IntValue}, {Kind: windowing.IntValue}, {Kind: windowing.NumValue},
		{}, {}, {Kind: windowing.NumValue, Num: math.NaN()},
		{Kind: windowing.RawValue, Raw: `{"0.5":null,"0.99":null}`},
		{Kind: windowing.RawValue, Raw: `[]`}, {Kind: windowing.RawValue, Raw: `[]`},
		{},
	}
	return []*windowing.Pane{
		{Key: "u1", Start: 1700000000000, End: 1700000010000, Timing: windowing.OnTime, Final: true, Mode: windowing.Accumulating, Values: full},
		{Key: "ünï/€", Start: -5000, End: 5000, Timing: windowing.Early, Index: 3, Mode: windowing.Discarding, Values: empty},
		{Key: "c", Start: 10, End: 20, Timing: windowing.OnTime, Final: true, Records: true, FirstTime: 1700000000123, LastTime: 1700000009999, Values: full},
		{Key: "shop", Start: 1792792800000, End: 1792879200000, Zone: rome, Timing: windowing.Late, Index: 2, Final: true, Mode: windowing.Retracting,
			Retraction: true, Values: full},
		{Key: "p", Start: 0, End: 60000, HasPartition: true, Partition: 2, Quiet: true, Partial: 1<<2 | 1<<7, Values: full},
		{Key: "t", Start: 0, End: 60000, TimedOut: true, Values: full},
		{Key: "short", Start: 0, End: 1000, Values: full[:2]},
	}
}

// want is the pane JSON of p as the binary formats read it.
func want(t *testing.T, p *windowing.Pane, protobuf bool) any {
	t.Helper()
	var aggs []panetest.Agg
	for _, s := range formatSpecs {
		aggs = append(aggs, panetest.Agg{Name: s.Name, Quantiles: s.Op == windowing.Quantiles, TopK: s.Op == windowing.TopK})
	}
	w, err := panetest.Want(windowing.AppendJSON(nil, p, formatSpecs), aggs, protobuf)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func checkPrefix(t *testing.T, b, prefix []byte) []byte {
	t.Helper()
	if !bytes.HasPrefix(b, prefix) {
		t.Fatalf("value % x does not start with the wire prefix % x", b[:min(len(b), 8)], prefix)
	}
	return b[len(prefix):]
}

func TestWirePrefix(t *testing.T) {
	if got := WirePrefix(0x01020304, false); !bytes.Equal(got, []byte{0, 1, 2, 3, 4}) {
		t.Errorf("avro/json_schema prefix % x", got)
	}
	if got := WirePrefix(7, true); !bytes.Equal(got, []byte{0, 0, 0, 0, 7, 0}) {
		t.Errorf("protobuf prefix % x (message indexes [0]: one 0 byte)", got)
	}
}

// Each pane read back with hamba/avro under AvroSchema is the pane JSON.
func TestAvroPanes(t *testing.T) {
	prefix := WirePrefix(42, false)
	enc := NewAvroPanes(formatSpecs, prefix)
	for i, p := range formatPanes(t) {
		got, err := panetest.Avro(AvroSchema(formatSpecs), checkPrefix(t, enc.Append(nil, p), prefix))
		if err != nil {
			t.Fatalf("pane %d: %v", i, err)
		}
		if got, _ = panetest.Canonical(got); !reflect.DeepEqual(got, want(t, p, false)) {
			t.Errorf("pane %d:\n got %v\nwant %v", i, got, want(t, p, false))
		}
	}
}

// Each pane read back with protobuf-go's dynamicpb under ProtoSchema is
// the pane JSON, but for what proto3 cannot say: a quantile without a
// value is not in the map, an aggregate without a value is unset.
func TestProtoPanes(t *testing.T) {
	md, err := panetest.ProtoMessage(ProtoSchema(formatSpecs))
	if err != nil {
		t.Fatalf("ProtoSchema does not compile: %v\n%s", err, ProtoSchema(formatSpecs))
	}
	if md.Name() != "Pane" || md.ParentFile().Messages().Len() != 1 {
		t.Fatal("ProtoSchema's only top-level message must be Pane (message indexes [0])")
	}
	prefix := WirePrefix(42, true)
	enc := NewProtoPanes(formatSpecs, prefix)
	for i, p := range formatPanes(t) {
		got, err := panetest.Proto(md, checkPrefix(t, enc.Append(nil, p), prefix))
		if err != nil {
			t.Fatalf("pane %d: %v", i, err)
		}
		if got, _ = panetest.Canonical(got); !reflect.DeepEqual(got, want(t, p, true)) {
			t.Errorf("pane %d:\n got %v\nwant %v", i, got, want(t, p, true))
		}
	}
}

// A Protobuf pane record names its message in the header message_type
// (for deserializers that take it from there); the other formats' records
// have no such header.
func TestPaneRecordMessageType(t *testing.T) {
	p := formatPanes(t)[0]
	for _, c := range []struct {
		enc  PaneEncoder
		want string
	}{
		{NewProtoPanes(formatSpecs, WirePrefix(1, true)), "Pane"},
		{NewAvroPanes(formatSpecs, WirePrefix(1, false)), ""},
		{windowing.NewPaneJSON(formatSpecs), ""},
	} {
		got := ""
		for _, h := range PaneRecord("out", p, c.enc).Headers {
			if h.Key == HeaderMessageType {
				got += string(h.Value)
			}
		}
		if got != c.want {
			t.Errorf("%T: message_type header %q, want %q", c.enc, got, c.want)
		}
	}
}

// A json_schema value is the pane JSON after the wire prefix; the schema
// is JSON.
func TestJSONSchemaPanes(t *testing.T) {
	var schema map[string]any
	if err := json.Unmarshal([]byte(JSONSchema(formatSpecs)), &schema); err != nil {
		t.Fatalf("JSONSchema is not JSON: %v", err)
	}
	props := schema["properties"].(map[string]any)["aggregates"].(map[string]any)["properties"].(map[string]any)
	if len(props) != len(formatSpecs) {
		t.Fatalf("the schema's aggregates: %v", props)
	}
	prefix := WirePrefix(9, false)
	enc := NewJSONSchemaPanes(formatSpecs, prefix)
	for i, p := range formatPanes(t) {
		if got, want := checkPrefix(t, enc.Append(nil, p), prefix), windowing.AppendJSON(nil, p, formatSpecs); !bytes.Equal(got, want) {
			t.Errorf("pane %d: %s, want %s", i, got, want)
		}
	}
}
