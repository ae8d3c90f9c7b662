package sink

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/windowd/windowd/windowing"
)

func TestPaneRecord(t *testing.T) {
	specs := []windowing.AggSpec{{Name: "n", Op: windowing.Count}}
	p := &windowing.Pane{Key: "u1", Start: 1000, End: 2000, Timing: windowing.Late, Index: 2, Final: true, Mode: windowing.Retracting,
		Retraction: true, Values: []windowing.Value{{Kind: windowing.IntValue, Int: 3}}}
	r := PaneRecord("out", p, windowing.NewPaneJSON(specs))
	if r.Topic != "out" || string(r.Key) != "u1" || r.Timestamp.UnixMilli() != 1999 {
		t.Fatalf("topic %q key %q timestamp %d", r.Topic, r.Key, r.Timestamp.UnixMilli())
	}
	want := `{"key":"u1","window":{"start":1000,"end":2000},"pane":{"timing":"LATE","index":2,"final":true,"mode":"retracting"},"retraction":true,"aggregates":{"n":3}}`
	if string(r.Value) != want {
		t.Fatalf("value %s", r.Value)
	}
	got := map[string]string{}
	for _, h := range r.Headers {
		got[h.Key] = string(h.Value)
	}
	for k, v := range map[string]string{"window_start": "1000", "window_end": "2000", "timing": "LATE", "index": "2", "final": "true",
		"mode": "retracting", "retraction": "true", "pane_id": "u1/1000/2000/2"} {
		if got[k] != v {
			t.Errorf("header %s = %q, want %q", k, got[k], v)
		}
	}
	// The flag headers: on the panes they name only, once, "true".
	for _, flag := range []struct {
		header string
		set    func(*windowing.Pane)
	}{
		{HeaderQuiet, func(p *windowing.Pane) { p.Quiet = true }},
		{HeaderTimeout, func(p *windowing.Pane) { p.TimedOut = true }},
	} {
		if _, ok := got[flag.header]; ok {
			t.Errorf("header %s on a pane without its flag", flag.header)
		}
		q := *p
		flag.set(&q)
		n := 0
		for _, h := range PaneRecord("out", &q, windowing.NewPaneJSON(specs)).Headers {
			if h.Key == flag.header {
				n++
				if string(h.Value) != "true" {
					t.Errorf("header %s = %q, want true", h.Key, h.Value)
				}
			}
		}
		if n != 1 {
			t.Errorf("a pane with its flag has %d %s headers, want 1", n, flag.header)
		}
	}
}

// A pane record costs two allocations (the record with its headers, one
// buffer for every byte field), and its fields do not overlap: appending
// to one leaves the others as they are.
func TestPaneRecordAllocations(t *testing.T) {
	specs := []windowing.AggSpec{{Name: "n", Op: windowing.Count}, {Name: "s", Op: windowing.Sum, Field: "x"}}
	p := &windowing.Pane{Key: "user-0001", Start: 1700000000000, End: 1700000010000, Timing: windowing.OnTime, Mode: windowing.Accumulating,
		Values: []windowing.Value{{Kind: windowing.IntValue, Int: 3}, {Kind: windowing.NumValue, Num: 1234.5}}}
	enc := windowing.NewPaneJSON(specs)
	if allocs := testing.AllocsPerRun(100, func() { PaneRecord("out", p, enc) }); allocs > 2 {
		t.Errorf("allocations per pane record: %v, want 2", allocs)
	}
	r := PaneRecord("out", p, windowing.NewPaneJSON(specs))
	before := map[string]string{"value": string(r.Value), "key": string(r.Key)}
	for _, h := range r.Headers {
		before[h.Key] = string(h.Value)
	}
	_ = append(r.Value, "XXXX"...)
	_ = append(r.Key, "XXXX"...)
	for _, h := range r.Headers {
		_ = append(h.Value, "XXXX"...)
	}
	after := map[string]string{"value": string(r.Value), "key": string(r.Key)}
	for _, h := range r.Headers {
		after[h.Key] = string(h.Value)
	}
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed from %q to %q by appends to the other fields", k, v, after[k])
		}
	}
	if before["pane_id"] != p.ID() {
		t.Errorf("pane_id %q, want %q", before["pane_id"], p.ID())
	}
}

func TestDivertedRecord(t *testing.T) {
	src := &kgo.Record{Topic: "in", Partition: 3, Offset: 42, Key: []byte("k"), Value: []byte("{bad"),
		Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("abc")}}}
	r := DivertedRecord("dlq", "value is not valid JSON", src)
	if r.Topic != "dlq" || string(r.Key) != "k" || string(r.Value) != "{bad" {
		t.Fatalf("record %+v", r)
	}
	got := map[string]string{}
	for _, h := range r.Headers {
		got[h.Key] = string(h.Value)
	}
	for k, v := range map[string]string{"trace": "abc", "error": "value is not valid JSON", "source_topic": "in", "source_partition": "3", "source_offset": "42"} {
		if got[k] != v {
			t.Errorf("header %s = %q, want %q", k, got[k], v)
		}
	}
}
