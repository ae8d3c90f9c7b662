package replay

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tidwall/gjson"

	"github.com/windowd/windowd/config"
)

// Properties over whole replay inputs and configurations
// (docs/FUZZING.md, FuzzReplayInvalidLine and FuzzReplayConfig).

// propMaxTime bounds one replay of a fuzz input (at most fuzzMaxInput
// bytes, which replays in milliseconds): a replay past it hangs, or costs
// more than linear time in its input.
const propMaxTime = 10 * time.Second

// propMaxAlloc bounds the bytes one replay of a fuzz input allocates:
// Pebble's in-memory store and the engine's buffers (a few MiB) plus a
// generous allowance per input byte.
func propMaxAlloc(inputBytes int) uint64 { return 64<<20 + 4096*uint64(inputBytes) }

// propRun replays data through p with the partition count ScanPartitions
// finds, as `windowd replay` without --partitions does, checking the bounds
// on time and allocation and that every stdout and stderr line is JSON.
func propRun(t *testing.T, p *config.Pipeline, data []byte) replayResult {
	t.Helper()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	start := time.Now()
	n, err := ScanPartitions(p, nil, bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: ScanPartitions: %v", p.Name, err)
	}
	var out, errs bytes.Buffer
	sum, err := Run(Options{Pipeline: p, Input: bytes.NewReader(data), Partitions: n, FS: vfs.NewMem(), Out: &out, Errs: &errs})
	if err != nil {
		t.Fatalf("%s: Run returned an error (bad input must be dead-lettered): %v", p.Name, err)
	}
	took := time.Since(start)
	runtime.ReadMemStats(&ms1)
	if took > propMaxTime {
		t.Fatalf("%s: %d input bytes took %v", p.Name, len(data), took)
	}
	if alloc := ms1.TotalAlloc - ms0.TotalAlloc; alloc > propMaxAlloc(len(data)) {
		t.Fatalf("%s: %d input bytes allocated %d bytes", p.Name, len(data), alloc)
	}
	for _, stream := range [][]byte{out.Bytes(), errs.Bytes()} {
		for _, l := range lines(stream) {
			if !gjson.Valid(l) {
				t.Fatalf("%s: output line is not JSON: %q", p.Name, l)
			}
		}
	}
	// Every non-blank line is exactly one of a record, a clock or a dead
	// letter (a record whose windows are out of range is both).
	if sum.Lines != sum.Records+sum.Clocks+sum.DeadLetters-sum.OutOfRange+sum.Filtered {
		t.Fatalf("%s: lines %d != records %d + clocks %d + dead letters %d - out of range %d + filtered %d",
			p.Name, sum.Lines, sum.Records, sum.Clocks, sum.DeadLetters, sum.OutOfRange, sum.Filtered)
	}
	if got := int64(strings.Count(errs.String(), `{"dead_letter":`)); got != sum.DeadLetters {
		t.Fatalf("%s: %d dead_letter lines, summary %d", p.Name, got, sum.DeadLetters)
	}
	return replayResult{sum: sum, out: out.Bytes(), errs: errs.Bytes()}
}

