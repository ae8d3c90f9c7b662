package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tidwall/gjson"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/windowing"
)

// fuzzConfig holds the fixed pipelines FuzzReplayLines replays every input
// through. Both are retracting (accumulating plus retractions, so the most
// pane traffic; hop has a late_topic, sess none: late drops are printed
// either way) and keep
// closing: always, so every window that emits a pane ends with a final one.
//
//   - hop: hopping windows (4 per record, an offset), the record key, the
//     value's ts, early count and processing-time triggers, idleness, a
//     sparse watermark, late panes after every late record, and aggregates
//     over ts (present in every golden input), distinct_approx at the
//     smallest precision.
//   - sess: session windows (merges, merge retractions), aggregates over the
//     value's x, batched late panes.
//   - two: two inputs (a line's topic "in" or "b", the second keyed by the
//     value's k), tumbling windows, aggregates of either input and a ratio.
//   - join: a full interval join of the two with early rows.
const fuzzConfig = `kafka: {brokers: embedded}
pipelines:
  - name: hop
    input: {topic: in}
    timestamp: {field: ts}
    watermark: {max_delay: 2s, every: 2, idle_timeout: 5s}
    window: {type: hopping, size: 10s, hop: 3s, offset: 1s}
    allowed_lateness: 5s
    trigger: {early: {count: 2, every: 1s}, late: {every: 0s}, closing: always}
    accumulation: retracting
    aggregates:
      - {name: n, op: count}
      - {name: s, op: sum, field: ts}
      - {name: lo, op: min, field: ts}
      - {name: hi, op: max, field: ts}
      - {name: mean, op: avg, field: ts}
      - {name: d, op: distinct_approx, field: ts, precision: 4}
    output: {topic: out}
    late_topic: late
  - name: sess
    input: {topic: in}
    timestamp: {field: ts}
    watermark: {max_delay: 10s, idle_timeout: 30s}
    window: {type: session, gap: 5s}
    allowed_lateness: 3s
    trigger: {early: {count: 1}, late: {every: 2s}}
    accumulation: retracting
    aggregates:
      - {name: n, op: count}
      - {name: s, op: sum, field: x}
      - {name: hi, op: max, field: x}
      - {name: mean, op: avg, field: x}
      - {name: d, op: distinct_approx, field: x}
    output: {topic: out}
  - name: two
    inputs: [{topic: in}, {topic: b, as: bee, key: {field: k}}]
    timestamp: {field: ts}
    watermark: {max_delay: 2s, idle_timeout: 5s}
    window: {type: tumbling, size: 5s}
    allowed_lateness: 2s
    trigger: {early: {count: 2}}
    accumulation: retracting
    aggregates:
      - {name: n, op: count}
      - {name: nb, op: count, input: bee}
      - {name: s, op: sum, field: ts, input: in}
      - {name: r, op: ratio, of: nb, to: n}
    output: {topic: out}
  - name: join
    inputs: [{topic: in}, {topic: b, as: bee, key: {field: k}}]
    timestamp: {field: ts}
    watermark: {max_delay: 1s, idle_timeout: 5s}
    join: {type: interval, left: in, right: bee, between: [-1s, 3s], kind: full}
    allowed_lateness: 2s
    trigger: {early: {every: 1s}}
    output: {topic: out}
`

// What fuzzConfig's windows look like (ms).
const (
	fuzzHopSize   = 10000
	fuzzHopHop    = 3000
	fuzzHopOffset = 1000
	fuzzSessGap   = 5000
)

// fuzzMaxInput bounds the input: replay holds at most one line and the
// window state of its keys in memory, so this bounds a run's memory. It is
// far below MaxLineBytes, so no line is too long and every non-blank line
// is counted in Summary.Lines.
const fuzzMaxInput = 64 << 10

var fuzzPipelines = sync.OnceValues(func() ([]config.Pipeline, error) {
	c, err := config.Parse("fuzz.yaml", []byte(fuzzConfig))
	if err != nil {
		return nil, err
	}
	return c.Pipelines, nil
})

