package replay

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tidwall/gjson"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/sink"
	"github.com/windowd/windowd/source"
	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/windowing"
)

// engineShapes are BenchmarkEngine's window shapes: bench/ configurations
// (paths from this package's directory, where go test runs). noSlicing
// aggregates every hopping window for itself (windowing.Options.NoSlicing),
// to show what slicing saves in the same run.
var engineShapes = []struct {
	name, config string
	noSlicing    bool
}{
	{"tumbling-10s-key", "../bench/tumbling.yaml", false},
	{"tumbling-10s-country", "../bench/tumbling-10s-country.yaml", false},
	{"hopping-60s-1s-country", "../bench/hopping-60s-1s-country.yaml", false},
	{"hopping-60s-1s-country-per-window", "../bench/hopping-60s-1s-country.yaml", true},
	{"session-30s-country", "../bench/session-30s-country.yaml", false},
	// tumbling-10s-country with a filter, key.fields and an expr sum.
	{"tumbling-10s-country-expr", "../bench/tumbling-10s-country-expr.yaml", false},
	// Calendar windows against tumbling 24 h, on an input spanning days.
	{"tumbling-24h-country", "../bench/tumbling-24h-country.yaml", false},
	{"calendar-day-country", "../bench/calendar-day-country.yaml", false},
	{"calendar-7d-1d-country", "../bench/calendar-7d-1d-country.yaml", false},
	{"cumulate-1d-1h-country", "../bench/cumulate-1d-1h-country.yaml", false},
	{"cumulate-day-1h-country", "../bench/cumulate-day-1h-country.yaml", false},
	// Sliding windows against tumbling-10s-key: every record of the last
	// hour per key is state, so the config sizes state.cache_bytes for it.
	{"sliding-1h-key", "../bench/sliding-1h-key.yaml", false},
	// count + avg against count + quantiles of x (docs/PERFORMANCE.md,
	// Sketch aggregates).
	{"tumbling-10s-country-avg", "../bench/tumbling-10s-country-avg.yaml", false},
	{"tumbling-10s-country-quantiles", "../bench/tumbling-10s-country-quantiles.yaml", false},
	// The same by record key: a sketch per window of about one record.
	{"tumbling-10s-key-avg", "../bench/tumbling-10s-key-avg.yaml", false},
	{"tumbling-10s-key-quantiles", "../bench/tumbling-10s-key-quantiles.yaml", false},
	// Count windows by record key against tumbling-10s-key (about one
	// record per window there; ten here).
	{"count-10-key", "../bench/count-10-key.yaml", false},
	{"count-10-5-key", "../bench/count-10-5-key.yaml", false},
	// Transaction windows by record key against tumbling-10s-key: a
	// record in ten closes its key's window (CEL on every record).
	{"transaction-key", "../bench/transaction-key.yaml", false},
}

// benchInput is the input of BenchmarkEngine, loaded once per process.
type benchInput struct {
	lines      []byte          // the first n lines of the file, newline-terminated
	records    []source.Record // the same lines as records, as Kafka would deliver them
	partitions int
}

var (
	benchInputOnce sync.Once
	benchInputData *benchInput
	benchInputErr  error
)

// loadBenchInput reads up to n lines of path (n <= 0: all) and splits each
// into a source.Record: partition, record key and value bytes, with offsets
// counted per partition, as replay's line handling produces them.
func loadBenchInput(path string, n int) (*benchInput, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	in := &benchInput{}
	var offsets []int64
	rest := data
	for len(rest) > 0 && (n <= 0 || len(in.records) < n) {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if !gjson.ValidBytes(line) {
			return nil, fmt.Errorf("%s: line %d is not JSON", path, len(in.records)+1)
		}
		p := int(gjson.GetBytes(line, "partition").Int())
		for len(offsets) <= p {
			offsets = append(offsets, 0)
		}
		rec := source.Record{Partition: int32(p), Offset: offsets[p]}
		offsets[p]++
		if k := gjson.GetBytes(line, "key"); k.Type == gjson.String {
			rec.Key = []byte(k.Str)
		} else if k.Exists() && k.Type != gjson.Null {
			rec.Key = []byte(k.Raw)
		}
		rec.Value = []byte(gjson.GetBytes(line, "value").Raw)
		in.records = append(in.records, rec)
		in.lines = append(append(in.lines, line...), '\n')
	}
	in.partitions = max(len(offsets), 1)
	return in, nil
}

