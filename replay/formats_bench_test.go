package replay

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/tidwall/gjson"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

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

// BenchmarkReplayFormats replays one input as JSON and as Avro (the same
// records, values as {"base64": ...}, schemas from pkg/sr's in-process
// fake registry) through bench/tumbling-10s-country.yaml's pipeline, and
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
	sch := avro.MustParse(benchEventSchema)
	var bin bytes.Buffer
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
	}
	cfg, err := config.Load("../bench/tumbling-10s-country.yaml")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		format config.Format
		input  []byte
	}{{"json", config.JSON, data}, {"avro", config.Avro, bin.Bytes()}} {
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
