package windowing_test

import (
	"flag"
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

var seeds = flag.Int64("seeds", 150, "number of random cases of the property test")

// collector records every pane the engine emits, copying its values.
type collector struct {
	panes   []windowing.Pane
	dropped int
}

func (c *collector) Pane(p *windowing.Pane) error {
	cp := *p
	cp.Values = append([]windowing.Value(nil), p.Values...)
	c.panes = append(c.panes, cp)
	return nil
}

func (c *collector) Dropped(*windowing.Event, windowing.DropReason) error { c.dropped++; return nil }

type winID struct {
	key        string
	start, end int64
}

type batchAgg struct {
	n      int64
	sum    float64
	lo, hi float64
	xs     []float64 // every value, for quantiles and top_k
}

func (b *batchAgg) add(x float64) {
	b.xs = append(b.xs, x)
	if b.n == 0 || x < b.lo {
		b.lo = x
	}
	if b.n == 0 || x > b.hi {
		b.hi = x
	}
	b.n++
	b.sum += x
}

func (b batchAgg) values() []windowing.Value {
	v := []windowing.Value{{Kind: windowing.IntValue, Int: b.n}, {Kind: windowing.NumValue, Num: windowing.ShortestWithin(b.sum, b.n)}, {}, {}, {}}
	if b.n > 0 {
		v[2] = windowing.Value{Kind: windowing.NumValue, Num: b.lo}
		v[3] = windowing.Value{Kind: windowing.NumValue, Num: b.hi}
		v[4] = windowing.Value{Kind: windowing.NumValue, Num: windowing.ShortestWithin(b.sum/float64(b.n), b.n+1)}
	}
	return v
}

type rec struct {
	part int32
	key  string
	t    int64
	x    float64
	ends windowing.Ending // transaction windows (transaction_test.go)
}

// event is r as the engine's event, with x as the input of each of
// aggregates aggregates.
func (r rec) event(aggregates int) windowing.Event {
	ev := windowing.Event{Partition: r.part, Key: r.key, Time: r.t, Ends: r.ends, Inputs: make([]windowing.Input, aggregates)}
	for j := range ev.Inputs {
		ev.Inputs[j].Num = r.x
		ev.Inputs[j].Text = strconv.FormatFloat(r.x, 'f', -1, 64)
	}
	return ev
}

// testAggregates are the aggregates of the random specs: one of each
// op over x that slicing merges, in the order batchAgg.values reports them,
// then quantiles (checked by checkPanes against the guarantee).
func testAggregates() []windowing.AggSpec {
	return []windowing.AggSpec{
		{Name: "n", Op: windowing.Count},
		{Name: "s", Op: windowing.Sum, Field: "x"},
		{Name: "lo", Op: windowing.Min, Field: "x"},
		{Name: "hi", Op: windowing.Max, Field: "x"},
		{Name: "avg", Op: windowing.Avg, Field: "x"},
		{Name: "q", Op: windowing.Quantiles, Field: "x", RelativeAccuracy: 0.01, MaxBuckets: 2048, Quantiles: []windowing.Quantile{
			{Text: "0", Num: 0, Den: 1}, {Text: "0.5", Num: 1, Den: 2}, {Text: "0.99", Num: 99, Den: 100}, {Text: "1", Num: 1, Den: 1},
		}},
	}
}

// topKAggregate is the top_k aggregate randomSpec adds (not slicing's).
var topKAggregate = windowing.AggSpec{Name: "top", Op: windowing.TopK, Field: "x", K: 3, Capacity: windowing.DefaultCapacity(3)}

// batch computes every window's aggregates from the records at once.
func batch(spec windowing.Spec, recs []rec) map[winID]batchAgg {
	out := map[winID]batchAgg{}
	if spec.Window.Kind == windowing.Session {
		byKey := map[string][]rec{}
		for _, r := range recs {
			byKey[r.key] = append(byKey[r.key], r)
		}
		for key, rs := range byKey {
			sort.Slice(rs, func(i, j int) bool { return rs[i].t < rs[j].t })
			var cur winID
			var agg batchAgg
			for i, r := range rs {
				if i > 0 && r.t < cur.end { // overlaps the open session
					cur.end = max(cur.end, r.t+spec.Window.Gap)
				} else {
					if i > 0 {
						out[cur] = agg
					}
					cur, agg = winID{key, r.t, r.t + spec.Window.Gap}, batchAgg{}
				}
				agg.add(r.x)
			}
			out[cur] = agg
		}
		return out
	}
	a := windowing.NewAssigner(spec.Window)
	for _, r := range recs {
		for _, w := range a.Windows(nil, r.t) {
			id := winID{r.key, w.Start, w.End}
			agg := out[id]
			agg.add(r.x)
			out[id] = agg
		}
	}
	return out
}

func randomSpec(rng *rand.Rand) windowing.Spec {
	spec := windowing.Spec{
		Mode:            windowing.Mode(rng.Intn(3)),
		Aggregates:      append(testAggregates(), topKAggregate),
		AllowedLateness: []int64{0, 0, 500, 5000}[rng.Intn(4)],
		Trigger:         windowing.TriggerSpec{OnTime: rng.Intn(4) != 0, Closing: windowing.ClosingPolicy(rng.Intn(3))},
	}
	switch rng.Intn(3) {
	case 0:
		size := int64(1+rng.Intn(20)) * 100
		spec.Window = windowing.WindowSpec{Kind: windowing.Tumbling, Size: size, Hop: size, Offset: int64(rng.Intn(1000)) - 500}
	case 1:
		hop := int64(1+rng.Intn(10)) * 100
		spec.Window = windowing.WindowSpec{Kind: windowing.Hopping, Size: hop * int64(1+rng.Intn(6)), Hop: hop, Offset: int64(rng.Intn(300))}
	default:
		spec.Window = windowing.WindowSpec{Kind: windowing.Session, Gap: int64(50 + rng.Intn(1000))}
	}
	if rng.Intn(2) == 0 {
		spec.Trigger.EarlyCount = int64(1 + rng.Intn(5))
	}
	if rng.Intn(3) == 0 {
		spec.Trigger.EarlyEvery = int64(10 + rng.Intn(200))
	}
	// A pane must close every window: with on_time false and closing never there is no final pane.
	if !spec.Trigger.OnTime && spec.Trigger.Closing == windowing.ClosingNever {
		spec.Trigger.Closing = windowing.ClosingAlways
	}
	if spec.AllowedLateness > 0 && spec.Trigger.Closing != windowing.ClosingAlways {
		spec.Trigger.Closing = windowing.ClosingAlways
	}
	return spec
}

// randomStream returns per-partition sequences whose disorder stays within
// delay: every record's time is >= (largest earlier time of its partition) - delay,
// interleaved across partitions at random.
func randomStream(rng *rand.Rand, parts int, n int, delay int64) []rec {
	per := make([][]rec, parts)
	keys := 1 + rng.Intn(6)
	for p := 0; p < parts; p++ {
		var maxTS int64 = int64(rng.Intn(2000)) - 1000
		for i := 0; i < n/parts; i++ {
			t := maxTS + int64(rng.Intn(300)) - delay
			if t < maxTS-delay {
				t = maxTS - delay
			}
			if t > maxTS {
				maxTS = t
			}
			// Keys stay on one partition (co-partitioned), as in Kafka.
			key := fmt.Sprintf("k%d-%d", p, rng.Intn(keys))
			per[p] = append(per[p], rec{part: int32(p), key: key, t: t, x: float64(rng.Intn(200) - 100)})
		}
	}
	var out []rec
	idx := make([]int, parts)
	for {
		var live []int
		for p := range per {
			if idx[p] < len(per[p]) {
				live = append(live, p)
			}
		}
		if len(live) == 0 {
			return out
		}
		p := live[rng.Intn(len(live))]
		out = append(out, per[p][idx[p]])
		idx[p]++
	}
}

// TestFinalPanesEqualBatch: for random inputs with no late records, the
// final panes equal a batch computation over the same records, whatever the
// arrival order within the bound, in every accumulation mode, with a tiny
// cache (evictions) and checkpoints along the way.
func TestFinalPanesEqualBatch(t *testing.T) {
	for seed := int64(1); seed <= *seeds; seed++ {
		rng := rand.New(rand.NewSource(seed))
		spec := randomSpec(rng)
		delay := int64(rng.Intn(800))
		parts := 1 + rng.Intn(3)
		recs := randomStream(rng, parts, 50+rng.Intn(250), delay)
		name := fmt.Sprintf("seed%d-%s-%s", seed, spec.Window.Kind, spec.Mode)
		t.Run(name, func(t *testing.T) {
			db, err := state.Open("db", state.Options{FS: vfs.NewMem()})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var col collector
			wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, MaxDelay: delay, Every: int64(1 + rng.Intn(3))}
			eng, err := windowing.New(spec, wm, db, &col, windowing.Options{CacheBytes: 1 + rng.Intn(4000)})
			if err != nil {
				t.Fatal(err)
			}
			drive(t, eng, spec, recs, parts, rng, 10, 100)
			if n := eng.OpenWindows(); n != 0 {
				t.Fatalf("%d windows still open after the end of input", n)
			}
			if col.dropped != 0 {
				t.Fatalf("%d records dropped, want none", col.dropped)
			}
			checkPanes(t, spec, col.panes, batch(spec, recs))
		})
	}
}