// fuzzSeeds are hand-written inputs aimed at the edges of replay's line
// parsing, the decoder and the engine.
var fuzzSeeds = []string{
	// Two topics (pipelines two and join): out of order, a late record,
	// an early row that a match retracts, clocks, a bad topic.
	`{"topic":"in","partition":0,"key":"u1","value":{"ts":1000,"x":1}}
{"topic":"b","partition":1,"value":{"k":"u1","ts":2500,"x":2}}
{"topic":"in","partition":1,"key":"u2","value":{"ts":3000,"x":3}}
{"clock":2000}
{"topic":"b","partition":0,"value":{"k":"u2","ts":5500,"x":4}}
{"topic":"in","partition":0,"key":"u1","value":{"ts":9000,"x":5}}
{"topic":"b","partition":1,"value":{"k":"u3","ts":9500,"x":6}}
{"topic":"in","partition":1,"key":"u3","value":{"ts":1500,"x":7}}
{"clock":9000}
{"topic":"c","partition":0,"key":"u1","value":{"ts":9600,"x":8}}
{"topic":"b","partition":0,"value":{"k":"u1","ts":20000,"x":9}}
{"topic":"in","partition":0,"key":"u9","value":{"ts":19000,"x":1}}
{"topic":"b","partition":1,"value":{"k":"u9","ts":18500}}
`,
	// Records of the pipelines' shape, both partitions, a late record.
	`{"partition":0,"key":"u1","timestamp":5,"headers":{"h":"v"},"value":{"ts":1000,"x":1.5}}
{"partition":1,"key":"u2","value":{"ts":2500,"x":-2}}
{"partition":1,"key":"u1","value":{"ts":12000,"x":3}}
{"partition":0,"key":"u1","value":{"ts":14000,"x":0}}
{"partition":0,"key":"u1","value":{"ts":3000,"x":4}}
{"clock":40000}
{"partition":1,"key":"u1","value":{"ts":1500,"x":4}}
`,
	// Huge and extreme numbers: timestamps at and beyond the int64 range,
	// windows at the edges of the integer range, sums that overflow to +Inf.
	`{"key":"k","value":{"ts":9223372036854775807,"x":1e308}}
{"key":"k","value":{"ts":9223372036854775806,"x":1e308}}
{"key":"k","value":{"ts":-9223372036854775808,"x":-1e308}}
{"key":"k","value":{"ts":-9223372036854775807,"x":-1e308}}
{"key":"k","value":{"ts":9223372036854775808,"x":1}}
{"key":"k","value":{"ts":1e19,"x":1}}
{"key":"k","value":{"ts":9.223372036854775807e18,"x":1}}
{"key":"k","value":{"ts":"9223372036854775807","x":1}}
{"key":"k","value":{"ts":9223372036854770000,"x":1e308}}
`,
	`{"clock":9223372036854775807}
{"key":"k","value":{"ts":9223372036854775000,"x":1}}
{"clock":9223372036854775807}
`,
	`{"key":"k","value":{"ts":-9223372036854775000,"x":5e-324}}
{"key":"k","value":{"ts":-9223372036854775808,"x":1.7976931348623157e308}}
{"key":"k","value":{"ts":0,"x":-0}}
`,
	// Partitions out of range, negative, fractional, huge, not numbers.
	`{"partition":-1,"key":"k","value":{"ts":1,"x":1}}
{"partition":2,"key":"k","value":{"ts":1,"x":1}}
{"partition":1.0,"key":"k","value":{"ts":1,"x":1}}
{"partition":1e0,"key":"k","value":{"ts":1,"x":1}}
{"partition":-0,"key":"k","value":{"ts":1,"x":1}}
{"partition":0.5,"key":"k","value":{"ts":1,"x":1}}
{"partition":4294967296,"key":"k","value":{"ts":1,"x":1}}
{"partition":99999999999999999999999,"key":"k","value":{"ts":1,"x":1}}
{"partition":-9223372036854775808,"key":"k","value":{"ts":1,"x":1}}
{"partition":"1","key":"k","value":{"ts":1,"x":1}}
{"partition":null,"key":"k","value":{"ts":1,"x":1}}
{"partition":true,"key":"k","value":{"ts":1,"x":1}}
`,
	// Deep nesting in the value, in the line and in a string value.
	`{"key":"k","value":{"ts":1,"x":1,"deep":` + strings.Repeat("[", 3000) + strings.Repeat("]", 3000) + `}}
` + strings.Repeat("[", 5000) + `
{"key":"k","value":"` + strings.Repeat("{\\\"a\\\":", 2000) + `1` + strings.Repeat("}", 2000) + `"}
{"key":` + strings.Repeat(`{"a":`, 1000) + `1` + strings.Repeat("}", 1000) + `,"value":{"ts":2,"x":2}}
`,
	// Clock lines: backwards, equal, fractional, negative, not numbers.
	`{"clock":5000}
{"clock":1000}
{"clock":5000}
{"clock":5000.0}
{"clock":5e3}
{"clock":6000.5}
{"clock":-1}
{"clock":"7000"}
{"clock":null}
{"clock":1e400}
{"clock":7000,"key":"k","value":{"ts":1,"x":1}}
{"key":"k","value":{"ts":1,"x":1}}
{"clock":100000}
`,
	// value as a string holding JSON (or not), and other value types.
	`{"key":"k","value":"{\"ts\":1000,\"x\":2}"}
{"key":"k","value":"{\"ts\":\"1000\",\"x\":2}"}
{"key":"k","value":"not json"}
{"key":"k","value":""}
{"key":"k","value":"  {\"ts\":2000,\"x\":1}  "}
{"key":"k","value":"\"{\\\"ts\\\":1}\""}
{"key":"k","value":null}
{"key":"k","value":42}
{"key":"k","value":[{"ts":1,"x":1}]}
{"key":"k"}
{"key":"k","value":{"ts":3000,"x":1},"value":{"ts":4000,"x":2}}
`,
	// NaN-like and odd numbers.
	`{"key":"k","value":{"ts":NaN,"x":1}}
{"key":"k","value":{"ts":1,"x":NaN}}
{"key":"k","value":{"ts":1,"x":Infinity}}
{"key":"k","value":{"ts":1,"x":-Infinity}}
{"key":"k","value":{"ts":"NaN","x":1}}
{"key":"k","value":{"ts":1,"x":"NaN"}}
{"key":"k","value":{"ts":1,"x":1e400}}
{"key":"k","value":{"ts":1,"x":-1e400}}
{"key":"k","value":{"ts":1e-400,"x":1e-400}}
{"key":"k","value":{"ts":-0.0,"x":-0.0}}
{"key":"k","value":{"ts":0.5,"x":0.1}}
{"key":"k","value":{"ts":-0.5,"x":0.2}}
{"key":"k","value":{"ts":1E3,"x":01}}
{"key":"k","value":{"ts":+1,"x":1}}
{"key":"k","value":{"ts":1.,"x":.5}}
{"key":"k","timestamp":1.5,"value":{"ts":1,"x":1}}
{"key":"k","timestamp":"5","value":{"ts":1,"x":1}}
`,
	// Invalid UTF-8 in keys, values and whole lines; escapes and control characters.
	"{\"key\":\"\xff\xfe\",\"value\":{\"ts\":1,\"x\":1}}\n" +
		"{\"key\":\"\xfe\xff\",\"value\":{\"ts\":1,\"x\":1}}\n" +
		"{\"key\":\"\xc3\x28\",\"value\":{\"ts\":2,\"x\":\"\xed\xa0\x80\"}}\n" +
		"{\"key\":\"k\",\"value\":\"{\\\"ts\\\":1,\\\"x\\\":1,\\\"u\\\":\\\"\xff\\\"}\"}\n" +
		"\xff\xfe\xfd\n" +
		"{\"key\":\"\\ud800\",\"value\":{\"ts\":3,\"x\":1}}\n" +
		"{\"key\":\"\\udc00\\ud800\",\"value\":{\"ts\":3,\"x\":1}}\n" +
		"{\"key\":\"\\u0000\\u001f\\u2028\\u2029\\\"\\\\\",\"value\":{\"ts\":4,\"x\":1}}\n" +
		"{\"key\":\"a\x00b\",\"value\":{\"ts\":5,\"x\":1}}\n" +
		"\xef\xbb\xbf{\"key\":\"bom\",\"value\":{\"ts\":6,\"x\":1}}\n",
	// Two topics whose values hold bytes that are not UTF-8 in a field
	// name and in a string: a join row carries the value, escaped as keys
	// are (early rows, a match and unmatched final rows).
	"{\"topic\":\"in\",\"partition\":0,\"key\":\"u1\",\"value\":{\"ts\":9000,\"\x8c\":5}}\n" +
		"{\"clock\":20000}\n" +
		"{\"topic\":\"b\",\"partition\":1,\"value\":{\"k\":\"u1\",\"ts\":9500,\"s\":\"a\xff\xc3\"}}\n" +
		"{\"topic\":\"b\",\"partition\":0,\"value\":{\"k\":\"u2\",\"ts\":9600,\"\xfe\":\"\xed\xa0\x80\"}}\n" +
		"{\"clock\":40000}\n" +
		"{\"topic\":\"in\",\"partition\":1,\"key\":\"u3\",\"value\":{\"ts\":30000}}\n" +
		"{\"topic\":\"b\",\"partition\":1,\"value\":{\"k\":\"u3\",\"ts\":90000}}\n" +
		"{\"topic\":\"in\",\"partition\":0,\"key\":\"u3\",\"value\":{\"ts\":90000}}\n",
	// Keys that are not strings; null and empty keys; duplicate members.
	`{"key":{"a":[1,2]},"value":{"ts":1,"x":1}}
{"key":123,"value":{"ts":1,"x":1}}
{"key":1.50,"value":{"ts":1,"x":1}}
{"key":true,"value":{"ts":1,"x":1}}
{"key":null,"value":{"ts":1,"x":1}}
{"key":"","value":{"ts":1,"x":1}}
{"key":"a","key":"b","value":{"ts":1,"x":1}}
{"key":"k","value":{"ts":1,"ts":2,"x":1,"x":"y"}}
`,
	// Blank, whitespace, CR and odd lines; a last line without a newline.
	"\n\n   \n\t\n\r\n{\"key\":\"k\",\"value\":{\"ts\":1,\"x\":1}}\r\n\r\r\n{}\n[]\nnull\n\"s\"\n1\n{\"key\":\"k\",\"value\":{\"ts\":2,\"x\":1}}",
	// Session merges out of order across both partitions, retractions.
	`{"partition":0,"key":"k","value":{"ts":0,"x":1}}
{"partition":1,"key":"k","value":{"ts":12000,"x":2}}
{"partition":0,"key":"k","value":{"ts":6000,"x":3}}
{"partition":1,"key":"k","value":{"ts":3000,"x":4}}
{"partition":0,"key":"k","value":{"ts":9000,"x":5}}
{"partition":0,"key":"k","value":{"ts":30000,"x":6}}
{"partition":1,"key":"k","value":{"ts":31000,"x":7}}
{"partition":1,"key":"k","value":{"ts":16000,"x":8}}
{"partition":0,"key":"k","value":{"ts":20000,"x":9}}
`,
	// Idleness: partition 1 never delivers; clocks move the frontier.
	`{"partition":0,"key":"a","value":{"ts":1000,"x":1}}
{"clock":4000}
{"partition":0,"key":"a","value":{"ts":20000,"x":1}}
{"clock":36000}
{"partition":0,"key":"a","value":{"ts":1000,"x":1}}
{"partition":1,"key":"b","value":{"ts":2000,"x":1}}
{"clock":80000}
`,
	// Many keys in one window.
	func() string {
		var b strings.Builder
		for i := range 200 {
			fmt.Fprintf(&b, `{"partition":%d,"key":"k%d","value":{"ts":%d,"x":%d}}`+"\n", i%2, i%17, i*37, i)
		}
		return b.String()
	}(),
}

