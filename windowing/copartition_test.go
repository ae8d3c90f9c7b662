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
	spec := windowing.Spec{
		Window:     windowing.WindowSpec{Kind: windowing.Tumbling, Size: 1000, Hop: 1000},
		Aggregates: []windowing.AggSpec{{Name: "n", Op: windowing.Count}},
		Trigger:    windowing.TriggerSpec{OnTime: true, Closing: windowing.ClosingNever},
	}
	db, err := state.Open("db", state.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var col collector
	eng, err := windowing.New(spec, watermark.Spec{Strategy: watermark.BoundedOutOfOrderness}, db, &col,
		windowing.Options{ShardByPartition: true, Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 4; p++ {
		eng.Assign(p, 0, true)
	}
	feed := func(recs ...rec) {
		t.Helper()
		for _, r := range recs {
			ev := r.event(1)
			if err := eng.Record(&ev, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
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
	for _, p := range paneValues(&col) {
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