// FuzzReplayInvalidLine: adding a line that replay dead-letters never
// changes the panes (docs/SEMANTICS.md, Replay: partitions come only from
// valid records, and a bad line moves no watermark). The fuzzer gives a
// whole input, a line and where to put it; when the line turns out to be
// a dead letter of decoding (not a record, clock or filtered line), the
// panes must be byte-identical to those without it.
func FuzzReplayInvalidLine(f *testing.F) {
	ps, err := fuzzPipelines()
	if err != nil {
		f.Fatal(err)
	}
	bad := []string{
		`{"partition":1,"junk`, `{"partition":7,"value":"not an object"}`, `{"partition":3}`,
		`{"partition":9999,"key":"k","value":{"ts":"x","x":1}}`, `{"partition":2147483646,"key":"k","value":{"ts":1,"x":1}}`,
		`{"clock":-1}`, `{"clock":"soon"}`, `not json`, `{"key":"\ud800","value":{"ts":1,"x":1}}`,
		`{"partition":1,"key":"k","value":{"ts":1000}}`, "\xff\xfe", `[{"partition":5}]`,
	}
	for i, in := range append(goldenInputs(f), fuzzSeeds...) {
		f.Add([]byte(in), []byte(bad[i%len(bad)]), uint8(i))
	}
	f.Fuzz(func(t *testing.T, data, line []byte, at uint8) {
		if len(data)+len(line) > fuzzMaxInput || bytes.ContainsAny(line, "\r\n") || len(bytes.TrimSpace(line)) == 0 {
			t.Skip()
		}
		lines := bytes.SplitAfter(data, []byte("\n"))
		if len(lines) > 0 && !bytes.HasSuffix(lines[len(lines)-1], []byte("\n")) {
			lines[len(lines)-1] = append(append([]byte(nil), lines[len(lines)-1]...), '\n')
		}
		pos := int(at) % (len(lines) + 1)
		var with []byte
		for _, l := range lines[:pos] {
			with = append(with, l...)
		}
		with = append(append(with, line...), '\n')
		for _, l := range lines[pos:] {
			with = append(with, l...)
		}
		for i := range ps {
			p := &ps[i]
			base := propRun(t, p, data)
			got := propRun(t, p, with)
			lineNo := int64(bytes.Count(with[:bytes.Index(with, line)+len(line)], []byte("\n")) + 1)
			if got.sum.DeadLetters != base.sum.DeadLetters+1 || got.sum.Records != base.sum.Records ||
				got.sum.Clocks != base.sum.Clocks || got.sum.Filtered != base.sum.Filtered ||
				!bytes.Contains(got.errs, fmt.Appendf(nil, `"line":%d,`, lineNo)) {
				return // the line is not (only) a dead letter
			}
			if !bytes.Equal(got.out, base.out) {
				t.Fatalf("%s: the dead-lettered line %q (line %d) changed the panes\n--- without ---\n%s--- with ---\n%s", p.Name, line, lineNo, base.out, got.out)
			}
		}
	})
}

// fuzzConfigInput is the replay input FuzzReplayConfig runs every
// configuration over: records of the field names the seeds use, clocks, a
// late record and bad lines.
const fuzzConfigInput = `{"partition":0,"key":"u1","timestamp":1000,"headers":{"h":"v"},"value":{"ts":1000,"x":1.5,"user":"u1","t":"2026-03-29T00:00:00Z","amount":2}}
{"partition":1,"key":"u2","timestamp":2500,"value":{"ts":2500,"x":-2,"user":"u2","t":"2026-03-29T01:00:00Z","amount":3}}
{"clock":5000}
{"partition":0,"key":"u1","timestamp":12000,"value":{"ts":12000,"x":3,"user":"u1","t":"2026-03-30T00:00:00Z","amount":1}}
not json
{"partition":1,"key":"u1","timestamp":500,"value":{"ts":500,"x":4,"user":"u1","t":"2026-03-28T00:00:00Z","amount":5}}
{"clock":60000}
{"partition":0,"key":"u3","timestamp":9223372036854775000,"value":{"ts":9223372036854775000,"x":1,"user":"u3","t":"9999-12-31T23:59:59Z","amount":1}}
`

// FuzzReplayConfig: any configuration that config.Parse accepts replays
// (every pipeline of it) over a fixed input without a panic or an error, in
// bounded time and memory, with JSON output and consistent counts.
func FuzzReplayConfig(f *testing.F) {
	for _, src := range []string{fuzzConfig} {
		f.Add([]byte(src))
	}
	for _, in := range goldenPipelines(f) {
		f.Add([]byte(goldenConfig(in)))
	}
	f.Add([]byte(goldenConfig("timestamp: {field: ts, max_future: 1s}\nkey: {fields: [user, x]}\nwindow: {type: hopping, size: 10s, hop: 1ms}\naggregates: [{name: n, op: count}]\n")))
	f.Add([]byte(goldenConfig("timestamp: {source: record}\nrepartition: true\nkey: {field: user}\nwindow: {type: session, gap: 1ms}\naggregates: [{name: n, op: count}]\n")))
	f.Fuzz(func(t *testing.T, src []byte) {
		if len(src) > 16<<10 {
			t.Skip()
		}
		cfg, err := config.Parse("fuzz.yaml", src)
		if err != nil {
			return
		}
		for i := range cfg.Pipelines {
			propRun(t, &cfg.Pipelines[i], []byte(fuzzConfigInput))
		}
	})
}

// goldenPipelines are the pipeline sections of the golden files.
func goldenPipelines(f *testing.F) []string {
	return goldenSections(f, "pipeline")
}
