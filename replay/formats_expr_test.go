package replay

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/hamba/avro/v2"
	"github.com/tidwall/gjson"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/schema"
)

// sale is one test record, written by saleWriters in every input format.
type sale struct {
	user, kind, device string
	amount             float64
	ts                 int64
	note               *string // nil: Avro null, Protobuf unset
}

// A saleWriter turns a sale into a value of its format (v: schema version
// 0 or 1) and into the JSON object that format's value stands for
// (docs/SEMANTICS.md, Input formats): what a JSON topic of the same
// records holds.
type saleWriter struct {
	wire func(s sale, v int) []byte
	json func(s sale, v int) string
}

func saleJSON(s sale, note string, v int) string {
	js := fmt.Sprintf(`{"user":%q,"kind":%q,"device":{"kind":%q},"amount":%v,"ts":%d%s`, s.user, s.kind, s.device, s.amount, s.ts, note)
	if v == 1 {
		js += `,"qty":2`
	}
	return js + "}"
}

const (
	saleAvroV1 = `{"type":"record","name":"Sale","fields":[
 {"name":"user","type":"string"},
 {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["PURCHASE","REFUND"]}},
 {"name":"device","type":{"type":"record","name":"Device","fields":[{"name":"kind","type":"string"}]}},
 {"name":"amount","type":"double"},
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"note","type":["null","string"],"default":null}]}`
	saleProtoV1 = `syntax = "proto3";
package windowd.test;
import "google/protobuf/timestamp.proto";
enum Kind { PURCHASE = 0; REFUND = 1; }
message Device { string kind = 1; }
message Sale { string user = 1; Kind kind = 2; Device device = 3; double amount = 4; google.protobuf.Timestamp ts = 5; optional string note = 6; }
`
)

// avroSales registers two versions of the sale schema (v2 adds qty with a
// default) under subject.
func avroSales(t *testing.T, reg *srfake.Registry, subject string) saleWriter {
	v2 := strings.Replace(saleAvroV1, `"default":null}]}`, `"default":null},{"name":"qty","type":"long","default":1}]}`, 1)
	var ids [2]int
	var schemas [2]avro.Schema
	for i, s := range []string{saleAvroV1, v2} {
		ss, _, err := reg.RegisterSchema(subject, sr.Schema{Schema: s, Type: sr.TypeAvro})
		if err != nil {
			t.Fatal(err)
		}
		ids[i], schemas[i] = ss, avro.MustParse(s)
	}
	return saleWriter{
		wire: func(s sale, v int) []byte {
			m := map[string]any{"user": s.user, "kind": s.kind, "device": map[string]any{"kind": s.device},
				"amount": s.amount, "ts": time.UnixMilli(s.ts).UTC(), "note": s.note}
			if v == 1 {
				m["qty"] = int64(2)
			}
			b, err := avro.Marshal(schemas[v], m)
			if err != nil {
				t.Fatal(err)
			}
			return append([]byte{0, byte(ids[v] >> 24), byte(ids[v] >> 16), byte(ids[v] >> 8), byte(ids[v])}, b...)
		},
		json: func(s sale, v int) string {
			note := `,"note":null`
			if s.note != nil {
				note = fmt.Sprintf(`,"note":%q`, *s.note)
			}
			return saleJSON(s, note, v)
		},
	}
}