func checkPanes(t *testing.T, spec windowing.Spec, panes []windowing.Pane, want map[winID]batchAgg) {
	t.Helper()
	finals := map[winID][]windowing.Value{}
	sums := map[winID]*batchAgg{} // discarding: the combination of every pane
	lastIndex := map[winID]int64{}
	var prev *windowing.Pane
	for i := range panes {
		p := &panes[i]
		id := winID{p.Key, p.Start, p.End}
		if p.Retraction {
			prev = p
			continue
		}
		if _, done := finals[id]; done {
			t.Fatalf("pane after the final pane of %v: %+v", id, *p)
		}
		if spec.Window.Kind != windowing.Session {
			if li, ok := lastIndex[id]; (ok && int64(p.Index) != li+1) || (!ok && p.Index != 0) {
				t.Fatalf("pane index %d of %v does not follow %d", p.Index, id, li)
			}
			lastIndex[id] = int64(p.Index)
			if spec.Mode == windowing.Retracting && p.Index > 0 {
				if prev == nil || !prev.Retraction || prev.Key != p.Key || prev.Start != p.Start || prev.Index != p.Index-1 {
					t.Fatalf("pane %+v is not preceded by the retraction of its previous pane (got %+v)", *p, prev)
				}
			}
		}
		if spec.Mode == windowing.Discarding {
			// A pane of a session that was later merged counts toward the
			// final session that contains it.
			sid := id
			if spec.Window.Kind == windowing.Session {
				for w := range want {
					if w.key == id.key && w.start <= id.start && id.end <= w.end {
						sid = w
					}
				}
			}
			s := sums[sid]
			if s == nil {
				s = &batchAgg{}
				sums[sid] = s
			}
			if p.Values[0].Int > 0 {
				if s.n == 0 || p.Values[2].Num < s.lo {
					s.lo = p.Values[2].Num
				}
				if s.n == 0 || p.Values[3].Num > s.hi {
					s.hi = p.Values[3].Num
				}
			}
			s.n += p.Values[0].Int
			s.sum += p.Values[1].Num
		}
		if p.Final {
			finals[id] = p.Values
		}
		prev = p
	}
	for id, agg := range want {
		got, ok := finals[id]
		if !ok {
			t.Fatalf("window %v has no final pane (want %+v)", id, agg)
		}
		if spec.Mode == windowing.Discarding {
			// A pane of a session that was later merged counts toward the
			// final session that contains it.
			sid := id
			if spec.Window.Kind == windowing.Session {
				for w := range want {
					if w.key == id.key && w.start <= id.start && id.end <= w.end {
						sid = w
					}
				}
			}
			s := sums[sid]
			if s.n != agg.n || s.sum != agg.sum || s.lo != agg.lo || s.hi != agg.hi {
				t.Fatalf("window %v: discarding panes add up to %+v, want %+v", id, *s, agg)
			}
			continue
		}
		wantVals := agg.values()
		for i := range wantVals {
			if got[i] != wantVals[i] {
				t.Fatalf("window %v aggregate %s = %+v, want %+v", id, spec.Aggregates[i].Name, got[i], wantVals[i])
			}
		}
		for i := len(wantVals); i < len(spec.Aggregates); i++ {
			switch a := &spec.Aggregates[i]; a.Op {
			case windowing.Quantiles:
				windowing.CheckQuantiles(t, got[i].Raw, a, agg.xs)
			case windowing.TopK:
				counts := map[string]uint64{}
				for _, x := range agg.xs {
					counts[strconv.FormatFloat(x, 'f', -1, 64)]++
				}
				windowing.CheckTopK(t, got[i].Raw, a, counts, len(counts) <= a.Capacity)
			}
		}
	}
	if len(finals) != len(want) {
		for id := range finals {
			if _, ok := want[id]; !ok {
				t.Errorf("unexpected final pane for %v", id)
			}
		}
		t.Fatalf("%d final panes, want %d", len(finals), len(want))
	}
}

