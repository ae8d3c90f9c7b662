package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/windowd/windowd/config"
)

// repartitionConfig has one pipeline per window kind, all grouped by the
// value's user while the input is spread over partitions by order id, with
// idleness, a sparse watermark, early, late and processing-time triggers.
const repartitionConfig = `kafka: {brokers: embedded}
pipelines:
  - name: tumble
    input: {topic: in}
    key: {field: user}
    timestamp: {field: ts}
    watermark: {max_delay: 2s, idle_timeout: 5s}
    window: {type: tumbling, size: 10s}
    allowed_lateness: 4s
    trigger: {early: {count: 3}, late: {every: 0s}}
    aggregates: [{name: n, op: count}, {name: s, op: sum, field: x}]
    output: {topic: out}
    late_topic: late
  - name: hop
    input: {topic: in}
    key: {field: user}
    timestamp: {field: ts}
    watermark: {max_delay: 1s, every: 3, idle_timeout: 3s}
    window: {type: hopping, size: 10s, hop: 2s}
    trigger: {early: {every: 1s}}
    accumulation: retracting
    aggregates: [{name: n, op: count}, {name: hi, op: max, field: x}]
    output: {topic: out}
  - name: sess
    input: {topic: in}
    key: {field: user}
    timestamp: {field: ts}
    watermark: {strategy: monotonic, idle_timeout: 4s}
    window: {type: session, gap: 1s}
    allowed_lateness: 2s
    trigger: {late: {every: 1s}, closing: if_changed}
    accumulation: discarding
    aggregates: [{name: n, op: count}, {name: s, op: sum, field: x}]
    output: {topic: out}
`

// repartitionInput is a random stream over parts partitions: records keyed
// by order id with a user field, out of order, some late, with clock lines
// and a partition that falls silent (idle) for a while.
func repartitionInput(seed int64, parts int) string {
	rng := rand.New(rand.NewSource(seed))
	var b strings.Builder
	clock, ts := int64(0), int64(1_000_000)
	for i := 0; i < 600; i++ {
		if rng.Intn(8) == 0 {
			clock += int64(rng.Intn(3000))
			fmt.Fprintf(&b, "{\"clock\":%d}\n", clock)
		}
		ts += int64(rng.Intn(400))
		t := ts - int64(rng.Intn(3000))
		if rng.Intn(25) == 0 {
			t -= 15000 // late
		}
		p := rng.Intn(parts)
		if i > 200 && i < 350 && p == parts-1 {
			p = 0 // the last partition is silent for a while: idle
		}
		fmt.Fprintf(&b, "{\"partition\":%d,\"key\":\"o%d\",\"value\":{\"user\":\"u%d\",\"ts\":%d,\"x\":%d}}\n",
			p, i, rng.Intn(7), t, rng.Intn(100))
	}
	return b.String()
}

// TestRepartitionSamePanes: docs/SEMANTICS.md, Repartitioning — replay with
// repartition: true gives the same panes as without it (final panes, and here
// every pane, since markers reach every repartition partition at once), for 1
// to 6 repartition partitions over 4 input partitions.
func TestRepartitionSamePanes(t *testing.T) {
	cfg, err := config.Parse("r.yaml", []byte(repartitionConfig))
	if err != nil {
		t.Fatal(err)
	}
	run := func(p *config.Pipeline, input string) (string, string) {
		var out, errs bytes.Buffer
		if _, err := Run(Options{Pipeline: p, Input: strings.NewReader(input), Partitions: 4, FS: vfs.NewMem(), Out: &out, Errs: &errs}); err != nil {
			t.Fatal(err)
		}
		return out.String(), errs.String()
	}
	for i := range cfg.Pipelines {
		base := cfg.Pipelines[i]
		for seed := int64(1); seed <= 4; seed++ {
			input := repartitionInput(seed, 4)
			wantOut, wantErrs := run(&base, input)
			if strings.Count(wantOut, `"final":true`) < 20 {
				t.Fatalf("%s seed %d: only %d final panes: the input is too thin", base.Name, seed, strings.Count(wantOut, `"final":true`))
			}
			for _, parts := range []int32{1, 4, 6} {
				rp := base
				rp.Repartition = &config.Repartition{Partitions: parts, WatermarkInterval: config.DefaultWatermarkInterval}
				gotOut, gotErrs := run(&rp, input)
				if gotOut != wantOut {
					t.Errorf("%s seed %d, %d repartition partitions: panes differ\n%s", base.Name, seed, parts, firstDiff(wantOut, gotOut))
				}
				if gotErrs != wantErrs {
					t.Errorf("%s seed %d, %d repartition partitions: late reports differ\n%s", base.Name, seed, parts, firstDiff(wantErrs, gotErrs))
				}
			}
		}
	}
}

// firstDiff shows the first line where two outputs part.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return fmt.Sprintf("line %d\nwant: %s\ngot:  %s", i+1, a, b)
		}
	}
	return "(equal)"
}

