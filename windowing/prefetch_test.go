package windowing_test

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// TestPrefetchChangesNothing: PrefetchKeys only reads. Before each record
// the run prefetches, in both partitions, PrefetchBatch keys never seen
// and then the record's key and, after the cache was emptied by an
// eviction, keys held only by the store: the cache's estimate does not
// move (a key is not loaded from the store), the panes are those of the
// same stream without PrefetchKeys, and the cached keys' state, which
// comes only in the second batch of keys, is read.
func TestPrefetchChangesNothing(t *testing.T) {
	spec := windowing.Spec{
		Window:          windowing.WindowSpec{Kind: windowing.Tumbling, Size: 500},
		Aggregates:      testAggregates(),
		Trigger:         windowing.TriggerSpec{OnTime: true},
		AllowedLateness: 200,
	}
	wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, MaxDelay: 100}
	recs := lateStream(rand.New(rand.NewSource(11)), 2, 3000, 100)
	keys := make([]string, windowing.PrefetchBatch) // a first batch of keys never seen
	for i := range keys {
		keys[i] = fmt.Sprintf("never-seen-%d", i)
	}
	keys = append(keys, "")  // the record's key
	for p := 0; p < 2; p++ { // every key the stream may have (lateStream's names)
		for k := 0; k < 5; k++ {
			keys = append(keys, fmt.Sprintf("k%d-%d", p, k))
		}
	}
	read := 0 // PrefetchKeys calls that read a cached key's state
	run := func(prefetch bool) (*slicingRun, int) {
		r := newSlicingRun(t, spec, wm, 4000, false) // evicts now and then
		for p := int32(0); p < 2; p++ {
			r.eng.Assign(p, 0, true)
		}
		prefetched := 0
		for i, x := range recs {
			ev := x.event(len(spec.Aggregates))
			if prefetch {
				before := r.eng.CacheBytes()
				keys[windowing.PrefetchBatch] = ev.Key
				for _, part := range []int32{ev.Partition, 1 - ev.Partition} {
					sum := r.eng.Prefetched()
					r.eng.PrefetchKeys(part, keys)
					if r.eng.Prefetched() != sum {
						read++
					}
				}
				if got := r.eng.CacheBytes(); got != before {
					t.Fatalf("record %d: PrefetchKeys moved the cache's estimate from %d to %d", i, before, got)
				}
				if before > 0 {
					prefetched++
				}
			}
			if err := r.eng.Record(&ev, 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.eng.Finish(); err != nil {
			t.Fatal(err)
		}
		return r, prefetched
	}
	plain, _ := run(false)
	pre, prefetched := run(true)
	if n := pre.eng.Stats().Evictions; n == 0 || prefetched == 0 {
		t.Fatalf("%d evictions, %d records prefetched with keys cached: the run must cover both", n, prefetched)
	}
	if read == 0 {
		t.Fatal("PrefetchKeys never read the state of a cached key in its second batch of keys")
	}
	if len(plain.col.panes) == 0 || !reflect.DeepEqual(pre.col.panes, plain.col.panes) {
		t.Fatalf("panes with PrefetchKeys differ from those without (%d and %d panes)", len(pre.col.panes), len(plain.col.panes))
	}
}