// goldenInputs returns the input sections of testdata/*.txt, each as it is
// and with an x added to every value (for the session pipeline).
func goldenInputs(f *testing.F) []string {
	var inputs []string
	for _, rest := range goldenSections(f, "input") {
		inputs = append(inputs, rest, strings.ReplaceAll(rest, `{"ts":`, `{"x":1.25,"ts":`))
	}
	return inputs
}

// goldenSections returns the section name of every golden file that has one.
func goldenSections(f *testing.F, name string) []string {
	files := goldenFiles(f)
	var sections []string
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		_, rest, ok := strings.Cut(string(data), "\n-- "+name+" --\n")
		if !ok {
			continue
		}
		if i := strings.Index(rest, "\n-- "); i >= 0 {
			rest = rest[:i+1]
		}
		sections = append(sections, rest)
	}
	return sections
}

// FuzzReplayLines replays arbitrary input through fuzzPipelines and checks
// what must hold for any input (see checkReplay).
func FuzzReplayLines(f *testing.F) {
	for _, in := range goldenInputs(f) {
		f.Add([]byte(in))
	}
	for _, in := range fuzzSeeds {
		f.Add([]byte(in))
	}
	ps, err := fuzzPipelines()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > fuzzMaxInput {
			t.Skip("input over the size cap")
		}
		for i := range ps {
			checkReplay(t, &ps[i], data)
		}
	})
}

