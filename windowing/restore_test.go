package windowing_test

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tidwall/gjson"

	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// paneLines renders panes as the output topic's JSON values.
func paneLines(spec windowing.Spec, panes []windowing.Pane) []string {
	out := make([]string, len(panes))
	for i := range panes {
		out[i] = string(windowing.AppendJSON(nil, &panes[i], spec.Aggregates))
	}
	return out
}

// samePanes fails t at the first pane where got and want (pane lines, in
// emission order) differ, or where one of them ends first.
func samePanes(t *testing.T, what string, got, want []string) {
	t.Helper()
	for i := 0; i < max(len(got), len(want)); i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Fatalf("pane %d of %d %s (%d):\n got  %s\n want %s", i, len(got), what, len(want), g, w)
		}
	}
}

type restoreRun struct {
	t    *testing.T
	spec windowing.Spec
	wm   watermark.Spec
	db   *state.DB
	eng  *windowing.Engine
	col  collector
	keys map[string]bool
}

func newRestoreRun(t *testing.T, spec windowing.Spec, wm watermark.Spec, cache int) *restoreRun {
	db, err := state.Open("db", state.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	r := &restoreRun{t: t, spec: spec, wm: wm, db: db, keys: map[string]bool{}}
	r.eng, err = windowing.New(spec, wm, db, &r.col, windowing.Options{ShardByPartition: true, CacheBytes: cache})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// feed processes recs at processing times starting from now, ticking every
// few records, and returns the processing time reached.
func (r *restoreRun) feed(recs []rec, now int64) int64 {
	for i, x := range recs {
		ev := x.event(len(r.spec.Aggregates))
		r.keys[x.key] = true
		if err := r.eng.Record(&ev, now); err != nil {
			r.t.Fatal(err)
		}
		if i%7 == 0 {
			now += 40
			if err := r.eng.Tick(now); err != nil {
				r.t.Fatal(err)
			}
		}
	}
	return now
}

// changelog is what a changelog partition holds after a commit cycle: the
// latest value of every key the partition ever wrote (nil once deleted)
// and the partition's generator.
func (r *restoreRun) changelog(p int32) (map[string][]byte, watermark.Generator) {
	if err := r.eng.Checkpoint(false); err != nil {
		r.t.Fatal(err)
	}
	out := map[string][]byte{}
	for k := range r.keys {
		v, err := r.eng.KeyState(p, k)
		if err != nil {
			r.t.Fatal(err)
		}
		out[k] = v
	}
	g, _ := r.eng.Watermarks().Generator(p)
	return out, g
}

// restore applies a changelog to r's engine for partition p, in key order.
func (r *restoreRun) restore(p int32, log map[string][]byte, g watermark.Generator, now int64) {
	r.restoreCold(p, []map[string][]byte{log}, g, now, false)
}

// restoreCold applies changelogs one after the other, each in key order, as
// a changelog holding a key once per commit cycle does. With fresh (the
// shard is empty), a key's first value goes through RestoreNewKey, as the
// service's cold restore does.
func (r *restoreRun) restoreCold(p int32, logs []map[string][]byte, g watermark.Generator, now int64, fresh bool) {
	seen := map[string]bool{}
	for _, log := range logs {
		keys := make([]string, 0, len(log))
		for k := range log {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			restore := r.eng.RestoreKey
			if fresh && !seen[k] {
				restore = r.eng.RestoreNewKey
			}
			seen[k] = true
			if err := restore(p, k, log[k]); err != nil {
				r.t.Fatal(err)
			}
			r.keys[k] = true
		}
	}
	r.eng.Assign(p, now, true)
	r.eng.Watermarks().RestoreGenerator(p, g)
	if err := r.eng.FireDue(); err != nil {
		r.t.Fatal(err)
	}
}

// TestRestoredPartitionEmitsIdenticalPanes: a partition whose state moves to
// another engine through its changelog (the latest value of each key and the
// generator) emits exactly the same future panes, byte for byte, as an engine
// that kept it, in every window type and accumulation mode. The new owner
// either starts empty or holds an older copy of the partition (a warm cache
// caught up from the changelog), and both engines run with a tiny cache.
// A cold restore reads two commit cycles' values of the keys, the first of
// each through RestoreNewKey.
func TestRestoredPartitionEmitsIdenticalPanes(t *testing.T) {
	for seed := int64(1); seed <= 60; seed++ {
		rng := rand.New(rand.NewSource(seed))
		spec := randomSpec(rng)
		delay := int64(rng.Intn(800))
		recs := randomStream(rng, 1, 100+rng.Intn(300), delay)
		wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, MaxDelay: delay, Every: int64(1 + rng.Intn(3))}
		warm := seed%2 == 0
		cut := len(recs) / 3 * (1 + rng.Intn(2))
		t.Run(fmt.Sprintf("seed%d-%s-%s-warm=%v", seed, spec.Window.Kind, spec.Mode, warm), func(t *testing.T) {
			cache := 1 + rng.Intn(3000)
			stay := newRestoreRun(t, spec, wm, cache)
			stay.eng.Assign(0, 0, true)
			moved := newRestoreRun(t, spec, wm, cache)
			now := int64(0)
			if warm {
				// The new owner held the partition once, up to an earlier point.
				now = stay.feed(recs[:cut/2], now)
				log, g := stay.changelog(0)
				moved.restore(0, log, g, now)
				moved.eng.Revoke(0)
				now = stay.feed(recs[cut/2:cut], now)
				log, g = stay.changelog(0)
				moved.restore(0, log, g, now)
			} else {
				// A cold restore of a changelog holding keys twice (two
				// commit cycles), their first value restored as new.
				now = stay.feed(recs[:cut/2], now)
				early, _ := stay.changelog(0)
				now = stay.feed(recs[cut/2:cut], now)
				log, g := stay.changelog(0)
				moved.restoreCold(0, []map[string][]byte{early, log}, g, now, true)
			}
			sameAfterMove(t, spec, stay, moved, recs[cut:], now, true)
			if moved.eng.OpenWindows() != 0 {
				t.Fatalf("%d windows open after the end", moved.eng.OpenWindows())
			}
		})
	}
}

// moveCold feeds recs[:cut] to an engine of spec with a cache of cache
// bytes, restores its partition 0 into an empty engine through the
// changelog, and checks that both go on alike on the rest (sameAfterMove;
// finish: and at the end of input).
func moveCold(t *testing.T, spec windowing.Spec, wm watermark.Spec, cache int, recs []rec, cut int, finish bool) {
	t.Helper()
	stay := newRestoreRun(t, spec, wm, cache)
	stay.eng.Assign(0, 0, true)
	moved := newRestoreRun(t, spec, wm, cache)
	now := stay.feed(recs[:cut], 0)
	log, g := stay.changelog(0)
	moved.restoreCold(0, []map[string][]byte{log}, g, now, true)
	sameAfterMove(t, spec, stay, moved, recs[cut:], now, finish)
}

// sameAfterMove checks that moved, which restored stay's partition 0 at
// processing time now, holds as many open windows and emits the same panes
// as stay on the records rest (and, with finish, at the end of input).
func sameAfterMove(t *testing.T, spec windowing.Spec, stay, moved *restoreRun, rest []rec, now int64, finish bool) {
	t.Helper()
	if got, want := moved.eng.OpenWindows(), stay.eng.OpenWindows(); got != want {
		t.Fatalf("restored %d open windows, the original holds %d", got, want)
	}
	before := len(stay.col.panes)
	moved.col.panes = nil
	for _, r := range []*restoreRun{stay, moved} {
		r.feed(rest, now)
		if !finish {
			continue
		}
		if err := r.eng.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	want := paneLines(spec, stay.col.panes[before:])
	got := paneLines(spec, moved.col.panes)
	if len(want) == 0 {
		t.Fatal("no pane after the move: the test shows nothing")
	}
	samePanes(t, "after the move", got, want)
}

// BenchmarkRestoreKeyRepeated restores a changelog in which each of 100k
// keys comes 2.5 times on average, interleaved, as a changelog of 1 s
// commit cycles holds them (bench/restore.sh: 2.51 key records per window):
// every repeat replaces a value whose timer was added by the same restore.
func BenchmarkRestoreKeyRepeated(b *testing.B) {
	spec, wm, value := restoreBenchValue()
	const keys = 100_000
	var order []int
	for round := 0; round < 3; round++ {
		for i := 0; i < keys; i++ {
			if round < 2 || i%2 == 0 {
				order = append(order, (i*7919+round*104729)%keys)
			}
		}
	}
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("user-%08d", i)
	}
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		db, err := state.Open("db", state.Options{FS: vfs.NewMem()})
		if err != nil {
			b.Fatal(err)
		}
		var col collector
		eng, err := windowing.New(spec, wm, db, &col, windowing.Options{ShardByPartition: true})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for _, k := range order {
			if err := eng.RestoreKey(0, names[k], value); err != nil {
				b.Fatal(err)
			}
			if db.PendingBytes() >= 64<<20 {
				if err := db.Commit(false); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StopTimer()
		if eng.OpenWindows() != keys {
			b.Fatalf("%d open windows, want %d", eng.OpenWindows(), keys)
		}
		db.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(len(order))*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// restoreBenchValue is the restore benchmarks' pipeline (tumbling 1 h,
// count and sum) and a changelog value of one window of it.
func restoreBenchValue() (windowing.Spec, watermark.Spec, []byte) {
	spec := windowing.Spec{
		Window:     windowing.WindowSpec{Kind: windowing.Tumbling, Size: 3600_000, Hop: 3600_000},
		Aggregates: []windowing.AggSpec{{Name: "n", Op: windowing.Count}, {Name: "s", Op: windowing.Sum, Field: "x"}},
		Trigger:    windowing.TriggerSpec{OnTime: true},
	}
	wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, MaxDelay: 1000}
	src := newRestoreRun(&testing.T{}, spec, wm, 64<<20)
	src.eng.Assign(0, 0, true)
	src.feed([]rec{{part: 0, key: "template", t: 1000, x: 3}}, 0)
	log, _ := src.changelog(0)
	value := log["template"]
	return spec, wm, value
}

// BenchmarkRestoreKey restores b.N distinct keys of one tumbling window
// each into an empty shard, the way a cold restore from a changelog does,
// committing the store every 64 MiB of pending writes.
func BenchmarkRestoreKey(b *testing.B) {
	spec, wm, value := restoreBenchValue()
	db, err := state.Open("db", state.Options{FS: vfs.NewMem()})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var col collector
	eng, err := windowing.New(spec, wm, db, &col, windowing.Options{ShardByPartition: true})
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, b.N)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%08d", i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := eng.RestoreKey(0, keys[i], value); err != nil {
			b.Fatal(err)
		}
		if db.PendingBytes() >= 64<<20 {
			if err := db.Commit(false); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	if eng.OpenWindows() != int64(b.N) {
		b.Fatalf("%d open windows, want %d", eng.OpenWindows(), b.N)
	}
}

// TestHeldTimersWait: the windows of a partition whose timers are held do
// not fire while the frontier passes them, and fire, complete, once released.
func TestHeldTimersWait(t *testing.T) {
	spec := windowing.Spec{
		Window:     windowing.WindowSpec{Kind: windowing.Tumbling, Size: 1000, Hop: 1000},
		Aggregates: []windowing.AggSpec{{Name: "n", Op: windowing.Count}},
		Trigger:    windowing.TriggerSpec{OnTime: true, Closing: windowing.ClosingNever},
	}
	wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, MaxDelay: 0, IdleTimeout: 0}
	r := newRestoreRun(t, spec, wm, 1<<20)
	r.eng.Assign(0, 0, true)
	r.eng.Assign(1, 0, true)
	r.eng.HoldTimers(1)
	r.feed([]rec{{part: 1, key: "b", t: 100}, {part: 1, key: "b", t: 200}, {part: 0, key: "a", t: 100}, {part: 0, key: "a", t: 5000}, {part: 1, key: "b", t: 5000}}, 0)
	if got := paneLines(spec, r.col.panes); len(got) != 1 || got[0] != `{"key":"a","window":{"start":0,"end":1000},"pane":{"timing":"ON_TIME","index":0,"final":true,"mode":"accumulating"},"retraction":false,"aggregates":{"n":1}}` {
		t.Fatalf("panes while partition 1 is held: %q", got)
	}
	if err := r.eng.ReleaseTimers(1); err != nil {
		t.Fatal(err)
	}
	got := paneLines(spec, r.col.panes)
	if len(got) != 2 || got[1] != `{"key":"b","window":{"start":0,"end":1000},"pane":{"timing":"ON_TIME","index":0,"final":true,"mode":"accumulating"},"retraction":false,"aggregates":{"n":2}}` {
		t.Fatalf("panes after the release: %q", got)
	}
}

// TestCatchingUpPartitionRepeatsPanes: a partition's previous owner emitted
// panes and then crashed before logging any of its state, and the partition
// joins a new owner whose frontier is far ahead (another partition's). Run on
// its own frontier (CatchUp), the records processed again give the same
// panes, byte for byte, as the previous owner emitted (a consumer that drops
// duplicates by pane id keeps a consistent stream), and so does the release
// at the end. Held instead (HoldTimers), they would all be late.
func TestCatchingUpPartitionRepeatsPanes(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewSource(seed))
		spec := randomSpec(rng)
		// Processing-time triggers of a catching-up partition wait for its
		// release, and early panes are not determined by the records anyway.
		spec.Trigger.EarlyEvery = 0
		delay := int64(rng.Intn(800))
		recs := randomStream(rng, 1, 100+rng.Intn(300), delay)
		for i := range recs {
			recs[i].part = 1
		}
		wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, MaxDelay: delay, Every: int64(1 + rng.Intn(3))}
		t.Run(fmt.Sprintf("seed%d-%s-%s", seed, spec.Window.Kind, spec.Mode), func(t *testing.T) {
			first := newRestoreRun(t, spec, wm, 1<<20)
			first.eng.Assign(1, 0, true)
			first.feed(recs, 0)
			if err := first.eng.Finish(); err != nil {
				t.Fatal(err)
			}

			next := newRestoreRun(t, spec, wm, 1<<20)
			next.eng.Assign(0, 0, true)
			ahead := rec{part: 0, key: "ahead", t: 10_000_000}
			next.feed([]rec{ahead, ahead, ahead}, 0)
			if f := next.eng.Frontier(); f < 9_000_000 {
				t.Fatalf("frontier %d: the new owner is not ahead", f)
			}
			next.col.panes = nil
			next.eng.Assign(1, 0, false)
			next.eng.CatchUp(1)
			next.feed(recs, 0)
			if err := next.eng.ReleaseTimers(1); err != nil {
				t.Fatal(err)
			}
			want := paneLines(spec, first.col.panes)
			got := paneLines(spec, next.col.panes)
			if len(want) == 0 {
				t.Fatal("no pane: the test shows nothing")
			}
			samePanes(t, "of the new owner against the previous owner's", got, want)
		})
	}
}

