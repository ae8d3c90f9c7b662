package replay

import (
	"encoding/base64"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/schema"
)

// Two versions of an order schema: v2 adds a note with a default.
const (
	orderV1 = `{"type":"record","name":"Order","fields":[
 {"name":"customer","type":{"type":"record","name":"Customer","fields":[{"name":"id","type":"string"}]}},
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}}]}`
	orderV2 = `{"type":"record","name":"Order","fields":[
 {"name":"customer","type":{"type":"record","name":"Customer","fields":[{"name":"id","type":"string"}]}},
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
 {"name":"note","type":"string","default":""}]}`
)

// avroOrders returns n orders as replay lines twice: with Avro values of
// both schema versions (registered in fake) as {"base64": ...}, and with
// the same values as JSON.
func avroOrders(t *testing.T, fake *srfake.Registry, n int) (binary, plain string) {
	t.Helper()
	var bin, js strings.Builder
	for i, s := range []string{orderV1, orderV2} {
		id, _, err := fake.RegisterSchema("orders-value", sr.Schema{Schema: s})
		if err != nil {
			t.Fatal(err)
		}
		sch := avro.MustParse(s)
		for j := i; j < n; j += 2 {
			cents := int64(j*37%1000 + 1)
			ts := int64(1767225600000 + j*700 - (j%5)*900)
			v := map[string]any{"customer": map[string]any{"id": fmt.Sprintf("c%d", j%7)}, "ts": time.UnixMilli(ts).UTC(), "amount": big.NewRat(cents, 100)}
			if i == 1 {
				v["note"] = "v2"
			}
			payload, err := avro.Marshal(sch, v)
			if err != nil {
				t.Fatal(err)
			}
			wire := append([]byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}, payload...)
			fmt.Fprintf(&bin, "{\"partition\":%d,\"value\":{\"base64\":%q}}\n", j%2, base64.StdEncoding.EncodeToString(wire))
			fmt.Fprintf(&js, "{\"partition\":%d,\"value\":{\"customer\":{\"id\":\"c%d\"},\"ts\":%d,\"amount\":%d.%02d}}\n", j%2, j%7, ts, cents/100, cents%100)
		}
	}
	return bin.String(), js.String()
}

func formatPipeline(t *testing.T, format string) *config.Pipeline {
	t.Helper()
	cfg, err := config.Parse("c.yaml", []byte(`schema_registry: {url: "http://127.0.0.1:1"}
pipelines:
  - name: orders
    input: {topic: orders, format: `+format+`}
    key: {field: customer.id}
    timestamp: {field: ts, format: rfc3339}
    watermark: {strategy: bounded_out_of_orderness, max_delay: 2s}
    window: {type: tumbling, size: 10s}
    aggregates: [{name: n, op: count}, {name: revenue, op: sum, field: amount}]
    output: {topic: out}
`))
	if err != nil {
		t.Fatal(err)
	}
	return &cfg.Pipelines[0]
}

// An Avro topic replays to the very panes of the same records as JSON:
// nested field paths, a timestamp-millis event time read directly (even
// with format rfc3339, which a JSON number would fail), decimals summed
// as numbers, two schema versions in one input.
func TestReplayAvroMatchesJSON(t *testing.T) {
	fake := srfake.New()
	defer fake.Close()
	reg, err := schema.New(schema.Options{URL: fake.URL()})
	if err != nil {
		t.Fatal(err)
	}
	bin, plain := avroOrders(t, fake, 400)
	jp := formatPipeline(t, "json")
	jp.Timestamp.Format = config.UnixMS // JSON's ts is a plain number
	_, want, werrs := replayString(t, jp, plain, 2)
	if werrs != "" || !strings.Contains(want, `"revenue"`) {
		t.Fatalf("json replay: %q / %s", werrs, want[:min(len(want), 200)])
	}
	ap := formatPipeline(t, "avro")
	var out, errs strings.Builder
	sum, err := Run(Options{Pipeline: ap, Input: strings.NewReader(bin), Partitions: 2, Out: &out, Errs: &errs, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != want || errs.String() != "" || sum.Records != 400 {
		t.Fatalf("avro replay differs from json (records %d, errors %q)", sum.Records, errs.String())
	}
}

// Every kind of bad record is a dead letter with its reason, and the
// records around it go on.
func TestReplayAvroDeadLetters(t *testing.T) {
	fake := srfake.New()
	defer fake.Close()
	reg, err := schema.New(schema.Options{URL: fake.URL()})
	if err != nil {
		t.Fatal(err)
	}
	good, _ := avroOrders(t, fake, 2)
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	bad := []struct{ line, reason string }{
		{`{"value":{"customer":{"id":"c"},"ts":1}}`, `value must be {\"base64\": \"...\"}`},
		{`{"value":{"base64":"!!"}}`, "value's base64 is not valid"},
		{`{"value":{"base64":"` + b64([]byte(`{"a":1}`)) + `"}}`, "not the magic byte 0"},
		{`{"value":{"base64":"` + b64([]byte{0, 0, 0, 0x30, 0x39, 2}) + `"}}`, "schema id 12345 is not in the registry"},
		{`{"value":{"base64":"` + b64([]byte{0, 0, 0, 0, 1, 0x0a}) + `"}}`, "value does not decode with schema id 1 (avro): value is cut short"},
	}
	input := good
	for _, b := range bad {
		input += b.line + "\n"
	}
	input += good
	var out, errs strings.Builder
	sum, err := Run(Options{Pipeline: formatPipeline(t, "avro"), Input: strings.NewReader(input), Partitions: 2, Out: &out, Errs: &errs, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != 4 || sum.DeadLetters != int64(len(bad)) {
		t.Fatalf("records %d, dead letters %d:\n%s", sum.Records, sum.DeadLetters, errs.String())
	}
	for _, b := range bad {
		if !strings.Contains(errs.String(), b.reason) {
			t.Errorf("no dead letter saying %q in:\n%s", b.reason, errs.String())
		}
	}
}

// Without a registry, an Avro replay says what to give it.
func TestReplayAvroNeedsRegistry(t *testing.T) {
	_, err := Run(Options{Pipeline: formatPipeline(t, "avro"), Input: strings.NewReader(""), Partitions: 1, Out: &strings.Builder{}, Errs: &strings.Builder{}})
	if err == nil || !strings.Contains(err.Error(), "--schema-registry") {
		t.Fatalf("got %v", err)
	}
}