// replayResult is one replay of a fuzz input.
type replayResult struct {
	sum       Summary
	out, errs []byte
}

func fuzzReplay(t *testing.T, p *config.Pipeline, data []byte, cacheBytes, workers int) replayResult {
	t.Helper()
	var out, errs bytes.Buffer
	sum, err := Run(Options{
		Pipeline:   p,
		Input:      bytes.NewReader(data),
		Partitions: 2,
		FS:         vfs.NewMem(),
		CacheBytes: cacheBytes,
		Out:        &out,
		Errs:       &errs,
		Workers:    workers,
	})
	if err != nil {
		t.Fatalf("%s: Run returned an error (bad input must be dead-lettered): %v", p.Name, err)
	}
	return replayResult{sum: sum, out: out.Bytes(), errs: errs.Bytes()}
}

// checkReplay replays data through p and checks:
//
//   - Run returns no error (bad lines are dead letters) and does not panic;
//   - with a one-byte window cache (state goes through Pebble after every
//     step) the output, error stream and summary are identical;
//   - every output and error-stream line is a valid UTF-8 JSON object of the
//     documented shape;
//   - the summary agrees with the input and the streams;
//   - the pane protocol of docs/SEMANTICS.md, Firing and Panes (see
//     checkPanes).
func checkReplay(t *testing.T, p *config.Pipeline, data []byte) {
	res := fuzzReplay(t, p, data, 0, 1)
	evicting := fuzzReplay(t, p, data, 1, 1)
	if res.sum != evicting.sum || !bytes.Equal(res.out, evicting.out) || !bytes.Equal(res.errs, evicting.errs) {
		t.Fatalf("%s: the result depends on the window cache size\n--- cache 64MiB: %+v\n%s%s--- cache 1 byte: %+v\n%s%s",
			p.Name, res.sum, res.out, res.errs, evicting.sum, evicting.out, evicting.errs)
	}
	parallel := fuzzReplay(t, p, data, 0, 3)
	if res.sum != parallel.sum || !slices.Equal(sortedLines(res.out), sortedLines(parallel.out)) || !slices.Equal(sortedLines(res.errs), sortedLines(parallel.errs)) {
		t.Fatalf("%s: three workers' lines differ from one engine's\n--- one: %+v\n%s%s--- three: %+v\n%s%s",
			p.Name, res.sum, res.out, res.errs, parallel.sum, parallel.out, parallel.errs)
	}
	sum := res.sum

	// Counters. No line reaches MaxLineBytes, so every non-blank line is
	// counted and is exactly one of a record, a clock or a dead letter (a
	// record whose windows fall outside the int64 range is both a record
	// and a dead letter).
	if sum.Lines != sum.Records+sum.Clocks+sum.DeadLetters-sum.OutOfRange {
		t.Fatalf("%s: lines %d != records %d + clocks %d + dead letters %d", p.Name, sum.Lines, sum.Records, sum.Clocks, sum.DeadLetters)
	}
	nonBlank := int64(0)
	for _, l := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			nonBlank++
		}
	}
	if sum.Lines != nonBlank {
		t.Fatalf("%s: summary counts %d lines, the input has %d non-blank lines", p.Name, sum.Lines, nonBlank)
	}
	if sum.LateDropped < 0 || sum.LateDropped > sum.Records || sum.Retractions < 0 || sum.Retractions > sum.Panes {
		t.Fatalf("%s: inconsistent summary %+v", p.Name, sum)
	}

	// The error stream: one dead_letter line per dead letter and (with or
	// without a late_topic) one late_dropped line per dropped record.
	var deadLetters, lateDropped int64
	for _, l := range lines(res.errs) {
		if !gjson.Valid(l) || !utf8.ValidString(l) {
			t.Fatalf("%s: error stream line is not valid JSON: %q", p.Name, l)
		}
		v := gjson.Parse(l)
		switch {
		case v.Get("dead_letter.error").Type == gjson.String && v.Get("dead_letter.line").Type == gjson.Number:
			deadLetters++
		case v.Get("late_dropped.reason").Type == gjson.String && v.Get("late_dropped.timestamp").Type == gjson.Number:
			lateDropped++
		default:
			t.Fatalf("%s: unexpected error stream line %s", p.Name, l)
		}
	}
	if deadLetters != sum.DeadLetters || lateDropped != sum.LateDropped {
		t.Fatalf("%s: error stream has %d dead letters and %d late drops, summary %+v", p.Name, deadLetters, lateDropped, sum)
	}

	if p.Join != nil {
		checkJoinRows(t, p, res)
		return
	}
	panes := make([]fuzzPane, 0, 16)
	for _, l := range lines(res.out) {
		if !gjson.Valid(l) || !utf8.ValidString(l) {
			t.Fatalf("%s: output line is not valid JSON: %q", p.Name, l)
		}
		panes = append(panes, parsePane(t, p, l))
	}
	var retractions int64
	for i := range panes {
		if panes[i].Retraction {
			retractions++
		}
	}
	if int64(len(panes))-retractions != sum.Panes || retractions != sum.Retractions {
		t.Fatalf("%s: output has %d panes and %d retractions, summary %+v", p.Name, int64(len(panes))-retractions, retractions, sum)
	}
	// Keys are byte-exact in output (docs/SEMANTICS.md, Records and
	// keys): the printed key tells windows apart, for any input.
	checkPanes(t, p, panes)
}