// An event's key may point into the record's buffer (source.Decoder gives
// no-copy views): the engine keeps copies, so a buffer overwritten after
// each record leaves the panes, the timers and a restore from the stored
// state with the keys as they were.
func TestEventKeysMayBeOverwritten(t *testing.T) {
	for _, kind := range []windowing.WindowKind{windowing.Tumbling, windowing.Session} {
		spec := windowing.Spec{
			Window:     windowing.WindowSpec{Kind: kind, Size: 1000, Hop: 1000, Gap: 500},
			Aggregates: []windowing.AggSpec{{Name: "n", Op: windowing.Count}},
			Trigger:    windowing.TriggerSpec{OnTime: true, Closing: windowing.ClosingNever},
		}
		wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness}
		r := newRestoreRun(t, spec, wm, 1<<20)
		r.eng.Assign(0, 0, true)
		buf := make([]byte, 8)
		for i, key := range []string{"alpha", "beta", "alpha", "gamma"} {
			copy(buf, key)
			ev := windowing.Event{Key: unsafe.String(&buf[0], len(key)), Time: int64(100 * i), Inputs: make([]windowing.Input, 1)}
			if err := r.eng.Record(&ev, 0); err != nil {
				t.Fatal(err)
			}
			copy(buf, "XXXXXXXX")
		}
		if err := r.eng.Checkpoint(false); err != nil {
			t.Fatal(err)
		}
		keys := map[string]int{}
		if err := r.db.ScanShard(0, func(key string, _ []byte) error { keys[key]++; return nil }); err != nil {
			t.Fatal(err)
		}
		if len(keys) != 3 || keys["alpha"] != 1 || keys["beta"] != 1 || keys["gamma"] != 1 {
			t.Fatalf("%s: stored keys %v, want alpha, beta, gamma", kind, keys)
		}
		if err := r.eng.Finish(); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, line := range paneLines(spec, r.col.panes) {
			got = append(got, gjson.Get(line, "key").Str+":"+gjson.Get(line, "aggregates.n").Raw)
		}
		sort.Strings(got)
		want := []string{"alpha:2", "beta:1", "gamma:1"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: panes %v, want %v", kind, got, want)
		}
	}
}