// paneSink is the benchmark's windowing.Emitter: it encodes each pane as
// replay does and discards it, or, with records, builds its output record
// as the service's pane writer does (sink.PaneRecord: value, key and
// headers).
type paneSink struct {
	enc     sink.PaneEncoder
	records bool
	buf     []byte
	panes   int64
	dropped int64
}

func (s *paneSink) Pane(p *windowing.Pane) error {
	if s.records {
		paneRecordSink = sink.PaneRecord("out", p, s.enc)
	} else {
		s.buf = s.enc.Append(s.buf[:0], p)
	}
	s.panes++
	return nil
}

// paneRecordSink keeps the pane records of paneSink live.
var paneRecordSink *kgo.Record

func (s *paneSink) Dropped(*windowing.Event, windowing.DropReason) error {
	s.dropped++
	return nil
}

// BenchmarkEngine measures the engine path of replay and of the service on
// one goroutine, with the input already in memory (see bench/README.md and
// docs/PERFORMANCE.md). It loads the first WINDOWD_BENCH_RECORDS lines
// (default: all) of WINDOWD_BENCH_INPUT (an absolute path; a bench/gen
// file), and is skipped without it.
//
// Sub-benchmarks, one per window shape of engineShapes:
//
//   - <shape>: the records are split from their lines beforehand (partition,
//     key and value bytes, as a Kafka fetch delivers them); one op is one
//     pass over all of them: source.Decoder.Decode (JSON check, field
//     extraction: key, ts, x), windowing.Engine.Record, a checkpoint whenever
//     64 MiB of writes are pending (as in replay), Finish and the last
//     checkpoint, panes encoded as JSON and discarded. Pebble is on
//     vfs.NewMem(), or in a temporary directory with WINDOWD_BENCH_FS=disk.
//     Opening and closing the store is not timed.
//
//   - lines-<shape>: replay.Run over the lines in memory (a bytes.Reader),
//     which adds replay's line handling (a JSON check and parse of the
//     whole line, copying key and value out of it), with a temporary
//     directory for Pebble as `windowd replay` uses.
//
//   - extract-only: the in-process ceiling, the per-record work of
//     bench/ceiling without its file and line handling: each record's key
//     length and its value's ts and x with gjson.Get over the value's bytes
//     viewed as a string (bench/ceiling's default mode), nothing else (no JSON
//     check, no engine).
//
//   - decode-only-key: source.Decoder.Decode alone for tumbling.yaml's
//     pipeline (the JSON check and the extraction of the engine's fields),
//     no engine: what the engine sub-benchmarks spend before the engine.
//
// Besides ns/op (per pass) and, with -benchmem, B/op and allocs/op (per
// pass), it reports records/s, ns/record, allocs/record and B/record.
// Run it with -cpu 1 for one core (GOMAXPROCS=1).
func BenchmarkEngine(b *testing.B) {
	path := os.Getenv("WINDOWD_BENCH_INPUT")
	if path == "" {
		b.Skip("set WINDOWD_BENCH_INPUT (and optionally WINDOWD_BENCH_RECORDS, WINDOWD_BENCH_FS=disk)")
	}
	n := 0
	if s := os.Getenv("WINDOWD_BENCH_RECORDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			b.Fatalf("WINDOWD_BENCH_RECORDS=%q: want a positive integer", s)
		}
		n = v
	}
	benchInputOnce.Do(func() { benchInputData, benchInputErr = loadBenchInput(path, n) })
	if benchInputErr != nil {
		b.Fatal(benchInputErr)
	}
	in := benchInputData
	onDisk := os.Getenv("WINDOWD_BENCH_FS") == "disk"
	b.Run("extract-only", func(b *testing.B) { benchExtractOnly(b, in) })
	for _, shape := range engineShapes {
		cfg, err := config.Load(shape.config)
		if err != nil {
			b.Fatal(err)
		}
		p := &cfg.Pipelines[0]
		if !shape.noSlicing && shape.name == "tumbling-10s-key" {
			b.Run("decode-only-key", func(b *testing.B) { benchDecodeOnly(b, p, in) })
		}
		noSlicing, cache := shape.noSlicing, int(cfg.State.CacheBytes)
		b.Run(shape.name, func(b *testing.B) { benchEngineRecords(b, p, in, onDisk, noSlicing, cache) })
		if shape.name == "tumbling-10s-key" {
			b.Run("prefetch-"+shape.name, func(b *testing.B) {
				benchEngineRecordsTo(b, p, in, onDisk, noSlicing, cache, &paneSink{enc: windowing.NewPaneJSON(p.Spec.Aggregates)}, true)
			})
		}
	}
	for _, shape := range engineShapes {
		if shape.noSlicing {
			continue
		}
		cfg, err := config.Load(shape.config)
		if err != nil {
			b.Fatal(err)
		}
		p := &cfg.Pipelines[0]
		b.Run("lines-"+shape.name, func(b *testing.B) { benchEngineLines(b, p, in) })
	}
	// The pane path with each output.format: the engine, and each pane's
	// output record built as the service builds it (docs/PERFORMANCE.md,
	// Output formats).
	for _, shape := range outputShapes {
		cfg, err := config.Load(shape.config)
		if err != nil {
			b.Fatal(err)
		}
		p := &cfg.Pipelines[0]
		for _, f := range []config.Format{config.JSON, config.Avro, config.Protobuf} {
			b.Run("output-"+f.String()+"-"+shape.name, func(b *testing.B) {
				benchEngineRecordsTo(b, p, in, onDisk, false, int(cfg.State.CacheBytes), &paneSink{enc: outputEncoder(f, p), records: true}, false)
			})
		}
	}
}