// protobufSales registers two versions of the sale message (v2 adds qty)
// under subject.
func protobufSales(t *testing.T, reg *srfake.Registry, subject string) saleWriter {
	v2 := strings.Replace(saleProtoV1, "optional string note = 6; }", "optional string note = 6; int64 qty = 7; }", 1)
	var ids [2]int
	var mds [2]protoreflect.MessageDescriptor
	for i, text := range []string{saleProtoV1, v2} {
		id, _, err := reg.RegisterSchema(subject, sr.Schema{Schema: text, Type: sr.TypeProtobuf})
		if err != nil {
			t.Fatal(err)
		}
		comp := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(map[string]string{"sale.proto": text})})}
		files, err := comp.Compile(context.Background(), "sale.proto")
		if err != nil {
			t.Fatal(err)
		}
		ids[i], mds[i] = id, files[0].Messages().ByName("Sale")
	}
	return saleWriter{
		wire: func(s sale, v int) []byte {
			md := mds[v]
			f := md.Fields()
			m := dynamicpb.NewMessage(md)
			m.Set(f.ByName("user"), protoreflect.ValueOfString(s.user))
			m.Set(f.ByName("kind"), protoreflect.ValueOfEnum(protoreflect.EnumNumber(map[string]int32{"PURCHASE": 0, "REFUND": 1}[s.kind])))
			dev := dynamicpb.NewMessage(f.ByName("device").Message())
			dev.Set(dev.Descriptor().Fields().ByName("kind"), protoreflect.ValueOfString(s.device))
			m.Set(f.ByName("device"), protoreflect.ValueOfMessage(dev))
			m.Set(f.ByName("amount"), protoreflect.ValueOfFloat64(s.amount))
			m.Set(f.ByName("ts"), protoreflect.ValueOfMessage(timestamppb.New(time.UnixMilli(s.ts)).ProtoReflect()))
			if s.note != nil {
				m.Set(f.ByName("note"), protoreflect.ValueOfString(*s.note))
			}
			if v == 1 {
				m.Set(f.ByName("qty"), protoreflect.ValueOfInt64(2))
			}
			b, err := proto.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			// The message index [1] (Sale after Device), zigzag varints.
			return append([]byte{0, byte(ids[v] >> 24), byte(ids[v] >> 16), byte(ids[v] >> 8), byte(ids[v]), 2, 2}, b...)
		},
		json: func(s sale, v int) string {
			note := "" // an unset optional field is missing
			if s.note != nil {
				note = fmt.Sprintf(`,"note":%q`, *s.note)
			}
			return saleJSON(s, note, v)
		},
	}
}

// saleInputs returns n sales on two partitions as replay lines in w's
// format ({"base64": ...} values) and as the same records in JSON. Both
// schema versions alternate; some sales are refunds or on a tv (which the
// filter rejects), some have no note (which an expression reading it
// fails on), and event times are out of order within max_delay.
func saleInputs(w saleWriter, n int) (binary, plain string) {
	rng := rand.New(rand.NewSource(50))
	devices := []string{"phone", "desktop", "tv"}
	var bin, js strings.Builder
	from := int64(1767225600000)
	for i := range n {
		s := sale{user: fmt.Sprintf("u%d", rng.Intn(6)), kind: "PURCHASE", device: devices[rng.Intn(3)],
			amount: float64(rng.Intn(400)) / 4, ts: from + int64(i)*250 - int64(rng.Intn(1500))}
		if rng.Intn(5) == 0 {
			s.kind = "REFUND"
		}
		if rng.Intn(8) != 0 {
			note := strings.Repeat("n", rng.Intn(5))
			s.note = &note
		}
		v, p := i%2, rng.Intn(2)
		fmt.Fprintf(&bin, "{\"partition\":%d,\"value\":{\"base64\":%q}}\n", p, base64.StdEncoding.EncodeToString(w.wire(s, v)))
		fmt.Fprintf(&js, "{\"partition\":%d,\"value\":%s}\n", p, w.json(s, v))
	}
	return bin.String(), js.String()
}

// The pipeline parts the expression matrix varies: every expression site,
// and plain field paths.
var exprSites = []struct{ name, key, timestamp, aggregates string }{
	{"field paths", `{fields: [user, device.kind]}`, `{field: ts}`,
		`[{name: n, op: count}, {name: spend, op: sum, field: amount}, {name: devices, op: top_k, field: device.kind, k: 2}]`},
	{"filter", `{field: user}`, `{field: ts}`, `[{name: n, op: count}, {name: spend, op: sum, field: amount}]`},
	{"key expr", `{expr: 'value.user + "@" + value.device.kind + "/" + string(value.kind)'}`, `{field: ts}`, `[{name: n, op: count}]`},
	{"timestamp expr", `{field: user}`, `{expr: 'int(value.ts) + (value.amount > 50.0 ? 700 : 0)'}`, `[{name: n, op: count}]`},
	{"aggregate expr", `{field: user}`, `{field: ts}`,
		`[{name: n, op: count}, {name: spend2, op: sum, expr: 'value.amount * 2.0'}, {name: kinds, op: top_k, expr: 'value.kind', k: 2},` +
			` {name: devices, op: distinct_approx, expr: 'value.device.kind'}, {name: note_len, op: max, expr: 'double(size(value.note))'}]`},
}