// TestRestoredEarlyTimerFiresNoLatePane: an early timer restored with a
// window whose end the new owner's frontier has passed, and that comes due
// before the window's on-time step, fires no pane: an early timer never
// fires a LATE pane (none is configured here), and the on-time pane holds
// the window's records.
func TestRestoredEarlyTimerFiresNoLatePane(t *testing.T) {
	spec := windowing.Spec{
		Window:     windowing.WindowSpec{Kind: windowing.Tumbling, Size: 1000, Hop: 1000},
		Aggregates: []windowing.AggSpec{{Name: "n", Op: windowing.Count}},
		Trigger:    windowing.TriggerSpec{EarlyEvery: 50, OnTime: true, Closing: windowing.ClosingNever},
	}
	wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness}
	first := newRestoreRun(t, spec, wm, 1<<20)
	first.eng.Assign(0, 0, true)
	first.feed([]rec{{part: 0, key: "k", t: 100}}, 0) // early timer at 50
	log, g := first.changelog(0)

	next := newRestoreRun(t, spec, wm, 1<<20)
	next.eng.Assign(1, 0, true)
	next.feed([]rec{{part: 1, key: "ahead", t: 5000}}, 0) // frontier 5000
	next.col.panes = nil
	if err := next.eng.RestoreKey(0, "k", log["k"]); err != nil {
		t.Fatal(err)
	}
	next.eng.Assign(0, 0, true)
	next.eng.Watermarks().RestoreGenerator(0, g)
	if err := next.eng.Tick(100); err != nil { // the early timer is due
		t.Fatal(err)
	}
	if err := next.eng.FireDue(); err != nil {
		t.Fatal(err)
	}
	var got []windowing.Pane // the panes of k ("ahead" fires its own early pane)
	for _, p := range next.col.panes {
		if p.Key == "k" {
			got = append(got, p)
		}
	}
	samePanes(t, "of k after the restore", paneLines(spec, got), []string{
		`{"key":"k","window":{"start":0,"end":1000},"pane":{"timing":"ON_TIME","index":0,"final":true,"mode":"accumulating"},"retraction":false,"aggregates":{"n":1}}`,
	})
}