// outputShapes are the shapes the output formats are measured on: many
// keys (a pane per key and window, 0.63 panes per record), with a count
// and a sum or with quantiles (whose pane value is a map).
var outputShapes = []struct{ name, config string }{
	{"tumbling-10s-key", "../bench/tumbling.yaml"},
	{"tumbling-10s-key-quantiles", "../bench/tumbling-10s-key-quantiles.yaml"},
}

// outputEncoder is the pane encoder of output.format f for p, as the
// service makes it (schema id 1).
func outputEncoder(f config.Format, p *config.Pipeline) sink.PaneEncoder {
	switch f {
	case config.Avro:
		return sink.NewAvroPanes(p.Spec.Aggregates, sink.WirePrefix(1, false))
	case config.Protobuf:
		return sink.NewProtoPanes(p.Spec.Aggregates, sink.WirePrefix(1, true))
	}
	return windowing.NewPaneJSON(p.Spec.Aggregates)
}

// perRecord tracks the timed allocations of a benchmark to report them per
// record.
type perRecord struct {
	ms             runtime.MemStats
	mallocs, bytes uint64
}

func (c *perRecord) start() {
	runtime.ReadMemStats(&c.ms)
	c.mallocs -= c.ms.Mallocs
	c.bytes -= c.ms.TotalAlloc
}

func (c *perRecord) stop() {
	runtime.ReadMemStats(&c.ms)
	c.mallocs += c.ms.Mallocs
	c.bytes += c.ms.TotalAlloc
}

func (c *perRecord) report(b *testing.B, records int) {
	total := float64(records) * float64(b.N)
	b.ReportMetric(total/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/total, "ns/record")
	b.ReportMetric(float64(c.mallocs)/total, "allocs/record")
	b.ReportMetric(float64(c.bytes)/total, "B/record")
}

func benchEngineRecords(b *testing.B, p *config.Pipeline, in *benchInput, onDisk, noSlicing bool, cacheBytes int) {
	benchEngineRecordsTo(b, p, in, onDisk, noSlicing, cacheBytes, &paneSink{enc: windowing.NewPaneJSON(p.Spec.Aggregates)}, false)
}

// benchPrefetch is how many records a prefetching run decodes, prefetches
// (windowing.Engine.PrefetchKeys) and then processes at a time, as `run`'s
// loop does (service/poll.go).
const benchPrefetch = windowing.PrefetchBatch

// prefetchByPartition has eng prefetch the keys of evs (at most
// benchPrefetch), those of one partition at a time, as `run`'s loop
// prefetches a fetched partition's records; keys is a buffer.
func prefetchByPartition(eng *windowing.Engine, evs []windowing.Event, keys []string) []string {
	var done [benchPrefetch]bool
	evs = evs[:min(len(evs), benchPrefetch)]
	for i := range evs {
		if done[i] {
			continue
		}
		keys = keys[:0]
		for j := i; j < len(evs); j++ {
			if !done[j] && evs[j].Partition == evs[i].Partition {
				keys = append(keys, evs[j].Key)
				done[j] = true
			}
		}
		eng.PrefetchKeys(evs[i].Partition, keys)
	}
	return keys
}

