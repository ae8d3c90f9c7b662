package windowing_test

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// A quiet input's window fires at the tick at which W + (now - t_quiet)
// reaches its end, marked quiet, and the quiet step is counted; a window
// the partitions' watermarks close in the same step is not marked.
func TestQuietAdvanceFiresMarkedPanes(t *testing.T) {
	spec := windowing.Spec{
		Window:     windowing.WindowSpec{Kind: windowing.Tumbling, Size: 10000},
		Trigger:    windowing.TriggerSpec{OnTime: true},
		Aggregates: []windowing.AggSpec{{Name: "n", Op: windowing.Count}},
	}
	db, err := state.Open("db", state.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got := &collector{}
	wm := watermark.Spec{Strategy: watermark.Monotonic, Every: 1, IdleTimeout: 10000, QuietAdvance: true}
	eng, err := windowing.New(spec, wm, db, got, windowing.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng.Assign(0, 0, true)
	for i, ts := range []int64{1000, 15000, 12000} { // [0,10000) closes with the record 15000
		key := "a"
		if ts > 10000 {
			key = "b"
		}
		if err := eng.Record(&windowing.Event{Offset: int64(i), Key: key, Time: ts, Inputs: make([]windowing.Input, 1)}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if len(got.panes) != 1 || got.panes[0].Quiet {
		t.Fatalf("after the records: panes %+v, want [0,10000) not quiet", got.panes)
	}
	for _, now := range []int64{10000, 14999} {
		if err := eng.Tick(now); err != nil {
			t.Fatal(err)
		}
		if len(got.panes) != 1 || eng.Stats().QuietAdvances > 0 && eng.Frontier() != 15000+now-10000 {
			t.Fatalf("tick %d: %d panes, F = %d", now, len(got.panes), eng.Frontier())
		}
	}
	if err := eng.Tick(15000); err != nil { // F = 15000 + 5000
		t.Fatal(err)
	}
	if len(got.panes) != 2 {
		t.Fatalf("tick 15000: %d panes, want [10000,20000) to fire", len(got.panes))
	}
	p := got.panes[1]
	if p.Key != "b" || p.Start != 10000 || p.Timing != windowing.OnTime || !p.Final || !p.Quiet {
		t.Fatalf("tick 15000: pane %+v, want b [10000,20000) ON_TIME final quiet", p)
	}
	if n := eng.Stats().QuietAdvances; n != 2 {
		t.Fatalf("QuietAdvances = %d, want 2 (ticks 14999 and 15000)", n)
	}
}
