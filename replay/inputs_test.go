package replay

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/windowd/windowd/config"
)

// TestInputsEqualBatch: a pipeline with two inputs, over random streams
// (two topics of three partitions, records up to max_delay out of order,
// so none is late), emits for every key and window exactly one final pane,
// whose per-input aggregates are a batch computation's over that input's
// records alone: count, sum and min of each input, count of both; an input
// without a record in the window shows count 0, sum 0, min null. Tumbling
// and hopping windows, one engine and three workers.
func TestInputsEqualBatch(t *testing.T) {
	windows := map[string]struct{ size, hop int64 }{
		"tumbling": {10_000, 10_000},
		"hopping":  {10_000, 4_000},
	}
	for name, w := range windows {
		for seed := uint64(1); seed <= 6; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", name, seed), func(t *testing.T) {
				window := "{type: tumbling, size: 10s}"
				if w.hop != w.size {
					window = "{type: hopping, size: 10s, hop: 4s}"
				}
				cfg, err := config.Parse("inputs.yaml", []byte(goldenConfig(`inputs:
  - {topic: a}
  - {topic: b, as: bee}
key: {field: k}
timestamp: {field: ts}
watermark: {max_delay: 3s}
window: `+window+`
aggregates:
  - {name: n_a, op: count, input: a}
  - {name: n_b, op: count, input: bee}
  - {name: n, op: count}
  - {name: sum_a, op: sum, field: x, input: a}
  - {name: sum_b, op: sum, field: x, input: bee}
  - {name: min_b, op: min, field: x, input: bee}
`)))
				if err != nil {
					t.Fatal(err)
				}
				p := &cfg.Pipelines[0]
				rng := rand.New(rand.NewPCG(seed, 7))
				type agg struct {
					n    [2]int64
					sum  [2]int64
					minB int64
				}
				want := map[string]*agg{} // key [start,end)
				var in strings.Builder
				base := [2]int64{}
				for range 600 {
					topic := rng.IntN(2)
					// The topics advance at different speeds: one lags the other.
					base[topic] += rng.Int64N(200 * int64(topic+1))
					ts := max(0, base[topic]-rng.Int64N(3000))
					k := fmt.Sprintf("k%d", rng.IntN(5))
					x := rng.Int64N(100) - 50
					fmt.Fprintf(&in, `{"topic":%q,"partition":%d,"value":{"k":%q,"ts":%d,"x":%d}}`+"\n", []string{"a", "b"}[topic], rng.IntN(3), k, ts, x)
					for start := ts - ts%w.hop; start > ts-w.size; start -= w.hop {
						id := fmt.Sprintf("%s [%d,%d)", k, start, start+w.size)
						a := want[id]
						if a == nil {
							a = &agg{minB: 1 << 62}
							want[id] = a
						}
						a.n[topic]++
						a.sum[topic] += x
						if topic == 1 {
							a.minB = min(a.minB, x)
						}
					}
				}
				for _, workers := range []int{1, 3} {
					r := replayWith(t, Options{Pipeline: p, Input: strings.NewReader(in.String()), Partitions: 3, Workers: workers})
					if len(r.errs) > 0 {
						t.Fatalf("%d workers: errors: %v", workers, r.errs)
					}
					got := 0
					for key, panes := range r.byKey {
						for _, line := range panes {
							v := gjson.Parse(line)
							if !v.Get("pane.final").Bool() {
								t.Fatalf("%d workers: a pane that is not final: %s", workers, line)
							}
							id := fmt.Sprintf("%s [%d,%d)", key, v.Get("window.start").Int(), v.Get("window.end").Int())
							a := want[id]
							if a == nil {
								t.Fatalf("%d workers: a pane of a window without records: %s", workers, line)
							}
							minB := "null"
							if a.n[1] > 0 {
								minB = fmt.Sprint(a.minB)
							}
							wantAggs := fmt.Sprintf(`{"n_a":%d,"n_b":%d,"n":%d,"sum_a":%d,"sum_b":%d,"min_b":%s}`, a.n[0], a.n[1], a.n[0]+a.n[1], a.sum[0], a.sum[1], minB)
							if g := v.Get("aggregates").Raw; g != wantAggs {
								t.Errorf("%d workers: %s: aggregates %s, want %s", workers, id, g, wantAggs)
							}
							got++
						}
					}
					if got != len(want) {
						t.Errorf("%d workers: %d panes, want one per window with records: %d", workers, got, len(want))
					}
				}
			})
		}
	}
}