// TestReleasedPartitionFiresWindowsBehindTheFrontier: a partition that
// joins behind the frontier runs on its own (CatchUp), and a record then
// opens a window that its own frontier has not passed but the engine's
// has. Released before its watermark reaches the frontier, the window must
// still fire with the next step; it once stayed open for good, never
// emitting (the timer scan had passed its deadline while the partition
// waited).
func TestReleasedPartitionFiresWindowsBehindTheFrontier(t *testing.T) {
	spec, wm := countPerSecond()
	r := newRestoreRun(t, spec, wm, 1<<20)
	r.eng.Assign(0, 0, true)
	r.feed([]rec{{part: 0, key: "a", t: 500}, {part: 0, key: "a", t: 10_000}}, 0)
	if f := r.eng.Frontier(); f != 10_000 {
		t.Fatalf("frontier %d, want 10000", f)
	}
	r.eng.Assign(1, 0, false)
	r.eng.Watermarks().RestoreGenerator(1, watermark.Generator{MaxTS: 5000, Seen: 1, Watermark: 5000})
	r.eng.CatchUp(1)
	r.feed([]rec{{part: 1, key: "b", t: 7500}}, 0)
	if err := r.eng.ReleaseTimers(1); err != nil {
		t.Fatal(err)
	}
	r.feed([]rec{{part: 0, key: "a", t: 20_000}, {part: 1, key: "b", t: 20_000}}, 100)
	want := `{"key":"b","window":{"start":7000,"end":8000},"pane":{"timing":"ON_TIME","index":0,"final":true,"mode":"accumulating"},"retraction":false,"aggregates":{"n":1}}`
	for _, l := range paneLines(spec, r.col.panes) {
		if l == want {
			return
		}
	}
	t.Fatalf("window [7000,8000) of b never fired (open windows %d); panes:\n%s", r.eng.OpenWindows(), strings.Join(paneLines(spec, r.col.panes), "\n"))
}