// checkJoinRows checks a join's rows (docs/SEMANTICS.md, Joins): each a
// JSON object of the documented shape, as many as the summary counts;
// a row that is not final is an unmatched one, and it is either retracted
// (the retraction repeats it) or followed by the final unmatched row of
// its record; a retraction follows the row it takes back.
//
// Replay's rows carry no offsets, so two records of one key with the same
// value and time print the same rows: open counts a record's early rows
// not yet taken back or made final, and each retraction or final
// unmatched row settles one of them. A record shown early twice leaves
// one open.
func checkJoinRows(t *testing.T, p *config.Pipeline, res replayResult) {
	t.Helper()
	open := map[string]int{} // early rows not yet settled, by their record's printed form
	var rows, retractions int64
	for _, l := range lines(res.out) {
		v := gjson.Parse(l)
		if !gjson.Valid(l) || !utf8.ValidString(l) || v.Get("key").Type != gjson.String || !v.Get("interval.end").Exists() ||
			!v.Get("pane.final").IsBool() || !v.Get("matched").IsBool() || !v.Get("retraction").IsBool() {
			t.Fatalf("%s: not a join row: %q", p.Name, l)
		}
		left, right := v.Get("in").Raw, v.Get("bee").Raw
		matched := left != "null" && right != "null"
		if matched != v.Get("matched").Bool() || (left == "null" && right == "null") {
			t.Fatalf("%s: matched says %v: %s", p.Name, v.Get("matched").Bool(), l)
		}
		record := v.Get("key").Raw + left + right + v.Get("interval").Raw
		switch {
		case v.Get("retraction").Bool():
			if open[record] == 0 {
				t.Fatalf("%s: a retraction of a row not shown early: %s", p.Name, l)
			}
			open[record]--
			retractions++
		case !v.Get("pane.final").Bool():
			if matched {
				t.Fatalf("%s: an early row that is a match: %s", p.Name, l)
			}
			open[record]++
			rows++
		default:
			if !matched && open[record] > 0 {
				open[record]--
			}
			rows++
		}
	}
	for record, n := range open {
		if n != 0 {
			t.Fatalf("%s: %d early rows neither retracted nor made final (or one record shown early twice): %s", p.Name, n, record)
		}
	}
	if rows != res.sum.Panes || retractions != res.sum.Retractions {
		t.Fatalf("%s: %d rows and %d retractions, summary %+v", p.Name, rows, retractions, res.sum)
	}
}

