package windowing_test

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// randomCountSpec is a count window spec with random size, hop, mode and
// early triggers.
func randomCountSpec(rng *rand.Rand) windowing.Spec {
	size := int64(1 + rng.Intn(6))
	spec := windowing.Spec{
		Window:     windowing.WindowSpec{Kind: windowing.CountWindow, Size: size, Hop: int64(1 + rng.Intn(int(size)))},
		Mode:       windowing.Mode(rng.Intn(3)),
		Aggregates: append(testAggregates(), topKAggregate),
		Trigger:    windowing.TriggerSpec{OnTime: true},
	}
	if rng.Intn(2) == 0 {
		spec.Trigger.EarlyCount = int64(1 + rng.Intn(3))
	}
	if rng.Intn(3) == 0 {
		spec.Trigger.EarlyEvery = int64(10 + rng.Intn(200))
	}
	return spec
}

// TestCountWindowsRestored: a partition's count windows, and the record
// numbering of keys without an open window, move through the changelog: the
// new owner emits exactly the panes the old one goes on to emit.
func TestCountWindowsRestored(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewSource(seed))
		spec := randomCountSpec(rng)
		recs := randomStream(rng, 1, 100+rng.Intn(300), int64(rng.Intn(800)))
		wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, MaxDelay: 100, Every: 1}
		cut := len(recs) / 3 * (1 + rng.Intn(2))
		t.Run(fmt.Sprintf("seed%d-size%d-hop%d-%s", seed, spec.Window.Size, spec.Window.Hop, spec.Mode), func(t *testing.T) {
			// No end of input: count windows stay open (Finish closes
			// no count window).
			moveCold(t, spec, wm, 1+rng.Intn(3000), recs, cut, false)
		})
	}
}

// TestCountWindowsByKey: each key's records, in the order they come, fill
// its windows k·hop+1 … k·hop+size: every complete window has one final
// pane, holding exactly those records, whatever their event times.
func TestCountWindowsByKey(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewSource(seed))
		spec := randomCountSpec(rng)
		spec.Aggregates = []windowing.AggSpec{{Name: "n", Op: windowing.Count}, {Name: "s", Op: windowing.Sum, Field: "x"}}
		recs := randomStream(rng, 1, 50+rng.Intn(200), int64(rng.Intn(5000)))
		r := newRestoreRun(t, spec, watermark.Spec{Every: 1}, 1<<20)
		r.eng.Assign(0, 0, true)
		r.feed(recs, 0)
		size, hop := spec.Window.Size, spec.Window.Hop
		// The reference: per key, the sum of x over records k·hop+1 … k·hop+size.
		byKey := map[string][]rec{}
		for _, x := range recs {
			byKey[x.key] = append(byKey[x.key], x)
		}
		want := map[string]string{}
		for key, rs := range byKey {
			for k := int64(0); k*hop+size <= int64(len(rs)); k++ {
				s := 0.0
				for _, x := range rs[k*hop : k*hop+size] {
					s += x.x
				}
				want[fmt.Sprintf("%s[%d,%d)", key, k*hop, k*hop+size)] = fmt.Sprintf("n=%d s=%g first=%d last=%d", size, s, rs[k*hop].t, rs[k*hop+size-1].t)
			}
		}
		got := map[string]string{}
		for _, p := range r.col.panes {
			if !p.Final || p.Retraction {
				continue
			}
			id := fmt.Sprintf("%s[%d,%d)", p.Key, p.Start, p.End)
			if _, dup := got[id]; dup || p.Timing != windowing.OnTime || !p.Records {
				t.Fatalf("seed %d: final pane %+v: a second one, not ON_TIME, or not a count window's", seed, p)
			}
			n, s := p.Values[0].Int, p.Values[1].Num
			if spec.Mode == windowing.Discarding {
				continue // the final pane holds the records since the last pane only
			}
			got[id] = fmt.Sprintf("n=%d s=%g first=%d last=%d", n, s, p.FirstTime, p.LastTime)
		}
		if spec.Mode == windowing.Discarding {
			continue
		}
		if len(got) != len(want) {
			t.Fatalf("seed %d: %d final panes, want %d", seed, len(got), len(want))
		}
		for id, w := range want {
			if got[id] != w {
				t.Fatalf("seed %d: %s = %q, want %q", seed, id, got[id], w)
			}
		}
	}
}
