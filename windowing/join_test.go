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

// joinLog records a Joiner's rows with the frontier each came at.
type joinLog struct {
	j       *windowing.Joiner
	rows    []windowing.JoinRow
	at      []int64
	dropped map[string]bool // values of dropped records
}

func (l *joinLog) Row(r *windowing.JoinRow) error {
	c := *r
	if r.Left != nil {
		x := *r.Left
		c.Left = &x
	}
	if r.Right != nil {
		x := *r.Right
		c.Right = &x
	}
	l.rows = append(l.rows, c)
	l.at = append(l.at, l.j.Frontier())
	return nil
}

func (l *joinLog) Dropped(ev *windowing.Event, _ windowing.DropReason, _ windowing.Span) error {
	l.dropped[ev.Value] = true
	return nil
}

type joinIn struct {
	side  int
	key   string
	t     int64
	value string
	f     int64 // the frontier when it arrived
}

func rowText(key string, left, right string, start, end int64) string {
	return fmt.Sprintf("%s %s|%s [%d,%d)", key, left, right, start, end)
}

func side(r *windowing.JoinRecord) string {
	if r == nil {
		return "-"
	}
	return r.Value
}

// TestJoinEqualsBruteForce: over random two-input streams (two partitions
// each, out of order, some records late past allowed_lateness, processing
// time ticking early rows), every join kind, interval and window joins,
// the rows a Joiner emits are a brute-force join of the records it took:
// every match once, no spurious and no duplicate row, each unmatched row
// of a record without a match once, final, and only at a frontier past
// the record's last chance to match; an early unmatched row is retracted
// when a match comes, and followed by the final one otherwise.
func TestJoinEqualsBruteForce(t *testing.T) {
	kinds := []windowing.JoinKind{windowing.InnerJoin, windowing.LeftJoin, windowing.FullJoin}
	type shape struct {
		name string
		spec windowing.JoinSpec
	}
	shapes := []shape{
		{"interval[0,15]", windowing.JoinSpec{Interval: true, Lower: 0, Upper: 15}},
		{"interval[-5,10]", windowing.JoinSpec{Interval: true, Lower: -5, Upper: 10}},
		{"tumbling20", windowing.JoinSpec{Window: windowing.WindowSpec{Kind: windowing.Tumbling, Size: 20, Hop: 20}}},
		{"hopping20/5", windowing.JoinSpec{Window: windowing.WindowSpec{Kind: windowing.Hopping, Size: 20, Hop: 5}}},
	}
	for _, sh := range shapes {
		for _, kind := range kinds {
			for seed := uint64(1); seed <= 25; seed++ {
				t.Run(fmt.Sprintf("%s/%s/%d", sh.name, kind, seed), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(seed, 11))
					spec := sh.spec
					spec.Kind, spec.Left, spec.Right = kind, 0, 1
					spec.AllowedLateness = int64(rng.IntN(3)) * 4
					if rng.IntN(2) == 0 {
						spec.EarlyEvery = 3
					}
					log := &joinLog{dropped: map[string]bool{}}
					j, err := windowing.NewJoiner(spec, watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, MaxDelay: int64(rng.IntN(6))}, log, windowing.JoinOptions{})
					if err != nil {
						t.Fatal(err)
					}
					log.j = j
					for p := range int32(4) {
						j.Assign(p, 0, true)
					}
					var ins []joinIn
					now, base := int64(0), [2]int64{}
					for i := range 120 {
						s := rng.IntN(2)
						base[s] += int64(rng.IntN(4))
						ts := base[s] - int64(rng.IntN(12))
						key := fmt.Sprintf("k%d", rng.IntN(3))
						v := fmt.Sprintf("%c%d", "LR"[s], i)
						ins = append(ins, joinIn{s, key, ts, v, j.Frontier()})
						ev := &windowing.Event{Partition: int32(rng.IntN(2)*2 + s), Offset: int64(i), Key: key, Time: ts, Input: int32(s), Value: v}
						if err := j.Record(ev, now); err != nil {
							t.Fatal(err)
						}
						if rng.IntN(4) == 0 {
							now += int64(rng.IntN(4))
							if err := j.Tick(now); err != nil {
								t.Fatal(err)
							}
						}
					}
					if err := j.Finish(); err != nil {
						t.Fatal(err)
					}
					if j.Held() != 0 {
						t.Fatalf("%d records held at the end", j.Held())
					}
					L := spec.AllowedLateness
					expired := func(f, end int64) bool { return f >= end+L }
					outer := func(s int) bool { return kind == windowing.FullJoin || (kind == windowing.LeftJoin && s == 0) }
					// The brute force, over the records the Joiner took.
					var want []string
					lastChance := map[string]int64{} // unmatched row text -> its last chance
					if spec.Interval {
						matched := map[string]bool{}
						for _, l := range ins {
							if l.side != 0 || log.dropped[l.value] {
								continue
							}
							for _, r := range ins {
								if r.side != 1 || log.dropped[r.value] || r.key != l.key || r.t-l.t < spec.Lower || r.t-l.t > spec.Upper {
									continue
								}
								want = append(want, rowText(l.key, l.value, r.value, l.t+spec.Lower, l.t+spec.Upper+1))
								matched[l.value], matched[r.value] = true, true
							}
						}
						for _, x := range ins {
							if log.dropped[x.value] || matched[x.value] || !outer(x.side) {
								continue
							}
							lo, hi := x.t+spec.Lower, x.t+spec.Upper+1
							row := rowText(x.key, x.value, "-", lo, hi)
							if x.side == 1 {
								lo, hi = x.t-spec.Upper, x.t-spec.Lower+1
								row = rowText(x.key, "-", x.value, lo, hi)
							}
							want = append(want, row)
							lastChance[row] = hi + L
						}
					} else {
						a := windowing.NewAssigner(spec.Window)
						type member struct {
							joinIn
							start, end int64
						}
						var in []member
						for _, x := range ins {
							for _, sp := range a.Windows(nil, x.t) {
								if !expired(x.f, sp.End) {
									in = append(in, member{x, sp.Start, sp.End})
								}
							}
						}
						matched := map[string]bool{}
						for _, l := range in {
							for _, r := range in {
								if l.side == 0 && r.side == 1 && l.key == r.key && l.start == r.start {
									want = append(want, rowText(l.key, l.value, r.value, l.start, l.end))
									matched[fmt.Sprint(l.value, l.start)], matched[fmt.Sprint(r.value, r.start)] = true, true
								}
							}
						}
						for _, x := range in {
							if matched[fmt.Sprint(x.value, x.start)] || !outer(x.side) {
								continue
							}
							row := rowText(x.key, x.value, "-", x.start, x.end)
							if x.side == 1 {
								row = rowText(x.key, "-", x.value, x.start, x.end)
							}
							want = append(want, row)
							lastChance[row] = x.end + L
						}
					}
					// The rows: early ones apart.
					var got []string
					open := map[string]int{} // early rows shown and not retracted nor followed by their final row
					for i, r := range log.rows {
						row := rowText(r.Key, side(r.Left), side(r.Right), r.Start, r.End)
						switch {
						case r.Retraction:
							if open[row] == 0 {
								t.Fatalf("a retraction of a row never shown early: %s", row)
							}
							open[row]--
						case !r.Final:
							// Shown early: EARLY, or LATE past its end.
							if r.Left != nil && r.Right != nil || spec.EarlyEvery == 0 || (r.Timing == windowing.Early) != (log.at[i] < r.End) {
								t.Fatalf("an early row that is a match, without early.every, or of a wrong timing: %+v at frontier %d", r, log.at[i])
							}
							open[row]++
						default:
							if r.Timing == windowing.Early || (r.Left != nil && r.Right != nil && log.at[i] >= r.End && r.Timing != windowing.Late) {
								t.Fatalf("a match's timing is not its frontier's: %+v at frontier %d", r, log.at[i])
							}
							if r.Left == nil || r.Right == nil {
								if lc, ok := lastChance[row]; ok && log.at[i] < lc {
									t.Fatalf("unmatched row %s at frontier %d, before its last chance %d", row, log.at[i], lc)
								}
								open[row] = 0
							}
							got = append(got, row)
						}
					}
					for row, n := range open {
						if n != 0 {
							t.Errorf("early row %s neither retracted nor made final", row)
						}
					}
					slices.Sort(got)
					slices.Sort(want)
					if !slices.Equal(got, want) {
						t.Fatalf("rows differ from the brute force\n got: %s\nwant: %s", strings.Join(got, "; "), strings.Join(want, "; "))
					}
				})
			}
		}
	}
}

