package windowing_test

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// TestCacheEstimateFollowsLiveWindows: the cache's byte estimate follows
// the windows and slices the cached keys hold, through windows that fire
// and close, sessions that merge and slices that are dropped, so that
// windows opening and closing do not fill the budget and force an eviction
// of every key; and a key left without windows or slices does not keep a
// long list for them, which the estimate would not count. The budget is
// large: no key leaves the cache.
func TestCacheEstimateFollowsLiveWindows(t *testing.T) {
	specs := map[string]windowing.Spec{
		"tumbling": {Window: windowing.WindowSpec{Kind: windowing.Tumbling, Size: 500}},
		"hopping":  {Window: windowing.WindowSpec{Kind: windowing.Hopping, Size: 600, Hop: 100}},
		"session":  {Window: windowing.WindowSpec{Kind: windowing.Session, Gap: 300}},
	}
	for name, spec := range specs {
		spec.Aggregates = testAggregates()
		spec.Trigger = windowing.TriggerSpec{OnTime: true}
		spec.AllowedLateness = 200
		for seed := int64(1); seed <= 5; seed++ {
			t.Run(fmt.Sprintf("%s-seed%d", name, seed), func(t *testing.T) {
				rng := rand.New(rand.NewSource(seed))
				delay := int64(100)
				wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, MaxDelay: delay}
				r := newSlicingRun(t, spec, wm, 1<<30, false)
				for p := int32(0); p < 2; p++ {
					r.eng.Assign(p, 0, true)
				}
				recs := lateStream(rng, 2, 2000, delay)
				peak := 0
				for i, x := range recs {
					ev := x.event(len(spec.Aggregates))
					if err := r.eng.Record(&ev, 0); err != nil {
						t.Fatal(err)
					}
					if got, want := r.eng.CacheBytes(), r.eng.LiveEstimate(); got != want {
						t.Fatalf("after record %d: cache estimate %d, the cached windows and slices %d", i, got, want)
					}
					if n := r.eng.EmptiedKeySlots(); n > windowing.KeptSlots {
						t.Fatalf("after record %d: a key without windows or slices keeps %d slots", i, n)
					}
					peak = max(peak, r.eng.CacheBytes())
				}
				if err := r.eng.Finish(); err != nil {
					t.Fatal(err)
				}
				if got, want := r.eng.CacheBytes(), r.eng.LiveEstimate(); got != want || got >= peak {
					t.Fatalf("after Finish: cache estimate %d, the cached keys %d, peak %d", got, want, peak)
				}
				if n := r.eng.EmptiedKeySlots(); n > windowing.KeptSlots {
					t.Fatalf("after Finish: a key without windows or slices keeps %d slots", n)
				}
				if len(r.col.panes) == 0 {
					t.Fatal("no pane")
				}
				if n := r.eng.Stats().Evictions; n != 0 {
					t.Fatalf("%d evictions under a budget never reached", n)
				}
			})
		}
	}
}

// TestCacheEvictionsCounted: under a small budget the cache is flushed and
// emptied whenever a step leaves it over the budget, Stats counts each time,
// and after each record the estimate is within the budget again.
func TestCacheEvictionsCounted(t *testing.T) {
	spec := windowing.Spec{
		Window:     windowing.WindowSpec{Kind: windowing.Tumbling, Size: 500},
		Aggregates: testAggregates(),
		Trigger:    windowing.TriggerSpec{OnTime: true},
	}
	const budget = 4000
	wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, MaxDelay: 100}
	r := newSlicingRun(t, spec, wm, budget, false)
	for p := int32(0); p < 2; p++ {
		r.eng.Assign(p, 0, true)
	}
	var last int64
	for i, x := range lateStream(rand.New(rand.NewSource(7)), 2, 2000, 100) {
		ev := x.event(len(spec.Aggregates))
		if err := r.eng.Record(&ev, 0); err != nil {
			t.Fatal(err)
		}
		n, got := r.eng.Stats().Evictions, r.eng.CacheBytes()
		if got > budget || (n > last && got != 0) {
			t.Fatalf("after record %d: estimate %d (budget %d), evictions %d -> %d (an eviction empties the cache)", i, got, budget, last, n)
		}
		last = n
	}
	if last == 0 {
		t.Fatal("no eviction under a 4000-byte budget")
	}
}