// timingCollector is a collector that also notes the engine's frontier at
// each pane.
type timingCollector struct {
	collector
	eng       *windowing.Engine
	frontiers []int64
}

func (c *timingCollector) Pane(p *windowing.Pane) error {
	c.frontiers = append(c.frontiers, c.eng.Frontier())
	return c.collector.Pane(p)
}

// lateSpec returns a random spec of randomSpec's kind, sessions in two
// cases of three, with late firing (batched in two cases of three, else
// after each late record) in two of three, and no early trigger in half.
func lateSpec(rng *rand.Rand) windowing.Spec {
	spec := randomSpec(rng)
	if rng.Intn(2) == 0 {
		spec.Window = windowing.WindowSpec{Kind: windowing.Session, Gap: int64(50 + rng.Intn(1000))}
	}
	if rng.Intn(2) == 0 {
		spec.Trigger.EarlyCount, spec.Trigger.EarlyEvery = 0, 0
	}
	if rng.Intn(3) != 0 {
		spec.Trigger.Late = true
		if rng.Intn(3) != 0 {
			spec.Trigger.LateEvery = int64(10 + rng.Intn(200))
		}
		if spec.AllowedLateness == 0 {
			spec.AllowedLateness = 500
		}
	}
	return spec
}

// TestPaneTimingsFollowTriggers: with late records, merges of late sessions
// into live ones and processing time moving, every pane's timing comes from
// a configured trigger and agrees with the frontier at its emission: EARLY
// only with an early trigger, before the window's end, never final; LATE
// only with late firing or as the closing pane, at or past the end; a
// non-final ON_TIME pane only with on_time, at or past the end. No pane id
// (key, bounds, index) repeats.
func TestPaneTimingsFollowTriggers(t *testing.T) {
	for seed := int64(1); seed <= *seeds; seed++ {
		rng := rand.New(rand.NewSource(seed))
		spec := lateSpec(rng)
		delay := int64(rng.Intn(400))
		parts := 1 + rng.Intn(2)
		recs := lateStream(rng, parts, 50+rng.Intn(250), delay)
		name := fmt.Sprintf("seed%d-%s-%s", seed, spec.Window.Kind, spec.Mode)
		t.Run(name, func(t *testing.T) {
			db, err := state.Open("db", state.Options{FS: vfs.NewMem()})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			col := &timingCollector{}
			wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, MaxDelay: delay, Every: 1}
			col.eng, err = windowing.New(spec, wm, db, col, windowing.Options{CacheBytes: 1 + rng.Intn(4000)})
			if err != nil {
				t.Fatal(err)
			}
			eng := col.eng
			drive(t, eng, spec, recs, parts, rng, 3, 60)
			checkTimings(t, spec, col.panes, col.frontiers)
		})
	}
}

