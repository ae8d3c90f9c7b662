package windowing_test

import (
	"bytes"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// TestShardsCoPartitioned: two inputs of two partitions read
// co-partitioned (Options.Shards 2): partition p of input i is upstream
// partition 2i+p. A key's records from both inputs meet in one window of
// shard p, while each upstream partition keeps its own generator: the
// window fires only once the last of the four has passed its end.
func TestShardsCoPartitioned(t *testing.T) {
	eng, col, feed := coEngine(t)
	// a: partition 0 of each input; b: partition 1 of each.
	feed(rec{part: 0, key: "a", t: 100}, rec{part: 2, key: "a", t: 200}, rec{part: 1, key: "b", t: 150}, rec{part: 3, key: "b", t: 250})
	if err := eng.Flush(); err != nil {
		t.Fatal(err)
	}
	a0, err := eng.KeyState(0, "a")
	if err != nil {
		t.Fatal(err)
	}
	a2, err := eng.KeyState(2, "a")
	if err != nil {
		t.Fatal(err)
	}
	if a0 == nil || !bytes.Equal(a0, a2) {
		t.Fatalf("key a through partitions 0 and 2: %x and %x, want one state", a0, a2)
	}
	if a1, err := eng.KeyState(1, "a"); err != nil || a1 != nil {
		t.Fatalf("key a in shard 1: %x, %v; want none", a1, err)
	}
	feed(rec{part: 0, key: "z", t: 5000}, rec{part: 1, key: "z", t: 5000}, rec{part: 2, key: "z", t: 5000})
	if len(col.panes) != 0 {
		t.Fatalf("%d panes while partition 3 (input 1's partition 1) holds the frontier at 250", len(col.panes))
	}
	feed(rec{part: 3, key: "z", t: 5000})
	got := map[string]int64{}
	for _, p := range paneValues(col) {
		got[p.key] = p.n
	}
	if len(got) != 2 || got["a"] != 2 || got["b"] != 2 {
		t.Fatalf("panes of [0,1000): %v, want a and b counting 2 each (one record of each input)", got)
	}
}

type keyCount struct {
	key string
	n   int64
}

// paneValues returns each pane's key and first value.
func paneValues(col *collector) []keyCount {
	var out []keyCount
	for _, p := range col.panes {
		out = append(out, keyCount{p.Key, p.Values[0].Int})
	}
	return out
}

// coEngine is an engine of two inputs of two partitions read
// co-partitioned (partitions 2 and 3 follow 0 and 1) with every partition
// assigned, the panes it emits, and a feed of records to it.
func coEngine(t *testing.T) (*windowing.Engine, *collector, func(...rec)) {
	t.Helper()
	spec := windowing.Spec{
		Window:     windowing.WindowSpec{Kind: windowing.Tumbling, Size: 1000, Hop: 1000},
		Aggregates: []windowing.AggSpec{{Name: "n", Op: windowing.Count}},
		Trigger:    windowing.TriggerSpec{OnTime: true, Closing: windowing.ClosingNever},
	}
	db, err := state.Open("db", state.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	col := &collector{}
	eng, err := windowing.New(spec, watermark.Spec{Strategy: watermark.BoundedOutOfOrderness}, db, col,
		windowing.Options{ShardByPartition: true, Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 4; p++ {
		eng.Assign(p, 0, true)
	}
	return eng, col, func(recs ...rec) {
		t.Helper()
		for _, r := range recs {
			ev := r.event(1)
			if err := eng.Record(&ev, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A follower dropped or revoked without its lead leaves the lead's shard
// alone: the state is the lead's, and its timers fire. Before, dropping
// partition 2 removed shard 0's keys (a rollback that dropped a follower
// alone wiped its kept lead's windows), and revoking it stopped shard 0's
// timers.
func TestFollowerLeavesLeadShard(t *testing.T) {
	eng, col, feed := coEngine(t)
	feed(rec{part: 0, key: "a", t: 100}, rec{part: 2, key: "a", t: 200}, rec{part: 1, key: "b", t: 100}, rec{part: 3, key: "b", t: 100})
	if err := eng.DropShard(2); err != nil {
		t.Fatal(err)
	}
	if err := eng.Flush(); err != nil {
		t.Fatal(err)
	}
	if a, err := eng.KeyState(0, "a"); err != nil || a == nil {
		t.Fatalf("key a after dropping follower 2: %x, %v; want its lead's state kept", a, err)
	}
	eng.Revoke(2)
	feed(rec{part: 0, key: "z", t: 5000}, rec{part: 1, key: "z", t: 5000}, rec{part: 3, key: "z", t: 5000})
	got := map[string]int64{}
	for _, p := range paneValues(col) {
		got[p.key] = p.n
	}
	if got["a"] != 2 || got["b"] != 2 {
		t.Fatalf("panes of [0,1000): %v, want a and b counting 2 each (the revoked follower's record stays in its lead's state)", got)
	}
}

// A follower assigned while its lead's shard catches up (the lead joined
// behind the frontier) leaves the shard catching up: its windows fire as
// the shard's own partitions pass them, not at the frontier. Before, the
// follower's Assign made the shard fire at the frontier at once, and the
// lead's next record, on time on its own frontier, made a second ON_TIME
// pane of the same window.
func TestFollowerAssignKeepsCatchUp(t *testing.T) {
	eng, col, feed := coEngine(t)
	// Key b's window [0,1000) in shard 0, whose partitions then leave;
	// the others take the frontier to 20,000.
	feed(rec{part: 0, key: "b", t: 500})
	for _, part := range []int32{0, 2} {
		eng.Revoke(part)
	}
	feed(rec{part: 1, key: "z", t: 20_000}, rec{part: 3, key: "z", t: 20_000})
	// Partition 0 and its follower come back, as a restore brings them:
	// the lead's watermark 800, behind the frontier; the follower's ahead
	// of it.
	eng.Watermarks().RestoreGenerator(0, watermark.Generator{MaxTS: 800, Seen: 1, Watermark: 800})
	eng.Watermarks().RestoreGenerator(2, watermark.Generator{MaxTS: 25_000, Seen: 2, Watermark: 25_000})
	eng.Assign(0, 0, false)
	eng.CatchUp(0)
	eng.Assign(2, 0, false)
	if err := eng.FireDue(); err != nil {
		t.Fatal(err)
	}
	for _, p := range col.panes {
		if p.Key == "b" {
			t.Fatalf("key b's window fired at the frontier (%+v) while its lead catches up at 800", p)
		}
	}
	feed(rec{part: 0, key: "b", t: 900}, rec{part: 0, key: "z", t: 21_000})
	if err := eng.ReleaseTimers(0); err != nil {
		t.Fatal(err)
	}
	var bs []int64
	for _, p := range paneValues(col) {
		if p.key == "b" {
			bs = append(bs, p.n)
		}
	}
	if len(bs) != 1 || bs[0] != 2 {
		t.Fatalf("key b's panes counted %v, want one pane of 2", bs)
	}
}

// A Joiner's follower dropped without its lead leaves the lead's records,
// as the engine's does (TestFollowerLeavesLeadShard). Before, dropping
// partition 2 removed shard 0's held records.
func TestJoinFollowerLeavesLeadShard(t *testing.T) {
	j, _, _ := storedJoiner(t, windowing.JoinSpec{Kind: windowing.LeftJoin, Interval: true, Lower: 0, Upper: 1000},
		watermark.Spec{Strategy: watermark.BoundedOutOfOrderness}, windowing.JoinOptions{Shards: 2})
	for p := int32(0); p < 4; p++ {
		j.Assign(p, 0, true)
	}
	if err := j.Record(&windowing.Event{Partition: 0, Key: "a", Time: 100, Value: `{}`}, 0); err != nil {
		t.Fatal(err)
	}
	held := j.Held()
	if err := j.DropShard(2); err != nil {
		t.Fatal(err)
	}
	if err := j.Flush(); err != nil {
		t.Fatal(err)
	}
	if a, err := j.KeyState(0, "a"); err != nil || a == nil || j.Held() != held {
		t.Fatalf("key a after dropping follower 2: %x, %v, %d held; want its lead's %d records kept", a, err, j.Held(), held)
	}
}