// TestReopenedEngineFiresWaitingTimers: a partition's windows that the
// frontier passed while the partition was not assigned (its timers wait for
// the assignment) are in the checkpoint with the frontier. An engine opened
// from that checkpoint (a restart, a rollback) must fire them once the
// partition is assigned; it once took every timer up to the checkpoint's
// frontier for fired, and those windows never emitted a pane.
func TestReopenedEngineFiresWaitingTimers(t *testing.T) {
	spec, wm := countPerSecond()
	r := newRestoreRun(t, spec, wm, 1<<20)
	r.eng.Assign(0, 0, true)
	r.eng.Assign(1, 0, true)
	r.feed([]rec{{part: 1, key: "b", t: 2500}, {part: 0, key: "a", t: 100}, {part: 1, key: "b", t: 9000}}, 0)
	// Partition 1 leaves (its state stays, held), the frontier passes its
	// window [2000,3000) on partition 0 alone.
	r.eng.Revoke(1)
	r.feed([]rec{{part: 0, key: "a", t: 8000}}, 0)
	if f := r.eng.Frontier(); f != 8000 {
		t.Fatalf("frontier %d, want 8000", f)
	}
	if err := r.eng.Checkpoint(true); err != nil {
		t.Fatal(err)
	}
	var col collector
	eng, err := windowing.New(spec, wm, r.db, &col, windowing.Options{ShardByPartition: true, CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	eng.Assign(0, 0, true)
	eng.Assign(1, 0, true)
	if err := eng.FireDue(); err != nil {
		t.Fatal(err)
	}
	want := `{"key":"b","window":{"start":2000,"end":3000},"pane":{"timing":"ON_TIME","index":0,"final":true,"mode":"accumulating"},"retraction":false,"aggregates":{"n":1}}`
	got := paneLines(spec, col.panes)
	if len(got) != 1 || got[0] != want {
		t.Fatalf("after the reopened engine's partition 1 was assigned: panes %q, want [%s]", got, want)
	}
}

// countPerSecond is a tumbling 1 s count with on-time and closing panes
// and no out-of-orderness: every window fires once, as its end passes.
func countPerSecond() (windowing.Spec, watermark.Spec) {
	return windowing.Spec{
		Window:     windowing.WindowSpec{Kind: windowing.Tumbling, Size: 1000, Hop: 1000},
		Aggregates: []windowing.AggSpec{{Name: "n", Op: windowing.Count}},
		Trigger:    windowing.TriggerSpec{OnTime: true, Closing: windowing.ClosingAlways},
	}, watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, MaxDelay: 0}
}

// TestDropShardKeepsRestoringHold: a restore from scratch drops the
// partition's shard before it reads the changelog. The partition still
// holds the frontier (HoldRestoring) until it is assigned: the frontier
// must not jump to another partition's watermark meanwhile, which closed
// and expired that partition's windows in one step (their ON_TIME pane was
// final, the closing pane gone: TestBrokerOutage, when the other
// partition's restore finished first).
func TestDropShardKeepsRestoringHold(t *testing.T) {
	spec := windowing.Spec{
		Window:          windowing.WindowSpec{Kind: windowing.Tumbling, Size: 10000, Hop: 10000},
		AllowedLateness: 30000,
		Trigger:         windowing.TriggerSpec{OnTime: true},
		Aggregates:      []windowing.AggSpec{{Name: "n", Op: windowing.Count}},
	}
	r := newRestoreRun(t, spec, watermark.Spec{Every: 1}, 1<<20)
	r.eng.Assign(0, 0, true)
	r.eng.Watermarks().HoldRestoring(1)
	r.feed([]rec{{part: 0, key: "a", t: 5000}, {part: 0, key: "a", t: 3_600_000}}, 0)
	if f := r.eng.Frontier(); f > 5000 {
		t.Fatalf("F = %d while partition 1 restores", f)
	}
	if err := r.eng.DropShard(1); err != nil { // the restore's first step
		t.Fatal(err)
	}
	if err := r.eng.Tick(100); err != nil {
		t.Fatal(err)
	}
	if f := r.eng.Frontier(); f > 5000 || len(r.col.panes) != 0 {
		t.Fatalf("after dropping partition 1's shard: F = %d, %d panes: the restore's hold was lost", f, len(r.col.panes))
	}
}

// A window restored into a running engine from a changelog written under
// a larger allowed_lateness, whose new expiry the engine's frontier has
// passed already, closes at the next frontier step with its closing pane
// (docs/OPERATIONS.md: allowed_lateness shrinks). Before, Rearm moved its
// timer below what the running engine's timer scan had passed, and the
// window never closed.
func TestRearmRestoredIntoRunningEngine(t *testing.T) {
	spec := windowing.Spec{
		Window:          windowing.WindowSpec{Kind: windowing.Tumbling, Size: 1000, Hop: 1000},
		Aggregates:      []windowing.AggSpec{{Name: "n", Op: windowing.Count}},
		Trigger:         windowing.TriggerSpec{OnTime: true, Closing: windowing.ClosingAlways},
		AllowedLateness: 10_000,
	}
	engine := func(spec windowing.Spec, col *collector) *windowing.Engine {
		t.Helper()
		db, err := state.Open("db", state.Options{FS: vfs.NewMem()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		eng, err := windowing.New(spec, watermark.Spec{Strategy: watermark.BoundedOutOfOrderness}, db, col, windowing.Options{ShardByPartition: true})
		if err != nil {
			t.Fatal(err)
		}
		return eng
	}
	feed := func(eng *windowing.Engine, recs ...rec) {
		t.Helper()
		for _, r := range recs {
			ev := r.event(1)
			if err := eng.Record(&ev, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The writer: lateness 10 s; k's window [11000,12000) is on time and
	// expires at 22000.
	var written collector
	a := engine(spec, &written)
	a.Assign(1, 0, true)
	feed(a, rec{part: 1, key: "k", t: 11_000}, rec{part: 1, key: "k", t: 20_000})
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	k, err := a.KeyState(1, "k")
	if err != nil || k == nil {
		t.Fatalf("k's state: %x, %v", k, err)
	}
	g, _ := a.Watermarks().Generator(1)
	// The reader: lateness 1 s, its timer scan past 20000.
	spec.AllowedLateness = 1_000
	var col collector
	b := engine(spec, &col)
	b.Assign(0, 0, true)
	feed(b, rec{part: 0, key: "other", t: 10_000}, rec{part: 0, key: "other", t: 20_000})
	if err := b.RestoreNewKey(1, "k", k); err != nil {
		t.Fatal(err)
	}
	if err := b.Rearm(10_000, a.Frontier()); err != nil {
		t.Fatal(err)
	}
	b.Watermarks().RestoreGenerator(1, g)
	b.Assign(1, 0, false)
	if err := b.FireDue(); err != nil {
		t.Fatal(err)
	}
	feed(b, rec{part: 0, key: "other", t: 30_000}, rec{part: 1, key: "k", t: 30_000})
	for _, p := range col.panes {
		if p.Key == "k" && p.Start == 11_000 && p.Final {
			return
		}
	}
	t.Fatalf("no closing pane of k's window [11000,12000) at F = %d; panes: %+v", b.Frontier(), col.panes)
}
