package windowing_test

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"

	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// randomTransactionStream gives records of a few keys with closing and
// discarding records among them, in event-time order but for records up
// to delay late.
func randomTransactionStream(rng *rand.Rand, n int, delay int64) []rec {
	recs := randomStream(rng, 1, n, delay)
	for i := range recs {
		switch r := rng.Intn(20); {
		case r < 3:
			recs[i].ends = windowing.Closes
		case r < 4:
			recs[i].ends = windowing.Discards
		}
	}
	return recs
}

// transactionReference is what transaction windows of timeout make of
// recs, whatever their order (docs/SEMANTICS.md, Transaction windows):
// per key, the records in event-time order, cut after each time with a
// closing or discarding record and between two times timeout or more
// apart; a discarded window has no pane. One line per window: key,
// bounds, count and sum, and whether it timed out.
func transactionReference(recs []rec, timeout int64) (panes []string, discarded int64) {
	type at struct {
		n    int64
		s    float64
		ends windowing.Ending
	}
	byKey := map[string]map[int64]*at{}
	for _, r := range recs {
		m := byKey[r.key]
		if m == nil {
			m = map[int64]*at{}
			byKey[r.key] = m
		}
		a := m[r.t]
		if a == nil {
			a = &at{}
			m[r.t] = a
		}
		a.n++
		a.s += r.x
		a.ends = max(a.ends, r.ends)
	}
	var out []string
	for key, m := range byKey {
		times := make([]int64, 0, len(m))
		for t := range m {
			times = append(times, t)
		}
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
		var n int64
		var s float64
		first := times[0]
		for i, t := range times {
			a := m[t]
			n, s = n+a.n, s+a.s
			cut := a.ends != windowing.NotEnding || i == len(times)-1 || times[i+1]-t >= timeout
			if !cut {
				continue
			}
			switch a.ends {
			case windowing.Discards:
				discarded += n
			case windowing.Closes:
				out = append(out, fmt.Sprintf("%s [%d,%d) n=%d s=%g", key, first, t+1, n, s))
			case windowing.NotEnding:
				out = append(out, fmt.Sprintf("%s [%d,%d) n=%d s=%g timeout", key, first, t+timeout, n, s))
			}
			n, s = 0, 0
			if i+1 < len(times) {
				first = times[i+1]
			}
		}
	}
	sort.Strings(out)
	return out, discarded
}

// TestTransactionWindowsAnyOrder: whatever order a key's records arrive
// in (or with a moving frontier: as out of order as it allows), its
// transaction windows are cut by its closing and discarding
// records and by its silences of the timeout, as the records in event-time
// order say: a closing record that comes after later records cuts them off
// into the next window, earlier records that come after their window's
// closing record are still in it, and a discarded window emits nothing.
func TestTransactionWindowsAnyOrder(t *testing.T) {
	for seed := int64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewSource(seed))
		timeout := int64(1 + rng.Intn(400))
		spec := windowing.Spec{
			Window:     windowing.WindowSpec{Kind: windowing.Transaction, Gap: timeout},
			Mode:       windowing.Mode(rng.Intn(3)),
			Aggregates: []windowing.AggSpec{{Name: "n", Op: windowing.Count}, {Name: "s", Op: windowing.Sum, Field: "x"}},
			Trigger:    windowing.TriggerSpec{OnTime: true},
		}
		delay := int64(rng.Intn(600))
		recs := randomTransactionStream(rng, 20+rng.Intn(200), delay)
		// Odd seeds: any order, and the frontier stays behind every
		// record until the end of input. Even seeds: records out of
		// order by up to the watermark's delay, so none is late while
		// windows fire and their stores fold (fold) as the frontier
		// moves. Either way every window fires once, complete.
		wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, MaxDelay: delay, Every: 1}
		if seed%2 == 1 {
			rng.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
			wm.MaxDelay = 1 << 40
		}
		r := newRestoreRun(t, spec, wm, 1<<20)
		r.eng.Assign(0, 0, true)
		r.feed(recs, 0)
		if err := r.eng.Finish(); err != nil {
			t.Fatal(err)
		}
		var got []string
		var discarded int64
		for _, p := range r.col.panes {
			if p.Retraction || p.Timing == windowing.Early {
				continue
			}
			line := fmt.Sprintf("%s [%d,%d) n=%d s=%g", p.Key, p.Start, p.End, p.Values[0].Int, p.Values[1].Num)
			if p.TimedOut {
				line += " timeout"
			}
			got = append(got, line)
		}
		sort.Strings(got)
		want, wantDiscarded := transactionReference(recs, timeout)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("seed %d (timeout %d, %s):\n got\n%s\n want\n%s", seed, timeout, spec.Mode, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		for _, p := range r.col.panes {
			if p.Timing == windowing.OnTime && !p.Final {
				t.Fatalf("seed %d: an ON_TIME pane at the end of input is not final: %+v", seed, p)
			}
		}
		if discarded = r.eng.Stats().Discarded; discarded != wantDiscarded {
			t.Fatalf("seed %d: %d records discarded, want %d", seed, discarded, wantDiscarded)
		}
	}
}

