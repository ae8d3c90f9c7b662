package windowing_test

import (
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// queryCases are one pipeline of every window type, each with every
// aggregate.
func queryCases() map[string]windowing.Spec {
	on := windowing.TriggerSpec{OnTime: true, Closing: windowing.ClosingAlways}
	early := on
	early.EarlyCount = 1
	cal := &windowing.CalendarSpec{Unit: windowing.Hour, Zone: time.UTC, Size: 1, Hop: 1}
	return map[string]windowing.Spec{
		"tumbling": {Window: windowing.WindowSpec{Kind: windowing.Tumbling, Size: 1000, Hop: 1000}, Trigger: on},
		"hopping":  {Window: windowing.WindowSpec{Kind: windowing.Hopping, Size: 1500, Hop: 500}, Trigger: on}, // sliced
		// Sliced (slices.go): the aggregates slicing merges.
		"hopping-sliced":  {Window: windowing.WindowSpec{Kind: windowing.Hopping, Size: 1500, Hop: 500}, Trigger: on, Aggregates: testAggregates()},
		"cumulate-sliced": {Window: windowing.WindowSpec{Kind: windowing.Cumulate, Size: 2000, Step: 500}, Trigger: on, Aggregates: testAggregates()},
		"hopping-early":   {Window: windowing.WindowSpec{Kind: windowing.Hopping, Size: 1500, Hop: 500}, Trigger: early},
		"session":         {Window: windowing.WindowSpec{Kind: windowing.Session, Gap: 300}, Trigger: early},
		"sliding":         {Window: windowing.WindowSpec{Kind: windowing.Sliding, Size: 800}, Trigger: on},
		"calendar":        {Window: windowing.WindowSpec{Kind: windowing.Calendar, Calendar: cal}, Trigger: on},
		"cumulate":        {Window: windowing.WindowSpec{Kind: windowing.Cumulate, Size: 2000, Step: 500}, Trigger: on},
		"count":           {Window: windowing.WindowSpec{Kind: windowing.CountWindow, Size: 5, Hop: 2}, Trigger: early},
		"transaction":     {Window: windowing.WindowSpec{Kind: windowing.Transaction, Gap: 400}, Trigger: early},
	}
}

// TestQueryAnswersAsPanes: what a Reader answers for a key's windows, read
// from the state of a checkpoint, is what the panes of those windows show:
//   - every window's values equal the pane the window would emit now
//     (another engine restored from the same checkpoint and finished at
//     once: its closing or on-time pane), or for count windows, whose
//     early {count: 1} panes show every record, the window's last pane;
//   - its pane count and last pane's timing are those of the last pane
//     it emitted (a session merged from several: of the one it goes on
//     from);
//   - a window is final exactly when its timers were held past its expiry:
//     released, it emits its closing pane, final, with the values the
//     answer showed, and windows not final emit no final pane.
func TestQueryAnswersAsPanes(t *testing.T) {
	for name, spec := range queryCases() {
		if spec.Aggregates == nil {
			spec.Aggregates = append(testAggregates(), topKAggregate, windowing.AggSpec{Name: "d", Op: windowing.DistinctApprox, Field: "x"})
		}
		spec.AllowedLateness = 600
		for _, mode := range []windowing.Mode{windowing.Accumulating, windowing.Discarding, windowing.Retracting} {
			spec := spec
			spec.Mode = mode
			t.Run(fmt.Sprintf("%s-%s", name, mode), func(t *testing.T) {
				for seed := int64(1); seed <= 8; seed++ {
					queryRun(t, spec, seed)
				}
			})
		}
	}
}

func queryRun(t *testing.T, spec windowing.Spec, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, MaxDelay: 200}
	recs := randomStream(rng, 1, 200+rng.Intn(200), 300)
	if spec.Window.Kind == windowing.Transaction {
		for i := range recs {
			recs[i].ends = windowing.Ending(rng.Intn(3))
		}
	}
	r := newRestoreRun(t, spec, wm, 1<<20)
	r.eng.Assign(0, 0, true)
	cut := len(recs) / 2
	now := r.feed(recs[:cut], 0)
	// The partition's timers wait from here: windows pass their expiry
	// unfired (final), as while a partition catches up.
	r.eng.HoldTimers(0)
	now = r.feed(recs[cut:], now)
	if err := r.eng.Checkpoint(false); err != nil {
		t.Fatal(err)
	}
	reader := r.eng.Reader()
	f := r.eng.Frontier()
	answers := map[string][]windowing.WindowState{}
	for key := range r.keys {
		b, err := r.db.GetKey(0, key)
		if err != nil {
			t.Fatal(err)
		}
		ws, err := reader.Windows(nil, 0, key, b, f, -1<<62, 1<<62)
		if err != nil {
			t.Fatal(err)
		}
		answers[key] = ws
	}
	// Panes emitted so far, the last of each window.
	last := map[[3]any]windowing.Pane{}
	for _, p := range r.col.panes {
		if !p.Retraction {
			last[[3]any{p.Key, p.Start, p.End}] = p
		}
	}
	byKey := map[string][]windowing.Pane{}
	for _, p := range r.col.panes {
		if !p.Retraction {
			byKey[p.Key] = append(byKey[p.Key], p)
		}
	}
	// The panes the windows would emit now: another engine restored from
	// this checkpoint, finished.
	next := map[[3]any]windowing.Pane{}
	if spec.Window.Kind != windowing.CountWindow {
		other := newRestoreRun(t, spec, wm, 1<<20)
		log, g := r.changelog(0)
		// (The restore fires the windows the frontier passed while their
		// timers were held.)
		other.restore(0, log, g, now)
		if err := other.eng.Finish(); err != nil {
			t.Fatal(err)
		}
		for _, p := range other.col.panes {
			if id := [3]any{p.Key, p.Start, p.End}; !p.Retraction {
				if _, ok := next[id]; !ok {
					next[id] = p
				}
			}
		}
	}
	emitted := len(r.col.panes)
	if err := r.eng.ReleaseTimers(0); err != nil {
		t.Fatal(err)
	}
	released := map[[3]any]windowing.Pane{}
	for _, p := range r.col.panes[emitted:] {
		if !p.Retraction && p.Final {
			released[[3]any{p.Key, p.Start, p.End}] = p
		}
	}
	finals := 0
	keys := make([]string, 0, len(answers))
	for k := range answers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		for _, w := range answers[key] {
			id := [3]any{key, w.Start, w.End}
			got := string(windowing.AppendQueryWindow(nil, &w, spec.Aggregates))
			want, ok := next[id]
			if spec.Window.Kind == windowing.CountWindow {
				// Every record's early pane showed the window.
				// Discarding: nothing since that pane.
				want, ok = last[id]
				if spec.Mode == windowing.Discarding && ok {
					if w.Values[0].Int != 0 {
						t.Fatalf("seed %d: window %v: discarding count window answered %d records since its last pane", seed, id, w.Values[0].Int)
					}
					want = w.Pane
				}
			}
			if !ok {
				t.Fatalf("seed %d: key %s: window [%d,%d) answered, but no pane of it (answer %s)", seed, key, w.Start, w.End, got)
			}
			if a, b := valuesJSON(spec, &w.Pane), valuesJSON(spec, &want); a != b {
				t.Fatalf("seed %d: window %v: answered values %s, pane %s", seed, id, a, b)
			}
			if w.Panes > 0 {
				lp, ok := last[id]
				switch spec.Window.Kind {
				case windowing.Session:
					if !ok {
						lp, ok = lastOverlapping(byKey[key], w.Start, w.End)
					}
				case windowing.Transaction:
					// A split's parts go on from the window's panes,
					// which had other bounds (and the cut-off part has
					// none of its own yet): the index is one of the
					// key's panes'.
					lp, ok = paneIndexed(byKey[key], w.Panes-1)
					w.LastTiming = lp.Timing
				}
				if !ok || lp.Index != w.Panes-1 || lp.Timing != w.LastTiming {
					t.Fatalf("seed %d: window %v: answered %d panes, the last %s; emitted %+v (%v)", seed, id, w.Panes, w.LastTiming, lp, ok)
				}
			} else if lp, ok := last[id]; ok && spec.Window.Kind != windowing.Transaction {
				// (A transaction window a split made may take the bounds
				// an earlier window of the key had.)
				t.Fatalf("seed %d: window %v: answered no pane, emitted %+v", seed, id, lp)
			}
			rp, fired := released[id]
			if w.Final != fired {
				t.Fatalf("seed %d: window %v: answered final=%v, final pane at the release: %v (frontier %d, answer %s)", seed, id, w.Final, fired, f, got)
			}
			if fired {
				finals++
				if a, b := valuesJSON(spec, &w.Pane), valuesJSON(spec, &rp); a != b {
					t.Fatalf("seed %d: final window %v: answered %s, its final pane %s", seed, id, a, b)
				}
			}
		}
	}
	if n := len(released); n != finals && spec.Window.Kind != windowing.Sliding {
		t.Fatalf("seed %d: %d final panes at the release, %d windows answered final", seed, n, finals)
	}
}

// valuesJSON is what a pane shows of p's window and values (its
// aggregates and partial mask), as the query answer shows them.
func valuesJSON(spec windowing.Spec, p *windowing.Pane) string {
	s := windowing.WindowState{Pane: *p}
	s.Timing, s.Index, s.Final = 0, 0, false
	return string(windowing.AppendQueryWindow(nil, &s, spec.Aggregates))
}

func paneIndexed(panes []windowing.Pane, index uint32) (windowing.Pane, bool) {
	for _, p := range panes {
		if p.Index == index {
			return p, true
		}
	}
	return windowing.Pane{}, false
}

func lastOverlapping(panes []windowing.Pane, start, end int64) (windowing.Pane, bool) {
	for i := len(panes) - 1; i >= 0; i-- {
		if p := panes[i]; p.Start < end && p.End > start {
			return p, true
		}
	}
	return windowing.Pane{}, false
}
