package windowing_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// TestJoinMoveEqualsStay: under a marked frontier (stage 2 of a
// repartitioned join, as run uses: every partition gets the same marks) a
// partition moves away and back (its keys' state captured with KeyState,
// the shard dropped, restored, gated with CatchUp while its marks are
// behind, released), as on a rebalance; the rows are those of the run
// without a move, with lateness 0 their timing too (docs/SEMANTICS.md,
// Joins). Before restored shards judged last chances from below, 47 of
// these cases had an ON_TIME row LATE.
func TestJoinMoveEqualsStay(t *testing.T) {
	shapes := []windowing.JoinSpec{
		{Interval: true, Lower: -5, Upper: 10},
		{Interval: true, Lower: 0, Upper: 15},
		{Window: windowing.WindowSpec{Kind: windowing.Hopping, Size: 20, Hop: 5}},
		{Window: windowing.WindowSpec{Kind: windowing.Tumbling, Size: 10, Hop: 10}},
	}
	for _, spec := range shapes {
		for _, kind := range []windowing.JoinKind{windowing.InnerJoin, windowing.LeftJoin, windowing.FullJoin} {
			for seed := uint64(1); seed <= 40; seed++ {
				t.Run(fmt.Sprintf("interval=%v/%s/%d", spec.Interval, kind, seed), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(seed, 13))
					spec := spec
					spec.Kind, spec.Left, spec.Right = kind, 0, 1
					spec.AllowedLateness = int64(rng.IntN(2)) * 4
					wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, Marked: true}
					const parts = 3
					type ev struct {
						rec  *windowing.Event
						mark int64 // rec nil: a mark of partition part
						part int32
					}
					var evs []ev
					base, maxT := [2]int64{}, int64(-1000)
					delay := int64(rng.IntN(6))
					for i := range 150 {
						s := rng.IntN(2)
						base[s] += int64(rng.IntN(4))
						k := rng.IntN(5)
						e := &windowing.Event{Partition: int32(k % parts), Offset: int64(i), Key: fmt.Sprint("k", k),
							Time: base[s] - int64(rng.IntN(12)), Input: int32(s), Value: fmt.Sprintf("%c%d", "LR"[s], i)}
						evs = append(evs, ev{rec: e, part: e.Partition})
						maxT = max(maxT, e.Time)
						if rng.IntN(3) == 0 {
							for p := range int32(parts) {
								evs = append(evs, ev{mark: maxT - delay, part: p})
							}
						}
					}
					do := func(j *windowing.Joiner, e ev) {
						if e.rec != nil {
							x := *e.rec
							if err := j.Record(&x, 0); err != nil {
								t.Fatal(err)
							}
							return
						}
						j.Watermarks().Mark(e.part, e.mark)
						if err := j.Advance(); err != nil {
							t.Fatal(err)
						}
					}
					want := &joinLog{dropped: map[string]bool{}}
					j, err := windowing.NewJoiner(spec, wm, want, windowing.JoinOptions{})
					if err != nil {
						t.Fatal(err)
					}
					want.j = j
					for p := range int32(parts) {
						j.Assign(p, 0, true)
					}
					for _, e := range evs {
						do(j, e)
					}
					if err := j.Finish(); err != nil {
						t.Fatal(err)
					}

					db, err := state.Open("db", state.Options{FS: vfs.NewMem()})
					if err != nil {
						t.Fatal(err)
					}
					defer db.Close()
					got := &joinLog{dropped: map[string]bool{}}
					j, err = windowing.NewJoiner(spec, wm, got, windowing.JoinOptions{ShardByPartition: true, Store: db})
					if err != nil {
						t.Fatal(err)
					}
					got.j = j
					for p := range int32(parts) {
						j.Assign(p, 0, true)
					}
					moves, gates := 0, 0
					moving := int32(-1)
					var deferred []ev
					var saved map[string][]byte
					var savedGen watermark.Generator
					gated := map[int32]int64{}
					release := func() {
						for p, f := range gated {
							g, _ := j.Watermarks().Generator(p)
							if g.Watermark >= f {
								delete(gated, p)
								if err := j.ReleaseTimers(p); err != nil {
									t.Fatal(err)
								}
							}
						}
					}
					back := func() {
						p := moving
						moving = -1
						if err := j.DropShard(p); err != nil {
							t.Fatal(err)
						}
						for key, v := range saved {
							if err := j.RestoreKey(p, key, v); err != nil {
								t.Fatal(err)
							}
						}
						j.Watermarks().RestoreGenerator(p, savedGen)
						j.Assign(p, 0, false)
						if f := j.Frontier(); f > watermark.MinTime && savedGen.Watermark < f {
							j.CatchUp(p)
							gated[p] = f
							gates++
						}
						if err := j.FireDue(); err != nil {
							t.Fatal(err)
						}
						for _, e := range deferred {
							do(j, e)
							release()
						}
						deferred = nil
						moves++
					}
					for i, e := range evs {
						if e.part == moving {
							deferred = append(deferred, e)
						} else {
							do(j, e)
							release()
						}
						if moving >= 0 && rng.IntN(10) == 0 {
							back()
						}
						if moving < 0 && len(gated) == 0 && rng.IntN(25) == 0 && i < len(evs)-1 {
							p := int32(rng.IntN(parts))
							if err := j.Flush(); err != nil {
								t.Fatal(err)
							}
							saved = map[string][]byte{}
							for k := range 5 {
								key := fmt.Sprint("k", k)
								if v, err := j.KeyState(p, key); err != nil {
									t.Fatal(err)
								} else if v != nil {
									saved[key] = v
								}
							}
							savedGen, _ = j.Watermarks().Generator(p)
							j.Revoke(p)
							if err := j.Advance(); err != nil { // as the next record would
								t.Fatal(err)
							}
							moving = p
						}
					}
					if moving >= 0 {
						back()
					}
					for p := range gated {
						delete(gated, p)
						if err := j.ReleaseTimers(p); err != nil {
							t.Fatal(err)
						}
					}
					if err := j.Finish(); err != nil {
						t.Fatal(err)
					}
					if j.Held() != 0 {
						t.Fatalf("%d records held at the end", j.Held())
					}
					timing := spec.AllowedLateness == 0
					text := func(rows []windowing.JoinRow) []string {
						byKey := map[string][]string{}
						for _, r := range rows {
							s := fmt.Sprintf("%s|%s [%d,%d) final=%v retraction=%v", side(r.Left), side(r.Right), r.Start, r.End, r.Final, r.Retraction)
							if timing {
								s += " " + r.Timing.String()
							}
							byKey[r.Key] = append(byKey[r.Key], s)
						}
						var out []string
						for k := range 5 {
							key := fmt.Sprint("k", k)
							out = append(out, key+": "+strings.Join(byKey[key], "; "))
						}
						return out
					}
					if w, g := text(want.rows), text(got.rows); !slices.Equal(w, g) {
						for x := range w {
							if w[x] != g[x] {
								t.Fatalf("L=%d after %d moves (%d gated) the rows differ\n got: %s\nwant: %s", spec.AllowedLateness, moves, gates, g[x], w[x])
							}
						}
					}
				})
			}
		}
	}
}