func lines(b []byte) []string {
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// sortedLines is lines(b), sorted: a stream's lines as a multiset (the
// order across keys that workers change left out).
func sortedLines(b []byte) []string {
	l := lines(b)
	sort.Strings(l)
	return l
}

// fuzzPane is one output line; decoding it with DisallowUnknownFields checks
// the shape of docs/SEMANTICS.md, Output.
type fuzzPane struct {
	Key    *string `json:"key"`
	Window *struct {
		Start *int64 `json:"start"`
		End   *int64 `json:"end"`
	} `json:"window"`
	Pane *struct {
		Timing *string `json:"timing"`
		Index  *uint32 `json:"index"`
		Final  *bool   `json:"final"`
		Mode   *string `json:"mode"`
	} `json:"pane"`
	Retraction bool                       `json:"retraction"`
	Aggregates map[string]json.RawMessage `json:"aggregates"`

	line   string
	agg    string // the aggregates object as printed
	rawKey string // the key as printed: JSON readers turn \udcXX into U+FFFD
}

func (fp *fuzzPane) window() string {
	return fp.rawKey + "/" + strconv.FormatInt(*fp.Window.Start, 10) + "/" + strconv.FormatInt(*fp.Window.End, 10)
}

func parsePane(t *testing.T, p *config.Pipeline, line string) fuzzPane {
	t.Helper()
	var fp fuzzPane
	dec := json.NewDecoder(strings.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fp); err != nil {
		t.Fatalf("%s: pane %s: %v", p.Name, line, err)
	}
	if fp.Key == nil || fp.Window == nil || fp.Window.Start == nil || fp.Window.End == nil || fp.Pane == nil ||
		fp.Pane.Timing == nil || fp.Pane.Index == nil || fp.Pane.Final == nil || fp.Pane.Mode == nil || fp.Aggregates == nil ||
		!gjson.Get(line, "retraction").IsBool() {
		t.Fatalf("%s: pane lacks a field: %s", p.Name, line)
	}
	fp.line = line
	fp.agg = gjson.Get(line, "aggregates").Raw
	fp.rawKey = gjson.Get(line, "key").Raw
	switch *fp.Pane.Timing {
	case "EARLY", "ON_TIME", "LATE":
	default:
		t.Fatalf("%s: bad timing: %s", p.Name, line)
	}
	if *fp.Pane.Mode != p.Spec.Mode.String() {
		t.Fatalf("%s: mode %q, want %q: %s", p.Name, *fp.Pane.Mode, p.Spec.Mode, line)
	}
	if len(fp.Aggregates) != len(p.Spec.Aggregates) {
		t.Fatalf("%s: %d aggregates, want %d: %s", p.Name, len(fp.Aggregates), len(p.Spec.Aggregates), line)
	}
	for _, a := range p.Spec.Aggregates {
		if _, ok := fp.Aggregates[a.Name]; !ok {
			t.Fatalf("%s: aggregate %s missing: %s", p.Name, a.Name, line)
		}
	}
	// Accumulating content: every window holds at least the record that made it.
	if n, err := strconv.ParseInt(string(fp.Aggregates["n"]), 10, 64); err != nil || n < 1 {
		t.Fatalf("%s: count %s is not a positive integer: %s", p.Name, fp.Aggregates["n"], line)
	}
	start, end := *fp.Window.Start, *fp.Window.End
	switch p.Name {
	case "hop":
		// Fixed windows whose bounds leave the int64 range are left out.
		if start >= end || end-start != fuzzHopSize || (start%fuzzHopHop-fuzzHopOffset+2*fuzzHopHop)%fuzzHopHop != 0 {
			t.Fatalf("%s: not a hopping window of size %d, hop %d, offset %d: %s", p.Name, fuzzHopSize, fuzzHopHop, fuzzHopOffset, line)
		}
	case "sess":
		// A session spans at least the gap (a record whose [t, t+gap) would
		// end past the int64 range is dead-lettered, not windowed).
		if start >= end || uint64(end)-uint64(start) < fuzzSessGap {
			t.Fatalf("%s: session shorter than the gap: %s", p.Name, line)
		}
	}
	if fp.Retraction && *fp.Pane.Final {
		t.Fatalf("%s: a final retraction: %s", p.Name, line)
	}
	return fp
}

// checkPanes checks the pane protocol of docs/SEMANTICS.md (Firing, Panes)
// on one replay's output (retracting mode, closing: always):
//
//   - a retraction repeats (bounds, timing, index, aggregates) a non-final
//     pane not yet retracted; at the end of input every non-final pane has
//     been retracted (each was followed by another pane of its window or
//     its session was merged away) — so every window ends with a final pane;
//   - nothing follows a window's final pane;
//   - fixed windows: indexes run 0, 1, 2 … per window; right before each
//     pane with index > 0 comes the retraction of index-1; timings run
//     EARLY* ON_TIME? LATE*;
//   - sessions: indexes of a lineage (identified by its start) increase.
func checkPanes(t *testing.T, p *config.Pipeline, panes []fuzzPane) {
	type paneKey struct {
		window string
		index  uint32
	}
	outstanding := map[paneKey]*fuzzPane{} // emitted, non-final, not yet retracted
	type winState struct {
		next   uint32 // next index (fixed windows)
		final  bool
		timing int // rank of the last timing: 0 EARLY, 1 ON_TIME, 2 LATE
		seen   bool
	}
	windows := map[string]*winState{}
	rank := map[string]int{"EARLY": 0, "ON_TIME": 1, "LATE": 2}
	fixed := p.Spec.Window.Kind != windowing.Session
	for i := range panes {
		fp := &panes[i]
		wk := fp.window()
		idx := *fp.Pane.Index
		if fp.Retraction {
			pk := paneKey{wk, idx}
			prev, ok := outstanding[pk]
			if !ok {
				t.Fatalf("%s: output line %d retracts a pane that was not emitted, or is final or already retracted: %s", p.Name, i+1, fp.line)
			}
			if *prev.Pane.Timing != *fp.Pane.Timing || prev.agg != fp.agg {
				t.Fatalf("%s: output line %d retraction does not repeat the pane\npane:       %s\nretraction: %s", p.Name, i+1, prev.line, fp.line)
			}
			delete(outstanding, pk)
			if fixed {
				if i+1 >= len(panes) || panes[i+1].Retraction || panes[i+1].window() != wk || *panes[i+1].Pane.Index != idx+1 {
					t.Fatalf("%s: output line %d retraction is not followed by the next pane of its window", p.Name, i+1)
				}
			}
			continue
		}
		// Sessions are tracked by lineage (key and start), fixed windows by bounds.
		lk := wk
		if !fixed {
			lk = fp.rawKey + "/" + strconv.FormatInt(*fp.Window.Start, 10)
		}
		ws := windows[lk]
		if ws == nil {
			ws = &winState{}
			windows[lk] = ws
		}
		if ws.final {
			t.Fatalf("%s: output line %d follows the final pane of its window: %s", p.Name, i+1, fp.line)
		}
		if fixed {
			if idx != ws.next {
				t.Fatalf("%s: output line %d has index %d, want %d: %s", p.Name, i+1, idx, ws.next, fp.line)
			}
			if idx > 0 && (i == 0 || !panes[i-1].Retraction || panes[i-1].window() != wk) {
				t.Fatalf("%s: output line %d (index %d) is not preceded by a retraction: %s", p.Name, i+1, idx, fp.line)
			}
			r := rank[*fp.Pane.Timing]
			if ws.seen && (r < ws.timing || r == 1 && ws.timing == 1) {
				t.Fatalf("%s: output line %d timing %s after %d: %s", p.Name, i+1, *fp.Pane.Timing, ws.timing, fp.line)
			}
			ws.timing = r
		} else if ws.seen && idx < ws.next {
			t.Fatalf("%s: output line %d index %d repeats an index of its session lineage (next %d): %s", p.Name, i+1, idx, ws.next, fp.line)
		}
		ws.seen = true
		ws.next = idx + 1
		if *fp.Pane.Final {
			ws.final = true
			continue
		}
		pk := paneKey{wk, idx}
		if _, dup := outstanding[pk]; dup {
			t.Fatalf("%s: output line %d repeats a pane not yet retracted: %s", p.Name, i+1, fp.line)
		}
		outstanding[pk] = fp
	}
	for _, fp := range outstanding {
		t.Fatalf("%s: a non-final pane is never retracted (its window got no final pane): %s", p.Name, fp.line)
	}
}

// TestCRLFLines checks that a line's "\r\n" ending is not part of the line:
// the same input with CRLF endings gives the same panes, dead letters (which
// echo the line) and summary.
func TestCRLFLines(t *testing.T) {
	ps, err := fuzzPipelines()
	if err != nil {
		t.Fatal(err)
	}
	lf := `{"partition":0,"key":"u1","value":{"ts":1000,"x":1.5}}
{"partition":1,"key":"u2","value":{"ts":2500,"x":-2}}
{"partition":0,"key":"u1","value":{"ts":"bad","x":1}}
not json
{"partition":1,"key":"u1","value":{"ts":12000,"x":3}}
{"clock":40000}
`
	crlf := strings.ReplaceAll(lf, "\n", "\r\n")
	want := fuzzReplay(t, &ps[0], []byte(lf), 0, 1)
	got := fuzzReplay(t, &ps[0], []byte(crlf), 0, 1)
	if want.sum.DeadLetters != 2 || want.sum.Panes == 0 {
		t.Fatalf("LF input: %+v, want 2 dead letters and panes", want.sum)
	}
	if got.sum != want.sum || !bytes.Equal(got.out, want.out) || !bytes.Equal(got.errs, want.errs) {
		t.Fatalf("CRLF input differs from LF:\n--- LF %+v\n%s%s--- CRLF %+v\n%s%s", want.sum, want.out, want.errs, got.sum, got.out, got.errs)
	}
}
