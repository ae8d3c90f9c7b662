package replay

import (
	"bytes"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tidwall/gjson"

	"github.com/windowd/windowd/config"
)

// slidingExpected computes, by brute force over the records, every sliding
// window (one per distinct record time t of a key: the records of the key
// in (t − size, t], written [t − size + 1, t + 1)) and its aggregates.
func slidingExpected(recs []cumRecord, size int64) map[cumWindow]cumTotals {
	want := map[cumWindow]cumTotals{}
	for _, r := range recs {
		want[cumWindow{r.key, r.t - size + 1, r.t + 1}] = cumTotals{}
	}
	fillTotals(want, recs)
	return want
}

// checkWindows compares the final aggregates of every window with want.
func checkWindows(t *testing.T, what string, got, want map[cumWindow]cumTotals, discarding bool) {
	t.Helper()
	var keys []cumWindow
	for w := range want {
		keys = append(keys, w)
	}
	for w := range got {
		if _, ok := want[w]; !ok {
			keys = append(keys, w)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		return a.key < b.key || a.key == b.key && (a.start < b.start || a.start == b.start && a.end < b.end)
	})
	bad := 0
	for _, w := range keys {
		g, gok := got[w]
		x, wok := want[w]
		if discarding {
			x.min, x.max = 0, 0
		}
		if gok != wok || g != x {
			if bad++; bad <= 10 {
				t.Errorf("%s: window %v: got %+v (emitted %v), want %+v (exists %v)", what, w, g, gok, x, wok)
			}
		}
	}
	if bad > 10 {
		t.Errorf("%s: %d windows wrong in all", what, bad)
	}
}

// Sliding windows over random streams: keys with bursts and gaps longer
// than size, ties, records out of order and late (within
// allowed_lateness, so none is dropped: late ones correct the windows
// already fired, and a late record after all of its key's windows expired
// still sees the key's earlier records), every accumulation mode, with and
// without an early count trigger and late firing, aggregates with and
// without the index (quantiles makes every window merge its slices one by
// one), every other seed with every key evicted from the cache at each
// step: every window has exactly one final pane, whose aggregates equal a
// brute-force computation over the records.
func TestSlidingBruteForce(t *testing.T) {
	triggers := []string{"", "    trigger: {early: {count: 2}}\n", "    trigger: {late: {every: 0s}}\n", "    trigger: {early: {count: 3}, late: {every: 0s}}\n"}
	modes := []string{"accumulating", "discarding", "retracting"}
	seeds := 400
	if testing.Short() {
		seeds = 60
	}
	for seed := range seeds {
		rng := rand.New(rand.NewSource(int64(seed)))
		size := []int64{1000, 3000, 10000}[rng.Intn(3)]
		trigger, mode := triggers[rng.Intn(len(triggers))], modes[rng.Intn(len(modes))]
		aggregates := ""
		if rng.Intn(4) == 0 {
			aggregates = ", {name: q, op: quantiles, field: x, quantiles: [0.5]}"
		}
		n := 30 + rng.Intn(120)
		var recs []cumRecord
		var in strings.Builder
		now := int64(0)
		for range n {
			now += rng.Int63n(size/2 + 1)
			if rng.Intn(8) == 0 {
				now += size * int64(1+rng.Intn(3)) // a gap longer than size
			}
			// Skewed keys: k2 is often silent long enough for all of
			// its windows to expire before a late record of it comes.
			key := []string{"k0", "k0", "k0", "k1", "k1", "k2"}[rng.Intn(6)]
			r := cumRecord{key: key, t: now, x: rng.Int63n(100) - 20}
			switch rng.Intn(10) {
			case 0: // late, by up to 3 sizes (F <= now - max_delay: within allowed_lateness)
				r.t -= rng.Int63n(3*size + 1)
			case 1, 2: // out of order within max_delay
				r.t -= rng.Int63n(1000)
			case 3: // a tie with the last record
				if len(recs) > 0 {
					r.t = recs[len(recs)-1].t
				}
			}
			recs = append(recs, r)
			fmt.Fprintf(&in, "{\"partition\":0,\"value\":{\"k\":%q,\"t\":%d,\"x\":%d}}\n", r.key, r.t, r.x)
		}
		window := fmt.Sprintf("{type: sliding, size: %dms}", size)
		lateness := fmt.Sprintf("%dms", 3*size)
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			p := cumPipeline(t, window, lateness, trigger, mode, aggregates)
			// Every other seed with a cache of one byte: every key is
			// written to the store and read back at each step.
			var out, errs bytes.Buffer
			sum, err := Run(Options{Pipeline: p, Input: strings.NewReader(in.String()), Partitions: 1, FS: vfs.NewMem(),
				CacheBytes: seed % 2, Out: &out, Errs: &errs})
			if err != nil {
				t.Fatal(err)
			}
			if sum.LateDropped != 0 || sum.DeadLetters != 0 {
				t.Fatalf("%d dropped, %d dead letters: %s", sum.LateDropped, sum.DeadLetters, errs.String())
			}
			what := fmt.Sprintf("%s %s %s%s", window, strings.TrimSpace(trigger), mode, aggregates)
			checkWindows(t, what, cumGot(t, out.String(), mode == "discarding"), slidingExpected(recs, size), mode == "discarding")
		})
	}
}

// TestSlidingInputsNewWindowChanged: a sliding window of a pipeline with
// several inputs is changed when it is made, whichever input's record made
// it: with on_time off and closing: if_changed its expiry emits its one
// pane, also when the aggregates of the other input count nothing in it.
func TestSlidingInputsNewWindowChanged(t *testing.T) {
	cfg, err := config.Parse("c.yaml", []byte(goldenConfig(`inputs: [{topic: a}, {topic: b}]
timestamp: {field: ts}
key: {field: k}
watermark: {max_delay: 0s}
window: {type: sliding, size: 10s}
allowed_lateness: 5s
trigger: {on_time: false, closing: if_changed}
aggregates: [{name: n_a, op: count, input: a}, {name: n_b, op: count, input: b}]
`)))
	if err != nil {
		t.Fatal(err)
	}
	// The frontier passes the first window's end (on_time: no pane), then
	// its expiry (its closing pane, as it changed when it was made).
	input := `{"topic":"b","value":{"k":"k1","ts":1000}}
{"topic":"a","value":{"k":"k2","ts":3000}}
{"topic":"b","value":{"k":"k2","ts":3000}}
{"topic":"a","value":{"k":"k1","ts":30000}}
{"topic":"b","value":{"k":"k3","ts":30000}}
`
	_, out, _ := replayString(t, &cfg.Pipelines[0], input, 1)
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		v := gjson.Parse(l)
		got = append(got, fmt.Sprintf("%s %s %s", v.Get("window.end").Raw, v.Get("pane.timing").Str, v.Get("aggregates").Raw))
	}
	want := []string{`3001 ON_TIME {"n_a":1,"n_b":1}`, `1001 ON_TIME {"n_a":0,"n_b":1}`, `30001 ON_TIME {"n_a":1,"n_b":0}`, `30001 ON_TIME {"n_a":0,"n_b":1}`}
	if !slices.Equal(got, want) {
		t.Fatalf("panes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