// TestJoinRestoredShardTiming: allowed_lateness 0. Partition 0 moves from
// instance A (frontier held at 20 by its partition 1) to instance B
// (frontier 42, not behind p0's watermark 45: no CatchUp). The left record
// at 30, interval [30,41), is let go by B's first step; the old owner and
// replay emit it ON_TIME (the step that passes 41 comes from below 41), and
// so must B: docs/SEMANTICS.md, Joins, "with allowed_lateness: 0s the
// timing is always the same". A shard a restore makes judged the step from
// B's frontier, and wrote LATE.
func TestJoinRestoredShardTiming(t *testing.T) {
	spec := windowing.JoinSpec{Kind: windowing.LeftJoin, Interval: true, Lower: 0, Upper: 10, Left: 0, Right: 1}
	wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness}

	// Instance A: p0 and p1.
	a, logA, _ := storedJoiner(t, spec, wm, windowing.JoinOptions{})
	a.Assign(0, 0, true)
	a.Assign(1, 0, true)
	for _, ev := range []windowing.Event{
		{Partition: 1, Key: "z", Time: 20, Value: "L20"},
		{Partition: 0, Key: "a", Time: 30, Value: "L30"},
		{Partition: 0, Key: "b", Time: 45, Value: "L45"},
	} {
		if err := a.Record(&ev, 0); err != nil {
			t.Fatal(err)
		}
	}
	v, _ := a.KeyState(0, "a")
	g, _ := a.Watermarks().Generator(0)
	// What A (and replay) emit for L30 once its frontier passes 41.
	if err := a.Record(&windowing.Event{Partition: 1, Key: "z", Time: 42, Value: "L42"}, 0); err != nil {
		t.Fatal(err)
	}
	for _, r := range logA.rows {
		if r.Left.Value == "L30" {
			t.Logf("old owner: L30 %s", r.Timing)
		}
	}

	// Instance B: its own p2 at 42; restores p0 as the service does
	// (RestoreKey while held, RestoreGenerator, Assign, gateIfBehind, FireDue).
	b, logB, _ := storedJoiner(t, spec, wm, windowing.JoinOptions{})
	b.Assign(2, 0, true)
	if err := b.Record(&windowing.Event{Partition: 2, Key: "y", Time: 42, Value: "L42b"}, 0); err != nil {
		t.Fatal(err)
	}
	b.Watermarks().HoldRestoring(0)
	if err := b.RestoreKey(0, "a", v); err != nil {
		t.Fatal(err)
	}
	b.Watermarks().RestoreGenerator(0, g)
	b.Assign(0, 0, false)
	if f := b.Frontier(); g.Watermark < f {
		b.CatchUp(0) // not taken: 45 >= 42
	}
	if err := b.FireDue(); err != nil {
		t.Fatal(err)
	}
	for _, r := range logB.rows {
		if r.Left.Value == "L30" && r.Timing != windowing.OnTime {
			t.Fatalf("new owner: L30's unmatched row %s at frontier %d, old owner and replay: ON_TIME", r.Timing, b.Frontier())
		}
	}
}