// TestJoinEarlyTimersBounded: with early rows and processing time standing
// still (a replay without clock lines), the timers of records already let
// go do not pile up with the stream: the Joiner's memory stays bounded by
// the records it holds.
func TestJoinEarlyTimersBounded(t *testing.T) {
	log := &joinLog{dropped: map[string]bool{}}
	j, err := windowing.NewJoiner(windowing.JoinSpec{Kind: windowing.LeftJoin, Interval: true, Lower: 0, Upper: 10, EarlyEvery: 1000},
		watermark.Spec{Strategy: watermark.BoundedOutOfOrderness}, log, windowing.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	log.j = j
	j.Assign(0, 0, true)
	j.Assign(1, 0, true)
	most := 0
	for i := range 100_000 {
		for s := range 2 {
			ev := &windowing.Event{Partition: int32(s), Key: fmt.Sprint("k", i%7), Time: int64(i), Input: int32(s), Value: "{}"}
			if err := j.Record(ev, 0); err != nil {
				t.Fatal(err)
			}
		}
		most = max(most, j.EarlyTimers())
	}
	if most > 200 {
		t.Fatalf("%d early timers at most, holding %d records", most, j.Held())
	}
}

// TestJoinRestoredEqualsUninterrupted: a Joiner that keeps its records in
// a store (the Kafka service's), checkpointed and made again from the
// store at random points (a restart), and whose partitions' records move
// out and back through KeyState, DropShard and RestoreKey (a rebalance),
// emits the same rows, timings and flags included, each key's in the same
// order, as one that ran without a break, for every join kind, interval
// and window joins, with early rows.
func TestJoinRestoredEqualsUninterrupted(t *testing.T) {
	shapes := []windowing.JoinSpec{
		{Interval: true, Lower: -5, Upper: 10},
		{Window: windowing.WindowSpec{Kind: windowing.Hopping, Size: 20, Hop: 5}},
	}
	for _, spec := range shapes {
		for _, kind := range []windowing.JoinKind{windowing.InnerJoin, windowing.LeftJoin, windowing.FullJoin} {
			for seed := uint64(1); seed <= 20; seed++ {
				t.Run(fmt.Sprintf("interval=%v/%s/%d", spec.Interval, kind, seed), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(seed, 7))
					spec := spec
					spec.Kind, spec.Left, spec.Right = kind, 0, 1
					spec.AllowedLateness = int64(rng.IntN(3)) * 4
					spec.EarlyEvery = int64(rng.IntN(2)) * 3
					wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, MaxDelay: int64(rng.IntN(6))}
					const parts = 3
					type in struct {
						ev   windowing.Event
						tick int64 // processing time after the record (0: none)
						op   int   // 1: restart after it, 2: move a partition after it
					}
					var ins []in
					now, base := int64(0), [2]int64{}
					for i := range 150 {
						s := rng.IntN(2)
						base[s] += int64(rng.IntN(4))
						k := rng.IntN(5)
						x := in{ev: windowing.Event{Partition: int32(k % parts), Offset: int64(i), Key: fmt.Sprint("k", k),
							Time: base[s] - int64(rng.IntN(12)), Input: int32(s), Value: fmt.Sprintf("%c%d", "LR"[s], i)}}
						if rng.IntN(4) == 0 {
							now += int64(rng.IntN(4))
							x.tick = now
						}
						if rng.IntN(15) == 0 {
							x.op = 1 + rng.IntN(2)
						}
						ins = append(ins, x)
					}
					// The rows in the order each key's came (the order across
					// keys is the shards').
					text := func(rows []windowing.JoinRow) []string {
						byKey := map[string][]string{}
						for _, r := range rows {
							byKey[r.Key] = append(byKey[r.Key], fmt.Sprintf("%s|%s [%d,%d) %s final=%v retraction=%v",
								side(r.Left), side(r.Right), r.Start, r.End, r.Timing, r.Final, r.Retraction))
						}
						var out []string
						for k := range 5 {
							key := fmt.Sprint("k", k)
							out = append(out, key+": "+strings.Join(byKey[key], "; "))
						}
						return out
					}
					step := func(j *windowing.Joiner, x *in) {
						ev := x.ev
						if err := j.Record(&ev, x.tick); err != nil {
							t.Fatal(err)
						}
						if x.tick > 0 {
							if err := j.Tick(x.tick); err != nil {
								t.Fatal(err)
							}
						}
					}
					// Without a break.
					want := &joinLog{dropped: map[string]bool{}}
					j, err := windowing.NewJoiner(spec, wm, want, windowing.JoinOptions{})
					if err != nil {
						t.Fatal(err)
					}
					want.j = j
					for p := range int32(parts) {
						j.Assign(p, 0, true)
					}
					for i := range ins {
						step(j, &ins[i])
					}
					if err := j.Finish(); err != nil {
						t.Fatal(err)
					}
					// With restarts and moves.
					db, err := state.Open("db", state.Options{FS: vfs.NewMem()})
					if err != nil {
						t.Fatal(err)
					}
					defer db.Close()
					got := &joinLog{dropped: map[string]bool{}}
					open := func() *windowing.Joiner {
						j, err := windowing.NewJoiner(spec, wm, got, windowing.JoinOptions{ShardByPartition: true, Store: db})
						if err != nil {
							t.Fatal(err)
						}
						got.j = j
						for p := range int32(parts) {
							j.Assign(p, 0, true)
						}
						if err := j.FireDue(); err != nil {
							t.Fatal(err)
						}
						return j
					}
					j = open()
					restarts, moves := 0, 0
					for i := range ins {
						step(j, &ins[i])
						switch ins[i].op {
						case 1:
							if err := j.Checkpoint(false); err != nil {
								t.Fatal(err)
							}
							j = open()
							restarts++
						case 2:
							p := int32(rng.IntN(parts))
							values := map[string][]byte{}
							for k := range 5 {
								key := fmt.Sprint("k", k)
								if v, err := j.KeyState(p, key); err != nil {
									t.Fatal(err)
								} else if v != nil {
									values[key] = v
								}
							}
							g, _ := j.Watermarks().Generator(p)
							j.Revoke(p)
							if err := j.DropShard(p); err != nil {
								t.Fatal(err)
							}
							for key, v := range values {
								if err := j.RestoreKey(p, key, v); err != nil {
									t.Fatal(err)
								}
							}
							j.Watermarks().RestoreGenerator(p, g)
							j.Assign(p, ins[i].tick, true)
							if err := j.FireDue(); err != nil {
								t.Fatal(err)
							}
							moves++
						}
					}
					if err := j.Finish(); err != nil {
						t.Fatal(err)
					}
					if j.Held() != 0 {
						t.Fatalf("%d records held at the end", j.Held())
					}
					if w, g := text(want.rows), text(got.rows); !slices.Equal(w, g) {
						t.Fatalf("after %d restarts and %d moves the rows differ\n got: %s\nwant: %s", restarts, moves, strings.Join(g, "; "), strings.Join(w, "; "))
					}
				})
			}
		}
	}
}