// benchEngineRecordsTo is benchEngineRecords with the panes going to ps,
// and the records prefetched benchPrefetch at a time when prefetch.
func benchEngineRecordsTo(b *testing.B, p *config.Pipeline, in *benchInput, onDisk, noSlicing bool, cacheBytes int, ps *paneSink, prefetch bool) {
	var alloc perRecord
	var panes int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		opts := state.Options{FS: vfs.NewMem()}
		dir := "bench"
		if onDisk {
			opts.FS, dir = nil, b.TempDir()
		}
		db, err := state.Open(dir, opts)
		if err != nil {
			b.Fatal(err)
		}
		ps.panes, ps.dropped = 0, 0
		eng, err := windowing.New(p.Spec, p.Watermark, db, ps, windowing.Options{CommitWhenPending: true, NoSlicing: noSlicing, CacheBytes: cacheBytes})
		if err != nil {
			b.Fatal(err)
		}
		for part := 0; part < in.partitions; part++ {
			eng.Assign(int32(part), 0, true)
		}
		dec := source.NewDecoder(p)
		var evs [benchPrefetch]windowing.Event
		var keys []string
		batch := 1
		if prefetch {
			batch = benchPrefetch
		}
		alloc.start()
		b.StartTimer()

		for from := 0; from < len(in.records); from += batch {
			n := min(batch, len(in.records)-from)
			for j := range n {
				if err := dec.Decode(&in.records[from+j], &evs[j]); err != nil {
					b.Fatalf("record %d: %v", from+j, err)
				}
			}
			if prefetch {
				keys = prefetchByPartition(eng, evs[:n], keys)
			}
			for j := range n {
				if err := eng.Record(&evs[j], 0); err != nil {
					b.Fatal(err)
				}
				if eng.NeedsCheckpoint() { // as replay does
					if err := eng.Checkpoint(false); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		if err := eng.Finish(); err != nil {
			b.Fatal(err)
		}
		if err := eng.Checkpoint(false); err != nil {
			b.Fatal(err)
		}

		b.StopTimer()
		alloc.stop()
		if ps.panes == 0 || ps.dropped != 0 {
			b.Fatalf("%d panes, %d records dropped", ps.panes, ps.dropped)
		}
		panes = ps.panes
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	alloc.report(b, len(in.records))
	b.ReportMetric(float64(panes)/float64(len(in.records)), "panes/record")
}

func benchEngineLines(b *testing.B, p *config.Pipeline, in *benchInput) {
	var alloc perRecord
	b.SetBytes(int64(len(in.lines)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		alloc.start()
		sum, err := Run(Options{Pipeline: p, Input: bytes.NewReader(in.lines), Partitions: in.partitions, Out: io.Discard, Errs: io.Discard})
		alloc.stop()
		if err != nil {
			b.Fatal(err)
		}
		if sum.Records != int64(len(in.records)) {
			b.Fatalf("replayed %d records, want %d", sum.Records, len(in.records))
		}
	}
	alloc.report(b, len(in.records))
}

// extractSink keeps benchExtractOnly's results live.
var extractSink uint64

func benchExtractOnly(b *testing.B, in *benchInput) {
	var alloc perRecord
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		alloc.start()
		var sum uint64
		for j := range in.records {
			r := &in.records[j]
			v := unsafe.String(unsafe.SliceData(r.Value), len(r.Value)) // as bench/ceiling
			ts := gjson.Get(v, "ts").Int()
			x := gjson.Get(v, "x").Num
			sum += uint64(len(r.Key)) + uint64(ts) + uint64(x)
		}
		alloc.stop()
		extractSink += sum
	}
	alloc.report(b, len(in.records))
}

func benchDecodeOnly(b *testing.B, p *config.Pipeline, in *benchInput) {
	var alloc perRecord
	dec := source.NewDecoder(p)
	var ev windowing.Event
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		alloc.start()
		for j := range in.records {
			if err := dec.Decode(&in.records[j], &ev); err != nil {
				b.Fatalf("record %d: %v", j, err)
			}
		}
		alloc.stop()
	}
	alloc.report(b, len(in.records))
}
