package windowing_test

import (
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// TestPartitionIDsFromGrowth: the input grew from 2 partitions to 4 and the
// producer's partitioner moved key a from partition 0 to partition 2 while
// its window [0,1000) was open. Each partition's state emits its own final
// pane of the window; the one of the added partition carries the partition
// in its pane id and pane object, so no two final panes share a pane id.
// Before, both were a/0/1000/0.
func TestPartitionIDsFromGrowth(t *testing.T) {
	spec := windowing.Spec{
		Window:     windowing.WindowSpec{Kind: windowing.Tumbling, Size: 1000, Hop: 1000},
		Aggregates: []windowing.AggSpec{{Name: "n", Op: windowing.Count}},
		Trigger:    windowing.TriggerSpec{OnTime: true, Closing: windowing.ClosingNever},
		Mode:       windowing.Retracting,
	}
	wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness}
	db, err := state.Open("db", state.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var col collector
	eng, err := windowing.New(spec, wm, db, &col, windowing.Options{ShardByPartition: true, PartitionIDsFrom: 2})
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 4; p++ {
		eng.Assign(p, 0, true)
	}
	for _, r := range []rec{
		{part: 0, key: "a", t: 100}, {part: 2, key: "a", t: 200}, {part: 2, key: "a", t: 300},
		{part: 0, key: "z", t: 5000}, {part: 1, key: "z", t: 5000}, {part: 2, key: "z", t: 5000}, {part: 3, key: "z", t: 5000},
	} {
		ev := r.event(1)
		if err := eng.Record(&ev, 0); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	ids := map[string]bool{}
	for i := range col.panes {
		p := &col.panes[i]
		if p.Final {
			if ids[p.ID()] {
				t.Errorf("two final panes with pane id %s", p.ID())
			}
			ids[p.ID()] = true
		}
		if p.Key == "a" {
			got = append(got, p.ID()+" "+string(windowing.AppendJSON(nil, p, spec.Aggregates)))
		}
	}
	want := []string{
		`a/0/1000/0 {"key":"a","window":{"start":0,"end":1000},"pane":{"timing":"ON_TIME","index":0,"final":true,"mode":"retracting"},"retraction":false,"aggregates":{"n":1}}`,
		`a/0/1000/0@2 {"key":"a","window":{"start":0,"end":1000},"pane":{"timing":"ON_TIME","index":0,"final":true,"mode":"retracting","partition":2},"retraction":false,"aggregates":{"n":2}}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("panes of a:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// PaneJSON formats the same objects.
	pj := windowing.NewPaneJSON(spec.Aggregates)
	for i := range col.panes {
		if a, b := string(pj.Append(nil, &col.panes[i])), string(windowing.AppendJSON(nil, &col.panes[i], spec.Aggregates)); a != b {
			t.Fatalf("PaneJSON %s, AppendJSON %s", a, b)
		}
	}
}
