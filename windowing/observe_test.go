package windowing_test

import (
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// keyedOutput is what an engine emitted, per key in emission order: pane
// JSON lines and drops.
type keyedOutput struct {
	json  *windowing.PaneJSON
	byKey map[string][]string
}

func (o *keyedOutput) Pane(p *windowing.Pane) error {
	o.byKey[p.Key] = append(o.byKey[p.Key], string(o.json.Append(nil, p)))
	return nil
}

func (o *keyedOutput) Dropped(ev *windowing.Event, reason windowing.DropReason) error {
	o.byKey[ev.Key] = append(o.byKey[ev.Key], fmt.Sprintf("dropped %d@%d: %s", ev.Offset, ev.Time, reason))
	return nil
}

// TestObserveSplitsKeys: a pipeline's keys spread over several engines,
// each given every record (Record for its keys, Observe for the others'),
// emit for each key exactly what one engine emits, in the same order
// (panes, pane ids, flags, drops), and every engine has one engine's
// frontier after every record and tick. Every window kind and mode, late
// records, records without a representable window, processing-time
// triggers, idle partitions, a tiny cache and checkpoints.
func TestObserveSplitsKeys(t *testing.T) {
	for name, spec := range queryCases() {
		if spec.Aggregates == nil {
			spec.Aggregates = append(testAggregates(), topKAggregate)
		}
		spec.AllowedLateness = 300
		spec.Trigger.EarlyEvery = 150
		for _, mode := range []windowing.Mode{windowing.Accumulating, windowing.Discarding, windowing.Retracting} {
			spec := spec
			spec.Mode = mode
			t.Run(fmt.Sprintf("%s-%s", name, mode), func(t *testing.T) {
				for seed := int64(1); seed <= 6; seed++ {
					observeRun(t, spec, seed, 1+int(seed%3)+1)
				}
			})
		}
	}
}

func observeRun(t *testing.T, spec windowing.Spec, seed int64, workers int) {
	rng := rand.New(rand.NewSource(seed))
	wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, MaxDelay: 100, IdleTimeout: 500}
	const parts = 3
	recs := randomStream(rng, parts, 300+rng.Intn(300), 600)
	for i := range recs {
		if spec.Window.Kind == windowing.Transaction {
			recs[i].ends = windowing.Ending(rng.Intn(3))
		}
		if rng.Intn(97) == 0 {
			recs[i].t = []int64{math.MaxInt64, math.MinInt64, math.MaxInt64 - 1}[rng.Intn(3)]
		}
	}
	open := func(i int) (*windowing.Engine, *keyedOutput) {
		db, err := state.Open(fmt.Sprintf("db%d", i), state.Options{FS: vfs.NewMem(), Ephemeral: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		out := &keyedOutput{json: windowing.NewPaneJSON(spec.Aggregates), byKey: map[string][]string{}}
		eng, err := windowing.New(spec, wm, db, out, windowing.Options{CacheBytes: 1 << 12, CommitWhenPending: true})
		if err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < parts; p++ {
			eng.Assign(p, 0, true)
		}
		return eng, out
	}
	one, oneOut := open(0)
	engs := make([]*windowing.Engine, workers)
	outs := make([]*keyedOutput, workers)
	for w := range engs {
		engs[w], outs[w] = open(w + 1)
	}
	owner := func(key string) int { return int(key[len(key)-1]) % workers }
	check := func(step string) {
		for w, e := range engs {
			if e.Frontier() != one.Frontier() {
				t.Fatalf("seed %d, %s: worker %d frontier %d, one engine's %d", seed, step, w, e.Frontier(), one.Frontier())
			}
		}
	}
	now := int64(0)
	for i, r := range recs {
		ev := r.event(len(spec.Aggregates))
		ev.Offset = int64(i)
		if err := one.Record(&ev, now); err != nil {
			t.Fatal(err)
		}
		for w, e := range engs {
			ev := r.event(len(spec.Aggregates))
			ev.Offset = int64(i)
			var err error
			if owner(r.key) == w {
				err = e.Record(&ev, now)
			} else {
				err = e.Observe(ev.Partition, ev.Time, now)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		check(fmt.Sprintf("record %d", i))
		if rng.Intn(5) == 0 {
			now += int64(rng.Intn(300))
			for _, e := range append([]*windowing.Engine{one}, engs...) {
				if err := e.Tick(now); err != nil {
					t.Fatal(err)
				}
			}
			check(fmt.Sprintf("tick %d", now))
		}
		if i%41 == 0 {
			for _, e := range append([]*windowing.Engine{one}, engs...) {
				if err := e.Checkpoint(false); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, e := range append([]*windowing.Engine{one}, engs...) {
		if err := e.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string][]string{}
	var records, panes int64
	for w, o := range outs {
		for k, v := range o.byKey {
			if owner(k) != w {
				t.Fatalf("seed %d: worker %d emitted for key %s, worker %d's", seed, w, k, owner(k))
			}
			got[k] = v
		}
		st := engs[w].Stats()
		records += st.Records
		panes += st.Panes[0] + st.Panes[1] + st.Panes[2] + st.Retractions
	}
	if !reflect.DeepEqual(got, oneOut.byKey) {
		for k, want := range oneOut.byKey {
			if !reflect.DeepEqual(got[k], want) {
				t.Fatalf("seed %d, key %s, %d workers:\n got %q\nwant %q", seed, k, workers, got[k], want)
			}
		}
		t.Fatalf("seed %d: a key only the workers emitted for", seed)
	}
	st := one.Stats()
	if records != st.Records || panes != st.Panes[0]+st.Panes[1]+st.Panes[2]+st.Retractions {
		t.Fatalf("seed %d: workers counted %d records and %d panes, one engine %d and %d", seed, records, panes, st.Records, st.Panes[0]+st.Panes[1]+st.Panes[2]+st.Retractions)
	}
}
