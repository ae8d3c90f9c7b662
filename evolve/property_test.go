package evolve_test

import (
	"fmt"
	"math"
	"math/rand"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/windowing"
)

// TestCompatibleChangesProperty: random sequences of compatible changes
// (aggregates added, removed, renamed, reordered; the early trigger
// switched; the accumulation mode changed) between restarts over a random
// stream. Every window with records has one final pane, and each
// aggregate, as a consumer reads it from the window's panes by their modes
// (the last accumulating or retracting pane plus the discarding panes
// after it), equals the aggregate over the window's records taken since
// that aggregate was added (all of them for an aggregate there from the
// start), marked partial exactly when the window held records from
// before. Which records are taken (not late) comes from one run without
// restarts.
func TestCompatibleChangesProperty(t *testing.T) {
	seeds := 300
	if testing.Short() || raceEnabled {
		seeds = 30
	}
	for seed := 1; seed <= seeds; seed++ {
		if err := changeScenario(t, int64(seed)); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

type propRecord struct {
	part int32
	key  string
	ts   int64
	v    float64
}

// tracked is an aggregate of the scenario: its spec and the record index
// from which it counts.
type tracked struct {
	id   int // its identity across renames
	spec windowing.AggSpec
	from int
}

func changeScenario(t *testing.T, seed int64) error {
	rng := rand.New(rand.NewSource(seed))
	lateness := []int64{0, 5, 20}[rng.Intn(3)]
	n := 40 + rng.Intn(80)
	var recs []propRecord
	for i := 0; i < n; i++ {
		recs = append(recs, propRecord{part: int32(rng.Intn(2)), key: string(rune('a' + rng.Intn(3))), ts: int64(i) + int64(rng.Intn(15)), v: float64(rng.Intn(50))})
	}
	ops := []windowing.AggOp{windowing.Count, windowing.Sum, windowing.Min, windowing.Max}
	next := 0
	newAgg := func(from int) tracked {
		next++
		op := ops[rng.Intn(len(ops))]
		a := windowing.AggSpec{Name: "a" + strconv.Itoa(next), Op: op}
		if op != windowing.Count {
			a.Field = "v" + strconv.Itoa(next) // a distinct identity: never taken for another's state
		}
		return tracked{id: next, spec: a, from: from}
	}
	aggs := []tracked{newAgg(0), newAgg(0)}
	early := int64(0)
	mode := windowing.Accumulating
	cfgOf := func() *config.Pipeline {
		p := tumbling(10)
		p.Spec.AllowedLateness = lateness
		p.Spec.Trigger.EarlyCount = early
		p.Spec.Mode = mode
		for _, a := range aggs {
			p.Spec.Aggregates = append(p.Spec.Aggregates, a.spec)
		}
		return p
	}

	// Which records are taken: one run without restarts.
	var refPanes []pane
	var refDrops int
	dropped := map[int]bool{}
	refFS := vfs.NewMem()
	refCfg := tumbling(10, agg("n", windowing.Count))
	refCfg.Spec.AllowedLateness = lateness
	ref, err := start(t, refFS, refCfg, &refPanes, &refDrops)
	if err != nil {
		return err
	}
	for i, r := range recs {
		before := refDrops
		ref.recAt(r.part, r.key, r.ts, r.v, i)
		if refDrops > before {
			dropped[i] = true
		}
	}
	ref.finish()

	// The run with changes between restarts; emitted panes remember the
	// configuration they were emitted under.
	fs := vfs.NewMem()
	var panes []pane
	var drops int
	type emitted struct {
		p    pane
		aggs []tracked
	}
	var all []emitted
	cur := aggs
	node, err := start(t, fs, cfgOf(), &panes, &drops)
	if err != nil {
		return err
	}
	take := func() {
		for _, p := range panes {
			all = append(all, emitted{p, cur})
		}
		panes = panes[:0]
	}
	var changes []string
	for i, r := range recs {
		if i > 0 && rng.Intn(8) == 0 {
			node.stop()
			take()
			switch c := rng.Intn(6); {
			case c == 0 || len(aggs) < 2:
				aggs = append(append([]tracked(nil), aggs...), newAgg(i))
				changes = append(changes, fmt.Sprintf("@%d add %s", i, aggs[len(aggs)-1].spec.Name))
			case c == 1:
				k := rng.Intn(len(aggs))
				changes = append(changes, fmt.Sprintf("@%d remove %s", i, aggs[k].spec.Name))
				aggs = append(append([]tracked(nil), aggs[:k]...), aggs[k+1:]...)
			case c == 2:
				k := rng.Intn(len(aggs))
				aggs = append([]tracked(nil), aggs...)
				next++
				old := aggs[k].spec.Name
				aggs[k].spec.Name = "r" + strconv.Itoa(next)
				changes = append(changes, fmt.Sprintf("@%d rename %s %s", i, old, aggs[k].spec.Name))
			case c == 3:
				aggs = append([]tracked(nil), aggs...)
				rng.Shuffle(len(aggs), func(a, b int) { aggs[a], aggs[b] = aggs[b], aggs[a] })
				changes = append(changes, fmt.Sprintf("@%d reorder", i))
			case c == 4:
				mode = windowing.Mode(rng.Intn(3))
				changes = append(changes, fmt.Sprintf("@%d mode %v", i, mode))
			default:
				early = int64(rng.Intn(3))
				changes = append(changes, fmt.Sprintf("@%d early count %d", i, early))
			}
			cur = aggs
			if node, err = start(t, fs, cfgOf(), &panes, &drops); err != nil {
				return fmt.Errorf("%v: %w", changes, err)
			}
		}
		node.recAt(r.part, r.key, r.ts, r.v, i)
	}
	node.finish()
	take()

	// The expected value of aggregate a over window (key, start) from its
	// from, and whether the window had taken records before it.
	expect := func(a tracked, key string, start int64) (string, bool) {
		var cnt int64
		sum, lo, hi := 0.0, math.Inf(1), math.Inf(-1)
		partial := false
		for i, r := range recs {
			if dropped[i] || r.key != key || r.ts < start || r.ts >= start+10 {
				continue
			}
			if i < a.from {
				partial = true
				continue
			}
			cnt++
			sum += r.v
			lo, hi = min(lo, r.v), max(hi, r.v)
		}
		var v windowing.Value
		switch a.spec.Op {
		case windowing.Count:
			v = windowing.Value{Kind: windowing.IntValue, Int: cnt}
		case windowing.Sum:
			v = windowing.Value{Kind: windowing.NumValue, Num: sum}
		case windowing.Min:
			if cnt > 0 {
				v = windowing.Value{Kind: windowing.NumValue, Num: lo}
			}
		case windowing.Max:
			if cnt > 0 {
				v = windowing.Value{Kind: windowing.NumValue, Num: hi}
			}
		}
		return string(windowing.AppendValue(nil, v)), partial
	}
	// What a consumer holds of each (window, aggregate) after each pane.
	type slot struct {
		window string
		agg    int
	}
	held := map[slot]float64{}
	null := map[slot]bool{}
	finals := map[string]bool{}
	for _, e := range all {
		if e.p.retract {
			continue
		}
		w := windowOf(e.p.id)
		for _, a := range e.aggs {
			v, isNull, err := parseValue(e.p.values[a.spec.Name])
			if err != nil {
				return err
			}
			k := slot{w, a.id}
			_, seen := held[k]
			switch {
			case e.p.mode != windowing.Discarding || !seen || null[k]:
				held[k], null[k] = v, isNull
			case isNull:
			case a.spec.Op == windowing.Min:
				held[k] = min(held[k], v)
			case a.spec.Op == windowing.Max:
				held[k] = max(held[k], v)
			default:
				held[k] += v
			}
		}
		if !e.p.final {
			continue
		}
		if finals[e.p.id] {
			return fmt.Errorf("%v: two final panes %s", changes, e.p.id)
		}
		finals[e.p.id] = true
		var key string
		var start, end int64
		var idx int
		if _, err := fmt.Sscanf(e.p.id, "%1s/%d/%d/%d", &key, &start, &end, &idx); err != nil {
			return err
		}
		for _, a := range e.aggs {
			want, partial := expect(a, key, start)
			k := slot{w, a.id}
			got := "null"
			if !null[k] {
				got = string(windowing.AppendValue(nil, valueOf(a.spec.Op, held[k])))
			}
			if got != want {
				return fmt.Errorf("%v: %s: %s = %s as read from its panes, want %s (from record %d)", changes, e.p.id, a.spec.Name, got, want, a.from)
			}
			if isPartial := containsName(e.p.partial, a.spec.Name); isPartial != partial {
				return fmt.Errorf("%v: %s: %s partial %t, want %t (partial %q)", changes, e.p.id, a.spec.Name, isPartial, partial, e.p.partial)
			}
		}
	}
	// Every window with taken records has its final pane.
	for i, r := range recs {
		if dropped[i] {
			continue
		}
		start := r.ts - r.ts%10
		found := false
		for id := range finals {
			var key string
			var s, en int64
			var idx int
			fmt.Sscanf(id, "%1s/%d/%d/%d", &key, &s, &en, &idx)
			if key == r.key && s == start {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("%v: window %s/%d has records but no final pane", changes, r.key, start)
		}
	}
	return nil
}

func containsName(list, name string) bool {
	for _, s := range splitComma(list) {
		if s == name {
			return true
		}
	}
	return false
}

func splitComma(s string) []string {
	var out []string
	for s != "" {
		i := 0
		for i < len(s) && s[i] != ',' {
			i++
		}
		out = append(out, s[:i])
		if i == len(s) {
			break
		}
		s = s[i+1:]
	}
	return out
}

// parseValue reads a pane's aggregate value: a number or null.
func parseValue(s string) (float64, bool, error) {
	if s == "null" {
		return 0, true, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, false, err
}

// valueOf formats v as op's value is formatted in a pane.
func valueOf(op windowing.AggOp, v float64) windowing.Value {
	if op == windowing.Count {
		return windowing.Value{Kind: windowing.IntValue, Int: int64(v)}
	}
	return windowing.Value{Kind: windowing.NumValue, Num: v}
}