// TestJoinNeedsCheckpoint: with a store, the records a Joiner took since
// its last Flush count against MaxPendingBytes, so a long poll of a join
// ends its commit cycle as an engine's does; a checkpoint starts over.
func TestJoinNeedsCheckpoint(t *testing.T) {
	j, _, _ := storedJoiner(t, windowing.JoinSpec{Kind: windowing.LeftJoin, Interval: true, Lower: 0, Upper: 1000},
		watermark.Spec{Strategy: watermark.BoundedOutOfOrderness}, windowing.JoinOptions{MaxPendingBytes: 4 << 10})
	j.Assign(0, 0, true)
	value := `{"pad":"` + strings.Repeat("x", 100) + `"}`
	n := 0
	for ; !j.NeedsCheckpoint(); n++ {
		if n > 100 {
			t.Fatalf("no checkpoint needed after %d records of %d bytes", n, len(value))
		}
		if err := j.Record(&windowing.Event{Key: fmt.Sprint("k", n%3), Time: int64(n), Value: value}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if n < 10 {
		t.Fatalf("a checkpoint needed after %d records of %d bytes, below 4 KiB", n, len(value))
	}
	if err := j.Checkpoint(false); err != nil {
		t.Fatal(err)
	}
	if j.NeedsCheckpoint() {
		t.Fatal("a checkpoint still needed after one")
	}
}

// TestJoinRestoreKeyTimersBounded: a standby's shard never fires, and
// RestoreKey replaces a key's records at every changelog batch that
// changed it; the replaced records' expiry timers must not pile up with
// the batches (they kept the records' values alive: memory grew with the
// changelog's traffic).
func TestJoinRestoreKeyTimersBounded(t *testing.T) {
	for _, spec := range []windowing.JoinSpec{
		{Kind: windowing.LeftJoin, Interval: true, Lower: 0, Upper: 1000},
		{Kind: windowing.LeftJoin, Window: windowing.WindowSpec{Kind: windowing.Hopping, Size: 100, Hop: 10}},
	} {
		db, err := state.Open("db", state.Options{FS: vfs.NewMem()})
		if err != nil {
			t.Fatal(err)
		}
		log := &joinLog{dropped: map[string]bool{}}
		src, err := windowing.NewJoiner(spec, watermark.Spec{Strategy: watermark.BoundedOutOfOrderness}, log, windowing.JoinOptions{})
		if err != nil {
			t.Fatal(err)
		}
		log.j = src
		src.Assign(0, 0, true)
		for i := range 50 {
			if err := src.Record(&windowing.Event{Key: "a", Time: int64(i), Value: "{}"}, 0); err != nil {
				t.Fatal(err)
			}
		}
		value, err := src.KeyState(0, "a")
		if err != nil || value == nil {
			t.Fatalf("key state: %v %v", value, err)
		}
		standby, err := windowing.NewJoiner(spec, watermark.Spec{Strategy: watermark.BoundedOutOfOrderness}, log,
			windowing.JoinOptions{ShardByPartition: true, Store: db})
		if err != nil {
			t.Fatal(err)
		}
		once := 0
		for i := range 1000 {
			if err := standby.RestoreKey(0, "a", value); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				once = standby.ExpiryTimers()
			}
		}
		// Dropped timers go once they outnumber the live ones by 128:
		// bounded by the key's records, not by the restores.
		if standby.Held() != src.Held() || standby.ExpiryTimers() > 2*once+130 {
			t.Fatalf("interval %v: after 1000 restores of one key: %d held (want %d), %d expiry timers (%d after one)",
				spec.Interval, standby.Held(), src.Held(), standby.ExpiryTimers(), once)
		}
		db.Close()
	}
}

// TestJoinSealedAfterLatenessGrows: allowed_lateness grows while a join
// is stopped. A record whose partners may have been let go under the old
// lateness is dropped as late instead of taken: a right record matching
// a left one already emitted unmatched would otherwise be emitted
// unmatched too (full join), though the two match. The bound comes from
// the start's Evolution, or, for state taken from a changelog written
// under the old lateness, from Rearm with the writer's frontier.
func TestJoinSealedAfterLatenessGrows(t *testing.T) {
	for _, how := range []string{"start", "restore"} {
		t.Run(how, func(t *testing.T) {
			spec := windowing.JoinSpec{Kind: windowing.FullJoin, Interval: true, Lower: 0, Upper: 10, Left: 0, Right: 1}
			wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness}
			j, log, db := storedJoiner(t, spec, wm, windowing.JoinOptions{})
			j.Assign(0, 0, true)
			for _, ev := range []windowing.Event{{Key: "a", Time: 0, Value: "L0"}, {Key: "b", Time: 100, Value: "L100"}} {
				if err := j.Record(&ev, 0); err != nil {
					t.Fatal(err)
				}
			}
			if len(log.rows) != 1 || log.rows[0].Left.Value != "L0" {
				t.Fatalf("rows %+v, want L0 unmatched", log.rows)
			}
			f := j.Frontier()
			if err := j.Checkpoint(false); err != nil {
				t.Fatal(err)
			}
			spec.AllowedLateness = 200
			opts := windowing.JoinOptions{ShardByPartition: true, Store: db}
			if how == "start" {
				opts.Evolve = &windowing.Evolution{Sealed: watermark.MinTime, Rearm: true, PriorLateness: 0}
			}
			j, err := windowing.NewJoiner(spec, wm, log, opts)
			if err != nil {
				t.Fatal(err)
			}
			log.j = j
			if how == "restore" {
				if err := j.Rearm(0, f); err != nil {
					t.Fatal(err)
				}
			}
			j.Assign(0, 0, true)
			if err := j.Record(&windowing.Event{Key: "a", Time: 5, Input: 1, Value: "R5"}, 0); err != nil {
				t.Fatal(err)
			}
			if !log.dropped["R5"] || len(log.rows) != 1 {
				t.Fatalf("R5 dropped %v, rows %d: want R5 dropped as late, no row for it", log.dropped["R5"], len(log.rows))
			}
			if j.Sealed() != f { // the frontier minus the old lateness, 0
				t.Fatalf("sealed %d, want the frontier %d", j.Sealed(), f)
			}
		})
	}
}

