package replay

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/tidwall/gjson"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/schema"
)

// benchEventSchema is bench/gen's record as Avro.
const benchEventSchema = `{"type":"record","name":"Event","namespace":"windowd.bench","fields":[
 {"name":"user","type":"string"},
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"x","type":"double"},
 {"name":"country","type":"string"},
 {"name":"page","type":"string"},
 {"name":"agent","type":"string"},
 {"name":"session","type":"string"}]}`

// BenchmarkReplayFormats replays one input as JSON, as Avro and as
// Protobuf (the same records, values as {"base64": ...}, schemas from
// pkg/sr's in-process fake registry) through bench/tumbling-10s-country.yaml's pipeline, and
// reports records/s and allocations per record of each
// (docs/PERFORMANCE.md, Input formats). The input is WINDOWD_BENCH_INPUT
// (bench/gen's output), else 200,000 records generated here.
func BenchmarkReplayFormats(b *testing.B) {
	data := benchFormatInput(b)
	fake := srfake.New()
	defer fake.Close()
	id, _, err := fake.RegisterSchema("bench-value", sr.Schema{Schema: benchEventSchema})
	if err != nil {
		b.Fatal(err)
	}
	eventProto, err := os.ReadFile("../bench/event.proto")
	if err != nil {
		b.Fatal(err)
	}
	protoID, _, err := fake.RegisterSchema("bench-proto-value", sr.Schema{Schema: string(eventProto), Type: sr.TypeProtobuf})
	if err != nil {
		b.Fatal(err)
	}
	sch := avro.MustParse(benchEventSchema)
	var bin, pb bytes.Buffer
	lines := 0
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		lines++
		r := gjson.ParseBytes(line)
		v := r.Get("value")
		rec := map[string]any{"user": v.Get("user").Str, "ts": time.UnixMilli(v.Get("ts").Int()).UTC(), "x": v.Get("x").Float(),
			"country": v.Get("country").Str, "page": v.Get("page").Str, "agent": v.Get("agent").Str, "session": v.Get("session").Str}
		payload, err := avro.Marshal(sch, rec)
		if err != nil {
			b.Fatal(err)
		}
		wire := append([]byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}, payload...)
		fmt.Fprintf(&bin, "{\"partition\":%d,\"key\":%s,\"value\":{\"base64\":%q}}\n", r.Get("partition").Int(), r.Get("key").Raw, base64.StdEncoding.EncodeToString(wire))
		wire = benchProtoEvent(protoID, v)
		fmt.Fprintf(&pb, "{\"partition\":%d,\"key\":%s,\"value\":{\"base64\":%q}}\n", r.Get("partition").Int(), r.Get("key").Raw, base64.StdEncoding.EncodeToString(wire))
	}
	cfg, err := config.Load("../bench/tumbling-10s-country.yaml")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		format config.Format
		input  []byte
	}{{"json", config.JSON, data}, {"avro", config.Avro, bin.Bytes()}, {"protobuf", config.Protobuf, pb.Bytes()}} {
		b.Run(c.name, func(b *testing.B) {
			p := cfg.Pipelines[0]
			p.Input.Format = c.format
			reg, err := schema.New(schema.Options{URL: fake.URL()})
			if err != nil {
				b.Fatal(err)
			}
			parts, err := ScanPartitions(&p, reg, bytes.NewReader(c.input))
			if err != nil {
				b.Fatal(err)
			}
			var out strings.Builder
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				out.Reset()
				sum, err := Run(Options{Pipeline: &p, Input: bytes.NewReader(c.input), Partitions: parts, Out: &out, Errs: io.Discard, Registry: reg})
				if err != nil || sum.Records != int64(lines) {
					b.Fatalf("records %d of %d: %v", sum.Records, lines, err)
				}
			}
			b.StopTimer()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(lines)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(lines*b.N), "allocs/record")
		})
	}
}

// benchProtoEvent is the bench/gen value v as bench/event.proto's Event in
// the wire format of schema id (message indexes [0]).
func benchProtoEvent(id int, v gjson.Result) []byte {
	b := []byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id), 0}
	str := func(num protowire.Number, s string) {
		b = protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
	}
	str(1, v.Get("user").Str)
	ms := v.Get("ts").Int()
	var ts []byte
	ts = protowire.AppendVarint(protowire.AppendTag(ts, 1, protowire.VarintType), uint64(ms/1000))
	if ms%1000 != 0 {
		ts = protowire.AppendVarint(protowire.AppendTag(ts, 2, protowire.VarintType), uint64(ms%1000*1e6))
	}
	b = protowire.AppendBytes(protowire.AppendTag(b, 2, protowire.BytesType), ts)
	b = protowire.AppendFixed64(protowire.AppendTag(b, 3, protowire.Fixed64Type), math.Float64bits(v.Get("x").Float()))
	str(4, v.Get("country").Str)
	str(5, v.Get("page").Str)
	str(6, v.Get("agent").Str)
	str(7, v.Get("session").Str)
	return b
}

// benchFormatInput is WINDOWD_BENCH_INPUT, or bench/gen-like lines.
func benchFormatInput(b *testing.B) []byte {
	if path := os.Getenv("WINDOWD_BENCH_INPUT"); path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		return data
	}
	var buf bytes.Buffer
	countries := []string{"au", "br", "de", "fr", "in", "jp", "uk", "us"}
	for i := 0; i < 200_000; i++ {
		u := fmt.Sprintf("u%d", i*7919%10000)
		fmt.Fprintf(&buf, `{"partition":%d,"key":%q,"value":{"user":%q,"ts":%d,"x":%d.%02d,"country":%q,"page":"/products/%d","agent":"Mozilla/5.0 (X11; Linux x86_64)","session":"%016x"}}`+"\n",
			i%4, u, u, 1700000000000+int64(i)*5-int64(i*31%2000), i%500, i%100, countries[i*13%8], i%5000, uint64(i)*0x9e3779b97f4a7c15)
	}
	return buf.Bytes()
}
