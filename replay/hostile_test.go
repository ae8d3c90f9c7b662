package replay

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/windowd/windowd/config"
)

// hostilePipeline is a tumbling count over the value's ts, keyed by user,
// with no allowed delay or lateness: a record behind the frontier is late.
func hostilePipeline(t *testing.T, extra string) *config.Pipeline {
	t.Helper()
	cfg, err := config.Parse("c.yaml", []byte(goldenConfig("timestamp: {field: ts"+extra+"}\nkey: {field: user}\nwindow: {type: tumbling, size: 10s}\nwatermark: {strategy: bounded_out_of_orderness, max_delay: 0s}\naggregates: [{name: n, op: count}]\n")))
	if err != nil {
		t.Fatal(err)
	}
	return &cfg.Pipelines[0]
}

func scanPartitions(t *testing.T, p *config.Pipeline, input string) int {
	t.Helper()
	n, err := ScanPartitions(p, nil, strings.NewReader(input))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// replayString replays input with one engine, and checks that a replay
// with three workers prints the same lines (sorted) and summary.
func replayString(t *testing.T, p *config.Pipeline, input string, partitions int) (Summary, string, string) {
	t.Helper()
	run := func(workers int) (Summary, string, string) {
		var out, errs bytes.Buffer
		sum, err := Run(Options{Pipeline: p, Input: strings.NewReader(input), Partitions: partitions, FS: vfs.NewMem(), Out: &out, Errs: &errs, Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		return sum, out.String(), errs.String()
	}
	sum, out, errs := run(1)
	wsum, wout, werrs := run(3)
	same := func(a, b string) bool { return slices.Equal(sortedLines([]byte(a)), sortedLines([]byte(b))) }
	if wsum != sum || !same(wout, out) || !same(werrs, errs) {
		t.Fatalf("with workers: summary %+v, one engine %+v\n--- panes ---\n%s\n--- one engine's ---\n%s\n--- errors ---\n%s\n--- one engine's ---\n%s",
			wsum, sum, wout, out, werrs, errs)
	}
	return sum, out, errs
}

// A line that is not a valid record does not add a partition
// (docs/SEMANTICS.md, Replay): an empty partition would hold the frontier
// and turn the late record below into an on-time one.
func TestScanPartitionsValidRecordsOnly(t *testing.T) {
	p := hostilePipeline(t, "")
	good := `{"partition":0,"value":{"user":"u","ts":20000}}` + "\n" + `{"partition":0,"value":{"user":"u","ts":5000}}` + "\n"
	if n := scanPartitions(t, p, good); n != 1 {
		t.Fatalf("partitions of the good input: %d, want 1", n)
	}
	_, wantOut, _ := replayString(t, p, good, 1)
	for _, bad := range []string{
		`{"partition":1,"junk`,
		`{"partition":7,"value":"not an object"}`,
		`{"note":"the partition is \"partition\": 7","partition":3,"value":{"user":"u"}}`,
		`{"partition":5}`,
		`{"partition":4,"clock":"x"}`,
		`{"partition":2147483646,"value":{"user":"u","ts":"nope"}}`,
	} {
		for _, at := range []int{0, 1, 2} {
			lines := strings.SplitAfter(good, "\n")
			input := strings.Join(lines[:at], "") + bad + "\n" + strings.Join(lines[at:], "")
			n := scanPartitions(t, p, input)
			if n != 1 {
				t.Errorf("%s at line %d: %d partitions, want 1", bad, at+1, n)
			}
			sum, out, _ := replayString(t, p, input, n)
			if out != wantOut || sum.DeadLetters != 1 {
				t.Errorf("%s at line %d: dead letters %d, panes\n%s\nwant\n%s", bad, at+1, sum.DeadLetters, out, wantOut)
			}
		}
	}
	// A valid record of a filtered or otherwise accepted kind does count.
	if n := scanPartitions(t, p, good+`{"partition":3,"value":{"user":"v","ts":1}}`+"\n"); n != 4 {
		t.Fatalf("a valid record in partition 3: %d partitions, want 4", n)
	}
}

// The partition count is bounded (docs/OPERATIONS.md, Limits): a line
// naming a partition near 2^31 is a dead letter and adds no partition, and
// a replay of more than MaxPartitions is refused before any state is made.
func TestPartitionLimit(t *testing.T) {
	p := hostilePipeline(t, "")
	input := `{"partition":0,"value":{"user":"u","ts":1000}}` + "\n" +
		`{"partition":2147483646,"value":{"user":"u","ts":2000}}` + "\n" +
		`{"partition":10000,"value":{"user":"u","ts":2000}}` + "\n" +
		`{"partition":9999,"value":{"user":"u","ts":3000}}` + "\n"
	n := scanPartitions(t, p, input)
	if n != MaxPartitions {
		t.Fatalf("partitions %d, want %d (the largest valid partition is 9999)", n, MaxPartitions)
	}
	sum, _, errs := replayString(t, p, input, n)
	if sum.Records != 2 || sum.DeadLetters != 2 || !strings.Contains(errs, `"error":"partition must be an integer in [0, 10000)"`) {
		t.Fatalf("summary %+v, errors\n%s", sum, errs)
	}
	for _, bad := range []int{0, -1, MaxPartitions + 1, 1 << 31} {
		_, err := Run(Options{Pipeline: p, Input: strings.NewReader(input), Partitions: bad, FS: vfs.NewMem(), Out: &bytes.Buffer{}, Errs: &bytes.Buffer{}})
		if err == nil || !strings.Contains(err.Error(), "between 1 and 10000") {
			t.Fatalf("partitions %d: error %v", bad, err)
		}
	}
}

// Every record dropped as late is reported on the error stream, without a
// late_topic too, with its position, the window it missed and the frontier
// (docs/SEMANTICS.md, Replay): one absurd timestamp turns the records after
// it late, and each of them shows.
func TestLateDropsReported(t *testing.T) {
	p := hostilePipeline(t, "")
	if p.LateTopic != "" {
		t.Fatal("the pipeline has a late_topic")
	}
	input := `{"partition":0,"value":{"user":"u","ts":1000}}` + "\n" +
		`{"partition":0,"value":{"user":"u","ts":9223372036854000000}}` + "\n"
	for i := 0; i < 95; i++ {
		input += `{"partition":0,"value":{"user":"u","ts":2000}}` + "\n"
	}
	sum, _, errs := replayString(t, p, input, 1)
	if sum.LateDropped != 95 {
		t.Fatalf("late dropped %d, want 95", sum.LateDropped)
	}
	lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
	if len(lines) != 95 {
		t.Fatalf("%d error lines, want one per late record:\n%s", len(lines), errs)
	}
	want := `{"late_dropped":{"reason":"every window of the record has expired","line":3,"partition":0,"offset":2,"key":"u","timestamp":2000,"window":{"start":0,"end":10000},"frontier":9223372036854000000}}`
	if lines[0] != want {
		t.Fatalf("first report\n%s\nwant\n%s", lines[0], want)
	}
}

// timestamp.max_future dead-letters a record whose event time is further
// ahead of the clock lines than the bound (docs/SEMANTICS.md, Bad input):
// the absurd record neither moves the frontier nor makes the rest late.
func TestMaxFuture(t *testing.T) {
	p := hostilePipeline(t, ", max_future: 1h")
	input := `{"clock":100000000}` + "\n" +
		`{"partition":0,"value":{"user":"u","ts":100000000}}` + "\n" +
		`{"partition":0,"value":{"user":"u","ts":9223372036854000000}}` + "\n" +
		`{"partition":0,"value":{"user":"u","ts":100001000}}` + "\n" +
		`{"partition":0,"value":{"user":"u","ts":103600000}}` + "\n" + // exactly max_future ahead: accepted
		`{"partition":0,"value":{"user":"u","ts":103600001}}` + "\n"
	sum, out, errs := replayString(t, p, input, 1)
	if sum.Records != 3 || sum.DeadLetters != 2 || sum.LateDropped != 0 {
		t.Fatalf("summary %+v\n%s", sum, errs)
	}
	want := `{"dead_letter":{"error":"event time 9223372036854000000 is 9223372036754000000ms ahead of processing time 100000000, more than timestamp.max_future 1h0m0s","line":3,"partition":0,"offset":1,`
	if !strings.HasPrefix(errs, want) {
		t.Fatalf("errors\n%s\nwant prefix\n%s", errs, want)
	}
	if !strings.Contains(out, `"window":{"start":100000000,"end":100010000}`) || !strings.Contains(out, `"aggregates":{"n":2}`) {
		t.Fatalf("panes\n%s", out)
	}
	// Off by default: the same input loses the records after the absurd one.
	sum, _, _ = replayString(t, hostilePipeline(t, ""), input, 1)
	if sum.LateDropped != 3 || sum.DeadLetters != 0 {
		t.Fatalf("without max_future: %+v", sum)
	}
}

// A record whose windows cannot be represented is a dead letter and moves
// no watermark (docs/SEMANTICS.md, Bad input): the records after it are
// not late.
func TestOutOfRangeMovesNoWatermark(t *testing.T) {
	p := hostilePipeline(t, "")
	input := `{"partition":0,"value":{"user":"u","ts":1000}}` + "\n" +
		`{"partition":0,"value":{"user":"u","ts":9223372036854775000}}` + "\n" +
		`{"partition":0,"value":{"user":"u","ts":2000}}` + "\n"
	sum, out, errs := replayString(t, p, input, 1)
	if sum.LateDropped != 0 || sum.OutOfRange != 1 || !strings.Contains(out, `"aggregates":{"n":2}`) {
		t.Fatalf("summary %+v\n%s%s", sum, out, errs)
	}
}

func TestOutOfRangeMovesNoWatermarkRepartitioned(t *testing.T) {
	cfg, err := config.Parse("c.yaml", []byte(goldenConfig("timestamp: {field: ts}\nkey: {field: user}\nrepartition: true\nwindow: {type: tumbling, size: 10s}\naggregates: [{name: n, op: count}]\n")))
	if err != nil {
		t.Fatal(err)
	}
	input := `{"partition":0,"value":{"user":"u","ts":1000}}` + "\n" +
		`{"partition":0,"value":{"user":"u","ts":9223372036854775000}}` + "\n" +
		`{"partition":0,"value":{"user":"u","ts":2000}}` + "\n"
	sum, out, errs := replayString(t, &cfg.Pipelines[0], input, 1)
	if sum.LateDropped != 0 || sum.OutOfRange != 1 || !strings.Contains(out, `"aggregates":{"n":2}`) {
		t.Fatalf("summary %+v\n%s%s", sum, out, errs)
	}
}

// Keys are byte-exact in output (docs/SEMANTICS.md, Records and keys): keys
// that differ only in an invalid UTF-8 byte print differently, and a key
// with a lone surrogate escape (which JSON readers turn into U+FFFD, merging
// it with others) is a dead letter.
func TestKeysByteExact(t *testing.T) {
	for _, keyed := range []string{"record key", "key field"} {
		p := hostilePipeline(t, "")
		line := func(key string) string {
			return `{"value":{"user":"` + key + `","ts":1000}}` + "\n"
		}
		if keyed == "record key" {
			cfg, err := config.Parse("c.yaml", []byte(goldenConfig("timestamp: {field: ts}\nwindow: {type: tumbling, size: 10s}\naggregates: [{name: n, op: count}]\n")))
			if err != nil {
				t.Fatal(err)
			}
			p = &cfg.Pipelines[0]
			line = func(key string) string {
				return `{"key":"` + key + `","value":{"ts":1000}}` + "\n"
			}
		}
		input := line("a\xfe") + line("a\xff") + line("a\ufffd") + line(`\ud800`) + line(`\udfff`) + line(`x\ud83d`) +
			line(`\ud83d\ude00`) + line(`\\ud800`)
		sum, out, errs := replayString(t, p, input, 1)
		for _, want := range []string{`"key":"a\udcfe"`, `"key":"a\udcff"`, "\"key\":\"a\ufffd\"", "\"key\":\"\U0001F600\"", `"key":"\\ud800"`} {
			if strings.Count(out, want) != 1 {
				t.Errorf("%s: output lacks one pane with %s:\n%s", keyed, want, out)
			}
		}
		if sum.DeadLetters != 3 || strings.Count(errs, `has a lone surrogate escape \\u`) != 3 {
			t.Errorf("%s: dead letters %d:\n%s", keyed, sum.DeadLetters, errs)
		}
	}
}

// The line limit is exact: a line of MaxLineBytes (without its line end)
// is read, one byte more is a dead letter that is counted as a line and
// says where the line starts and how long it is, echoing only its start
// (docs/OPERATIONS.md, Limits).
func TestLineLimitExact(t *testing.T) {
	p := hostilePipeline(t, "")
	first := `{"partition":0,"value":{"user":"u","ts":1000}}` + "\n"
	pad := func(n int) string { // a record line of exactly n bytes
		head, tail := `{"partition":0,"value":{"user":"u","ts":2000,"pad":"`, `"}}`
		return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
	}
	for _, end := range []string{"\n", "\r\n", ""} {
		input := first + pad(MaxLineBytes) + end
		sum, _, errs := replayString(t, p, input, 1)
		if sum.Lines != 2 || sum.Records != 2 || sum.DeadLetters != 0 {
			t.Fatalf("a line of exactly %d bytes (end %q): %+v\n%.300s", MaxLineBytes, end, sum, errs)
		}
		input, clocks := first+pad(MaxLineBytes+1)+end, int64(0)
		if end != "" {
			input, clocks = input+`{"clock":5}`+"\n", 1
		}
		sum, _, errs = replayString(t, p, input, 1)
		if sum.Lines != 2+clocks || sum.Records != 1 || sum.Clocks != clocks || sum.DeadLetters != 1 {
			t.Fatalf("a line of %d bytes (end %q): %+v\n%.300s", MaxLineBytes+1, end, sum, errs)
		}
		want := `{"dead_letter":{"error":"line longer than 16 MiB","line":2,"byte":47,"input":"{\"partition\":0,`
		if !strings.HasPrefix(errs, want) || !strings.HasSuffix(errs, `xxx","input_bytes":16777217}}`+"\n") || len(errs) > 2*MaxEchoBytes {
			t.Fatalf("dead letter (end %q): %.200s … %s", end, errs, errs[max(0, len(errs)-80):])
		}
	}
	// Bad lines echo at most MaxEchoBytes, with their length.
	sum, _, errs := replayString(t, p, strings.Repeat("\xff", 4<<20)+"\n", 1)
	if sum.DeadLetters != 1 || len(errs) > 8*MaxEchoBytes || !strings.Contains(errs, `"input_bytes":4194304}}`) {
		t.Fatalf("a 4 MiB binary line: %+v, a %d-byte dead letter", sum, len(errs))
	}
}

// zeros is an input that never ends and has no newline (/dev/zero).
type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	clear(p)
	z.n += int64(len(p))
	return len(p), nil
}

// A line that never ends stops the replay with an error shortly after the
// line limit (docs/OPERATIONS.md, Limits) instead of reading forever.
func TestLineWithoutEnd(t *testing.T) {
	p := hostilePipeline(t, "")
	for _, workers := range []int{1, 2} {
		done := make(chan error, 1)
		z := &zeros{}
		go func() {
			_, err := Run(Options{Pipeline: p, Input: z, Partitions: 1, FS: vfs.NewMem(), Out: &bytes.Buffer{}, Errs: &bytes.Buffer{}, Workers: workers})
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "line 1 (from byte 0) has no end within 64 MiB past the 16 MiB line limit") {
				t.Fatalf("%d workers: error %v", workers, err)
			}
			if z.n > MaxLineBytes+MaxSkipBytes+1<<20 {
				t.Fatalf("%d workers: read %d bytes", workers, z.n)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%d workers: replay of an endless line did not stop", workers)
		}
	}
	if _, err := ScanPartitions(p, nil, &zeros{}); err == nil {
		t.Fatal("ScanPartitions of an endless line: no error")
	}
}

// TestJoinOutOfRange: a join's record whose interval cannot be represented
// in int64 milliseconds is a dead letter and moves no watermark, like an
// aggregating pipeline's; lines naming no input, or values that are no
// object, are dead letters; the rest joins as usual.
func TestJoinOutOfRange(t *testing.T) {
	cfg, err := config.Parse("c.yaml", []byte(goldenConfig(`inputs: [{topic: orders}, {topic: payments, as: paid}]
key: {field: id}
timestamp: {field: ts}
watermark: {max_delay: 0s}
join: {type: interval, left: orders, right: paid, between: [0s, 10s], kind: left}
`)))
	if err != nil {
		t.Fatal(err)
	}
	p := &cfg.Pipelines[0]
	input := `{"topic":"orders","value":{"id":"o1","ts":1000}}
{"topic":"payments","value":{"id":"o9","ts":9223372036854775807}}
{"topic":"orders","value":{"id":"o9","ts":9223372036854775000}}
{"topic":"refunds","value":{"id":"o1","ts":1500}}
{"topic":"payments","value":[1,2]}
{"topic":"orders","value":{"id":"o2","ts":2000}}
{"topic":"payments","value":{"id":"o2","ts":3000}}
`
	sum, out, errs := replayString(t, p, input, 1)
	if sum.DeadLetters != 4 || sum.OutOfRange != 2 || sum.LateDropped != 0 || sum.Records != 5 {
		t.Errorf("summary %+v", sum)
	}
	// o2 matched when its payment came; o1 unmatched once the payments
	// passed its last chance, which the out-of-range payment did not
	// bring forward: only the end of input does.
	var rows []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		rows = append(rows, l[:strings.Index(l, ",")])
	}
	if want := []string{`{"key":"o2"`, `{"key":"o1"`}; !slices.Equal(rows, want) {
		t.Errorf("rows %v, want %v\n%s\n%s", rows, want, out, errs)
	}
	for _, reason := range []string{"event time out of range", `topic must be one of \"orders\", \"payments\"`, "value is not a JSON object"} {
		if !strings.Contains(errs, reason) {
			t.Errorf("no dead letter %q:\n%s", reason, errs)
		}
	}
}