// TestRepartitionQuietSamePanes: with quiet_advance, a repartitioned replay
// gives the same panes as one without repartitioning, quiet flags included:
// stage 1's idle markers carry the quiet advance's frontier and the input
// partition's own watermark, so stage 2 tells a quiet step.
func TestRepartitionQuietSamePanes(t *testing.T) {
	cfg, err := config.Parse("q.yaml", []byte(`kafka: {brokers: embedded}
pipelines:
  - name: quiet
    input: {topic: in}
    key: {field: user}
    timestamp: {field: ts}
    watermark: {max_delay: 2s, idle_timeout: 3s, quiet_advance: true}
    window: {type: tumbling, size: 10s}
    allowed_lateness: 1s
    aggregates: [{name: n, op: count}, {name: s, op: sum, field: x}]
    output: {topic: out}
    late_topic: late
`))
	if err != nil {
		t.Fatal(err)
	}
	base := cfg.Pipelines[0]
	for seed := int64(1); seed <= 4; seed++ {
		// Every 100 lines the input falls silent: clock lines 4 s and 9 s
		// on, so every partition is idle and the quiet advance runs.
		var in strings.Builder
		clock := int64(0)
		for i, line := range strings.Split(strings.TrimSpace(repartitionInput(seed, 4)), "\n") {
			var c struct{ Clock *int64 }
			if err := json.Unmarshal([]byte(line), &c); err == nil && c.Clock != nil {
				clock = *c.Clock
			}
			in.WriteString(line + "\n")
			if i%100 == 99 {
				clock += 4000
				fmt.Fprintf(&in, "{\"clock\":%d}\n", clock)
				clock += 5000
				fmt.Fprintf(&in, "{\"clock\":%d}\n", clock)
			}
		}
		run := func(p *config.Pipeline) string {
			var out, errs bytes.Buffer
			if _, err := Run(Options{Pipeline: p, Input: strings.NewReader(in.String()), Partitions: 4, FS: vfs.NewMem(), Out: &out, Errs: &errs}); err != nil {
				t.Fatal(err)
			}
			return out.String() + errs.String()
		}
		want := run(&base)
		if n := strings.Count(want, `"quiet":true`); n < 5 {
			t.Fatalf("seed %d: %d quiet panes: the input is never quiet", seed, n)
		}
		for _, parts := range []int32{1, 3} {
			rp := base
			rp.Repartition = &config.Repartition{Partitions: parts, WatermarkInterval: config.DefaultWatermarkInterval}
			if got := run(&rp); got != want {
				t.Errorf("seed %d, %d repartition partitions: panes differ\n%s", seed, parts, firstDiff(want, got))
			}
		}
	}
}

// TestRepartitionJoinSameRows: a join replayed with repartition: true (as
// windowd run reads a join) gives the rows and late reports of the join
// replayed without it, for interval and window joins of every kind, with
// out-of-order and late records on 4 partitions of each input. Before, a
// join with repartition: true panicked in replay.
func TestRepartitionJoinSameRows(t *testing.T) {
	joins := []string{
		"{type: interval, left: orders, right: paid, between: [0s, 5s], kind: left}",
		"{type: interval, left: orders, right: paid, between: [-2s, 3s], kind: full}",
		"{type: window, left: orders, right: paid, kind: inner}\n    window: {type: hopping, size: 10s, hop: 5s}",
	}
	for i, join := range joins {
		cfg, err := config.Parse("j.yaml", []byte(`pipelines:
  - name: j
    inputs: [{topic: orders}, {topic: payments, as: paid}]
    key: {field: user}
    timestamp: {field: ts}
    watermark: {strategy: bounded_out_of_orderness, max_delay: 1s, idle_timeout: 5s}
    allowed_lateness: 1s
    join: `+join+`
    output: {topic: out}
`))
		if err != nil {
			t.Fatal(err)
		}
		base := cfg.Pipelines[0]
		for seed := int64(1); seed <= 3; seed++ {
			rng := rand.New(rand.NewSource(seed))
			var b strings.Builder
			ts := int64(1_000_000)
			for n := range 600 {
				ts += int64(rng.Intn(200))
				topic := [2]string{"orders", "payments"}[rng.Intn(2)]
				t := ts - int64(rng.Intn(1500))
				if rng.Intn(30) == 0 {
					t -= 8000 // late
				}
				fmt.Fprintf(&b, "{\"topic\":%q,\"partition\":%d,\"key\":\"r%d\",\"value\":{\"user\":\"u%d\",\"ts\":%d,\"n\":%d}}\n",
					topic, rng.Intn(4), n, rng.Intn(9), t, n)
			}
			run := func(p *config.Pipeline) (string, string) {
				var out, errs bytes.Buffer
				if _, err := Run(Options{Pipeline: p, Input: strings.NewReader(b.String()), Partitions: 4, FS: vfs.NewMem(), Out: &out, Errs: &errs}); err != nil {
					t.Fatal(err)
				}
				return out.String(), errs.String()
			}
			wantOut, wantErrs := run(&base)
			if strings.Count(wantOut, `"matched":true`) < 50 {
				t.Fatalf("join %d seed %d: only %d matches: the input is too thin", i, seed, strings.Count(wantOut, `"matched":true`))
			}
			for _, parts := range []int32{1, 4} {
				rp := base
				rp.Repartition = &config.Repartition{Partitions: parts, WatermarkInterval: config.DefaultWatermarkInterval}
				gotOut, gotErrs := run(&rp)
				if gotOut != wantOut {
					t.Errorf("join %d seed %d, %d repartition partitions: rows differ\n%s", i, seed, parts, firstDiff(wantOut, gotOut))
				}
				if gotErrs != wantErrs {
					t.Errorf("join %d seed %d, %d repartition partitions: late reports differ\n%s", i, seed, parts, firstDiff(wantErrs, gotErrs))
				}
			}
		}
	}
}
