package replay

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/windowing"
)

const stateDirConfig = `kafka: {brokers: embedded}
pipelines:
  - name: p
    input: {topic: in}
    timestamp: {field: ts}
    watermark: {max_delay: 1s}
    window: {type: tumbling, size: 10s}
    aggregates: [{name: n, op: count}, {name: s, op: sum, field: x}]
    output: {topic: out}
`

// A replay into a --state-dir that holds what an earlier replay left (here
// the last checkpoint of one killed midway: open windows and a frontier an
// hour past this input) prints what a replay into an empty directory does,
// and leaves nothing behind in the directory.
func TestReplayStateDirStartsEmpty(t *testing.T) {
	cfg, err := config.Parse("s.yaml", []byte(stateDirConfig))
	if err != nil {
		t.Fatal(err)
	}
	p := &cfg.Pipelines[0]
	dir := t.TempDir()

	db, err := state.Open(dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sink := &paneSink{enc: windowing.NewPaneJSON(p.Spec.Aggregates)}
	eng, err := windowing.New(p.Spec, p.Watermark, db, sink, windowing.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng.Assign(0, 0, true)
	for i := range 100 {
		ev := windowing.Event{Partition: 0, Offset: int64(i), Key: fmt.Sprintf("old%d", i%7), Time: 1_700_003_600_000 + int64(i)*100, Inputs: make([]windowing.Input, 2)}
		if err := eng.Record(&ev, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Checkpoint(true); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	var input strings.Builder
	for i := range 50 {
		fmt.Fprintf(&input, `{"partition":0,"key":"u%d","value":{"ts":%d,"x":%d}}`+"\n", i%3, 1_700_000_000_000+int64(i)*700, i)
	}
	run := func(stateDir string) (string, Summary) {
		var out, errs bytes.Buffer
		sum, err := Run(Options{Pipeline: p, Input: strings.NewReader(input.String()), Partitions: 1, StateDir: stateDir, Out: &out, Errs: &errs})
		if err != nil {
			t.Fatal(err)
		}
		return out.String(), sum
	}
	want, wantSum := run("")
	if wantSum.Panes < 6 || wantSum.LateDropped != 0 {
		t.Fatalf("empty state: %+v", wantSum)
	}
	before, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, gotSum := run(dir)
	if got != want || gotSum != wantSum {
		t.Fatalf("state dir with an earlier replay's state: %+v, want %+v\n%s", gotSum, wantSum, firstDiff(want, got))
	}
	after, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("the replay left %d entries in its state dir, there were %d", len(after), len(before))
	}
}

// A UTF-8 byte order mark at the start of the input is skipped: the first
// line is a record, not a dead letter.
func TestInputByteOrderMark(t *testing.T) {
	cfg, err := config.Parse("c.yaml", []byte(goldenConfig("timestamp: {field: ts}\nkey: {field: user}\nwindow: {type: tumbling, size: 10s}\naggregates: [{name: n, op: count}]\n")))
	if err != nil {
		t.Fatal(err)
	}
	input := "\xef\xbb\xbf" + `{"value":{"user":"u1","ts":1000}}` + "\n" + `{"value":{"user":"u1","ts":2000}}` + "\n"
	n, err := ScanPartitions(&cfg.Pipelines[0], nil, strings.NewReader(input))
	if err != nil || n != 1 {
		t.Fatalf("partitions %d, %v", n, err)
	}
	var out, errs bytes.Buffer
	sum, err := Run(Options{Pipeline: &cfg.Pipelines[0], Input: strings.NewReader(input), Partitions: n, FS: vfs.NewMem(), Out: &out, Errs: &errs})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != 2 || sum.DeadLetters != 0 || errs.Len() != 0 {
		t.Fatalf("records %d, dead letters %d: %s", sum.Records, sum.DeadLetters, errs.String())
	}
}