func exprPipeline(t *testing.T, format, key, timestamp, filter, aggregates, extra string) *config.Pipeline {
	t.Helper()
	if filter != "" {
		filter = "    filter: '" + filter + "'\n"
	}
	cfg, err := config.Parse("c.yaml", []byte(`schema_registry: {url: "http://127.0.0.1:1"}
pipelines:
  - name: sales
    input: {topic: sales, format: `+format+`}
`+filter+`    key: `+key+`
    timestamp: `+timestamp+`
    watermark: {strategy: bounded_out_of_orderness, max_delay: 2s}
    window: {type: tumbling, size: 10s}
    aggregates: `+aggregates+`
    output: {topic: out}
`+extra))
	if err != nil {
		t.Fatal(err)
	}
	return &cfg.Pipelines[0]
}

// deadLetterReasons are the dead letters' reasons and positions, without
// the input (whose bytes are the format's).
func deadLetterReasons(errs string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(errs), "\n") {
		if d := gjson.Get(line, "dead_letter"); d.Exists() {
			fmt.Fprintf(&b, "%s %s %s %s\n", d.Get("line").Raw, d.Get("partition").Raw, d.Get("offset").Raw, d.Get("error").Str)
		}
	}
	return b.String()
}

// Every expression site sees the decoded value of an Avro or Protobuf
// record, in replay and in both stages of a repartitioned pipeline: each
// run gives the JSON run's panes and dead letters, for every input format
// × every expression site × plain field paths (issue: every Avro and
// Protobuf record was dead-lettered with "no such key").
func TestExpressionsSeeBinaryValues(t *testing.T) {
	fake := srfake.New()
	defer fake.Close()
	reg, err := schema.New(schema.Options{URL: fake.URL()})
	if err != nil {
		t.Fatal(err)
	}
	writers := map[string]saleWriter{"avro": avroSales(t, fake, "sales-avro"), "protobuf": protobufSales(t, fake, "sales-protobuf")}
	for _, format := range []string{"avro", "protobuf"} {
		bin, plain := saleInputs(writers[format], 600)
		for _, site := range exprSites {
			filter := ""
			if site.name == "filter" {
				filter = `value.kind != "REFUND" && value.device.kind != "tv" && has(value.note)`
			}
			for _, extra := range []string{"", "    repartition: true\n"} {
				name := format + "/" + site.name
				if extra != "" {
					name += "/repartition"
				}
				t.Run(name, func(t *testing.T) {
					jp := exprPipeline(t, "json", site.key, site.timestamp, filter, site.aggregates, extra)
					var jout, jerrs strings.Builder
					jsum, err := Run(Options{Pipeline: jp, Input: strings.NewReader(plain), Partitions: 2, Out: &jout, Errs: &jerrs})
					if err != nil {
						t.Fatal(err)
					}
					if jsum.Panes < 20 || jsum.Records < 200 {
						t.Fatalf("json run: %d records, %d panes, too few to compare", jsum.Records, jsum.Panes)
					}
					if filter != "" && jsum.Filtered == 0 {
						t.Fatal("json run: the filter kept every record")
					}
					if strings.Contains(site.aggregates, "value.note") && jsum.DeadLetters == 0 {
						t.Fatal("json run: no record without a note was dead-lettered")
					}
					bp := exprPipeline(t, format, site.key, site.timestamp, filter, site.aggregates, extra)
					var bout, berrs strings.Builder
					bsum, err := Run(Options{Pipeline: bp, Input: strings.NewReader(bin), Partitions: 2, Out: &bout, Errs: &berrs, Registry: reg})
					if err != nil {
						t.Fatal(err)
					}
					if bsum != jsum {
						t.Errorf("summary %+v, json's %+v", bsum, jsum)
					}
					if got, want := deadLetterReasons(berrs.String()), deadLetterReasons(jerrs.String()); got != want {
						t.Errorf("dead letters differ from json's:\n%s\njson:\n%s", head(got), head(want))
					}
					if bout.String() != jout.String() {
						t.Errorf("panes differ from json's:\n%s\njson:\n%s", head(bout.String()), head(jout.String()))
					}
				})
			}
		}
	}
}

func head(s string) string {
	if len(s) > 1500 {
		return s[:1500] + "…"
	}
	return s
}