// TestTransactionWindowsRestored: a partition's transaction windows, their
// records by time, their endings and their trigger state move through the
// changelog: the new owner emits exactly the panes the old one goes on to
// emit, in every accumulation mode, with early triggers, lateness and
// records out of order.
func TestTransactionWindowsRestored(t *testing.T) {
	for seed := int64(1); seed <= 60; seed++ {
		rng := rand.New(rand.NewSource(seed))
		spec := windowing.Spec{
			Window:          windowing.WindowSpec{Kind: windowing.Transaction, Gap: int64(1 + rng.Intn(400))},
			Mode:            windowing.Mode(rng.Intn(3)),
			Aggregates:      append(testAggregates(), topKAggregate),
			Trigger:         windowing.TriggerSpec{OnTime: true, Late: true},
			AllowedLateness: int64(rng.Intn(3)) * 150,
		}
		if rng.Intn(2) == 0 {
			spec.Trigger.EarlyCount = int64(1 + rng.Intn(3))
		}
		if rng.Intn(3) == 0 {
			spec.Trigger.EarlyEvery = int64(10 + rng.Intn(200))
		}
		recs := randomTransactionStream(rng, 100+rng.Intn(300), int64(rng.Intn(800)))
		wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, MaxDelay: int64(rng.Intn(300)), Every: 1}
		cut := len(recs) / 3 * (1 + rng.Intn(2))
		t.Run(fmt.Sprintf("seed%d-timeout%d-%s", seed, spec.Window.Gap, spec.Mode), func(t *testing.T) {
			moveCold(t, spec, wm, 1+rng.Intn(3000), recs, cut, true)
		})
	}
}

// TestTransactionPaneIDsUnique: no two panes of transaction windows have
// one pane id, whatever the splits, merges, early and late panes (a
// retraction repeats the id of the pane it retracts). A split's cut-off
// window numbered its panes from 0: 365 ids twice over these seeds, such
// as k0-0/-779/-769/0 for an EARLY pane of 2 records and then one of 3.
func TestTransactionPaneIDsUnique(t *testing.T) {
	for seed := int64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewSource(seed))
		spec := windowing.Spec{
			Window:          windowing.WindowSpec{Kind: windowing.Transaction, Gap: int64(1 + rng.Intn(400))},
			Mode:            windowing.Mode(rng.Intn(3)),
			Aggregates:      []windowing.AggSpec{{Name: "n", Op: windowing.Count}},
			Trigger:         windowing.TriggerSpec{OnTime: true, Late: true, EarlyCount: 1},
			AllowedLateness: int64(rng.Intn(3)) * 150,
		}
		recs := randomTransactionStream(rng, 100+rng.Intn(300), int64(rng.Intn(800)))
		wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, MaxDelay: int64(rng.Intn(300)), Every: 1}
		r := newRestoreRun(t, spec, wm, 1<<20)
		r.eng.Assign(0, 0, true)
		r.feed(recs, 0)
		if err := r.eng.Finish(); err != nil {
			t.Fatal(err)
		}
		seen := map[string]windowing.Pane{}
		for _, p := range r.col.panes {
			if p.Retraction {
				continue
			}
			if q, ok := seen[p.ID()]; ok {
				t.Fatalf("seed %d: pane id %s twice: %s of %d records, then %s of %d", seed, p.ID(), q.Timing, q.Values[0].Int, p.Timing, p.Values[0].Int)
			}
			seen[p.ID()] = p
		}
	}
}

// A transaction window that takes in the next keeps the earliest pending
// processing-time deadline of the two, as a session merge does: a merge
// never restarts an early trigger's clock. Before, the absorbed window's
// timer was dropped and the merged window's armed again from the bridging
// record's arrival.
func TestTransactionMergeKeepsEarlyTimer(t *testing.T) {
	spec := windowing.Spec{
		Window:     windowing.WindowSpec{Kind: windowing.Transaction, Gap: 100},
		Aggregates: []windowing.AggSpec{{Name: "n", Op: windowing.Count}},
		Trigger:    windowing.TriggerSpec{OnTime: true, EarlyEvery: 50},
	}
	r := newRestoreRun(t, spec, watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, MaxDelay: 1000, Every: 1}, 1<<20)
	r.eng.Assign(0, 0, true)
	at := func(ts, now int64) {
		t.Helper()
		ev := rec{key: "k", t: ts, x: 1}.event(1)
		if err := r.eng.Record(&ev, now); err != nil {
			t.Fatal(err)
		}
	}
	tick := func(now int64) {
		t.Helper()
		if err := r.eng.Tick(now); err != nil {
			t.Fatal(err)
		}
	}
	at(1000, 0)
	tick(50)     // an EARLY pane of [1000,…)
	at(1150, 60) // a window of its own: its early timer is due at 110
	at(1080, 70) // reaches 1180: takes in the window at 1150
	tick(110)
	var early []int64
	for _, p := range r.col.panes {
		if p.Timing == windowing.Early {
			early = append(early, p.Values[0].Int)
		}
	}
	if len(early) != 2 || early[1] != 3 {
		t.Fatalf("EARLY panes by processing time 110 counted %v, want [1 3]: the merged window keeps the timer due at 110", early)
	}
}