// TestJoinRestartKeepsArrivalOrder: unmatched rows due at one frontier
// step come in the order their records (window joins: their windows)
// arrived, also when the Joiner was made again from its store in between
// (it read the keys in key order).
func TestJoinRestartKeepsArrivalOrder(t *testing.T) {
	db, err := state.Open("db", state.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	spec := windowing.JoinSpec{Kind: windowing.LeftJoin, Window: windowing.WindowSpec{Kind: windowing.Tumbling, Size: 10, Hop: 10}, Left: 0, Right: 1}
	wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness}
	log := &joinLog{dropped: map[string]bool{}}
	opts := windowing.JoinOptions{ShardByPartition: true, Store: db}
	j, err := windowing.NewJoiner(spec, wm, log, opts)
	if err != nil {
		t.Fatal(err)
	}
	j.Assign(0, 0, true)
	for i, key := range []string{"z", "m", "a"} {
		if err := j.Record(&windowing.Event{Key: key, Time: int64(i), Value: key}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Checkpoint(false); err != nil {
		t.Fatal(err)
	}
	if j, err = windowing.NewJoiner(spec, wm, log, opts); err != nil {
		t.Fatal(err)
	}
	log.j = j
	j.Assign(0, 0, true)
	if err := j.Record(&windowing.Event{Key: "later", Time: 20, Value: "later"}, 0); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range log.rows {
		got = append(got, r.Key)
	}
	if strings.Join(got, ",") != "z,m,a" {
		t.Fatalf("unmatched rows of [0,10) in the order %v, want z,m,a (arrival)", got)
	}
}

// TestJoinNeedsCheckpointCountsWholeKey: a key's stored value is all its
// held records, rewritten whole at every Flush that finds it changed, so
// NeedsCheckpoint counts them all, not only the change. With one key
// holding 1 MB of records, ten small records more must ask for a
// checkpoint at a 16 KiB bound; it said no, and the Flush wrote 62 times
// the bound (found by a review).
func TestJoinNeedsCheckpointCountsWholeKey(t *testing.T) {
	const bound = 16 << 10
	j, _, db := storedJoiner(t, windowing.JoinSpec{Kind: windowing.LeftJoin, Interval: true, Lower: 0, Upper: 1 << 40},
		watermark.Spec{Strategy: watermark.BoundedOutOfOrderness}, windowing.JoinOptions{MaxPendingBytes: bound})
	j.Assign(0, 0, true)
	value := `{"pad":"` + strings.Repeat("x", 1000) + `"}`
	n := 0
	for ; n < 1000; n++ {
		if err := j.Record(&windowing.Event{Key: "hot", Time: int64(n), Value: value}, 0); err != nil {
			t.Fatal(err)
		}
		if j.NeedsCheckpoint() {
			if err := j.Checkpoint(false); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := j.Checkpoint(false); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := j.Record(&windowing.Event{Key: "hot", Time: int64(n + i), Value: `{}`}, 0); err != nil {
			t.Fatal(err)
		}
	}
	needs := j.NeedsCheckpoint()
	if err := j.Flush(); err != nil {
		t.Fatal(err)
	}
	if p := db.PendingBytes(); !needs && p >= bound {
		t.Fatalf("NeedsCheckpoint false at a %d-byte bound, then Flush left %d bytes pending (%dx the bound)", bound, p, p/bound)
	}
}

// storedJoiner is a Joiner sharded by partition over an in-memory store
// (closed with the test), with opts besides, and the log of its rows.
func storedJoiner(t *testing.T, spec windowing.JoinSpec, wm watermark.Spec, opts windowing.JoinOptions) (*windowing.Joiner, *joinLog, *state.DB) {
	t.Helper()
	db, err := state.Open("db", state.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	log := &joinLog{dropped: map[string]bool{}}
	opts.ShardByPartition, opts.Store = true, db
	j, err := windowing.NewJoiner(spec, wm, log, opts)
	if err != nil {
		t.Fatal(err)
	}
	log.j = j
	return j, log, db
}