// checkTimings checks the timing rules of TestPaneTimingsFollowTriggers on
// panes, frontiers[i] being the frontier at panes[i].
func checkTimings(t *testing.T, spec windowing.Spec, panes []windowing.Pane, frontiers []int64) {
	t.Helper()
	trig := spec.Trigger
	early := trig.EarlyCount > 0 || trig.EarlyEvery > 0
	ids := map[string]bool{}
	for i := range panes {
		p := &panes[i]
		if p.Retraction {
			continue // it repeats an earlier pane
		}
		f := frontiers[i]
		switch {
		case p.Timing == windowing.Early && (!early || p.Final || f >= p.End):
			t.Fatalf("pane %d %+v: EARLY at frontier %d (early trigger: %v)", i, *p, f, early)
		case p.Timing == windowing.Late && !p.Final && (!trig.Late || f < p.End):
			t.Fatalf("pane %d %+v: non-final LATE at frontier %d (late firing: %v)", i, *p, f, trig.Late)
		case p.Timing == windowing.OnTime && !p.Final && (!trig.OnTime || f < p.End):
			t.Fatalf("pane %d %+v: non-final ON_TIME at frontier %d (on_time: %v)", i, *p, f, trig.OnTime)
		}
		if id := p.ID(); ids[id] {
			t.Fatalf("pane %d %+v: its id %s repeats", i, *p, id)
		} else {
			ids[id] = true
		}
	}
}

// drive assigns parts partitions, feeds recs to eng with a processing-time
// tick after about one record in tickOdds (advancing by up to tickMax ms),
// checkpoints every 37 records, and finishes the input.
func drive(t *testing.T, eng *windowing.Engine, spec windowing.Spec, recs []rec, parts int, rng *rand.Rand, tickOdds, tickMax int) {
	t.Helper()
	for p := 0; p < parts; p++ {
		eng.Assign(int32(p), 0, true)
	}
	now := int64(0)
	for i, r := range recs {
		ev := r.event(len(spec.Aggregates))
		if err := eng.Record(&ev, now); err != nil {
			t.Fatal(err)
		}
		if rng.Intn(tickOdds) == 0 {
			now += int64(rng.Intn(tickMax))
			if err := eng.Tick(now); err != nil {
				t.Fatal(err)
			}
		}
		if i%37 == 0 {
			if err := eng.Checkpoint(false); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := eng.Finish(); err != nil {
		t.Fatal(err)
	}
}
