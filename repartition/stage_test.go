package repartition

import (
	"reflect"
	"testing"

	"github.com/windowd/windowd/codec"
	"github.com/windowd/windowd/watermark"
)

// Stage 1 broadcasts a partition's marker when its watermark or idleness
// changed, every assigned one when asked for all, and never one of a
// partition it does not read.
func TestStage1Markers(t *testing.T) {
	s := NewStage1(watermark.Spec{MaxDelay: 0, Every: 1})
	s.Watermarks().Assign(0, 0, true)
	s.Watermarks().Assign(1, 0, true)
	first := s.Markers(nil, 1, false)
	if len(first) != 2 {
		t.Fatalf("first markers %+v, want one per assigned partition", first)
	}
	if again := s.Markers(nil, 2, false); len(again) != 0 {
		t.Fatalf("unchanged partitions broadcast again: %+v", again)
	}
	s.Watermarks().Observe(1, 500, 3)
	got := s.Markers(nil, 3, false)
	if len(got) != 1 || got[0].Upstream != 1 || got[0].Watermark != 500 || got[0].Time != 3 {
		t.Fatalf("after a record of partition 1: %+v", got)
	}
	if all := s.Markers(nil, 4, true); len(all) != 2 {
		t.Fatalf("all: %+v", all)
	}
	s.Forget(0)
	if all := s.Markers(nil, 5, true); len(all) != 1 || all[0].Upstream != 1 {
		t.Fatalf("a forgotten partition is broadcast: %+v", all)
	}
}

// A table's watermark waits for every input partition (or its idleness);
// a record below its input partition's next offset is a duplicate.
func TestTable(t *testing.T) {
	tb := NewTable(2)
	if !tb.Apply(Marker{Upstream: 0, Watermark: 100}) || tb.Watermark() != watermark.MinTime {
		t.Fatalf("watermark %d with one input partition unheard", tb.Watermark())
	}
	tb.Apply(Marker{Upstream: 1, Watermark: 40})
	if tb.Watermark() != 40 {
		t.Fatalf("watermark %d, want the minimum 40", tb.Watermark())
	}
	tb.Apply(Marker{Upstream: 1, Idle: true, Watermark: 40})
	if tb.Watermark() != 100 {
		t.Fatalf("watermark %d, want 100 with partition 1 idle", tb.Watermark())
	}
	if tb.Apply(Marker{Upstream: 2}) {
		t.Fatal("a marker of an input partition outside the table was applied")
	}
	if !tb.Accept(0, 7) || tb.Accept(0, 7) || tb.Accept(0, 3) || !tb.Accept(0, 8) || tb.Accept(5, 0) {
		t.Fatal("duplicates are not told from new records")
	}
	w := codec.NewWriter(nil)
	tb.Encode(w)
	back := DecodeTable(codec.NewReader(w.Bytes(), "table"))
	if !reflect.DeepEqual(back, tb) {
		t.Fatalf("round trip: %+v, want %+v", back, tb)
	}
	if DecodeTable(codec.NewReader(w.Bytes()[:len(w.Bytes())-1], "table")) != nil {
		t.Fatal("a truncated table decoded")
	}
}

func TestLayout(t *testing.T) {
	l := NewLayout([]int32{3, 1, 2})
	want := [][2]int32{{0, 0}, {0, 1}, {0, 2}, {1, 0}, {2, 0}, {2, 1}}
	if l.Total() != 6 || l.Inputs() != 3 {
		t.Fatalf("total %d, inputs %d", l.Total(), l.Inputs())
	}
	for u, w := range want {
		i, p := l.Input(int32(u))
		if i != int(w[0]) || p != w[1] || l.ID(i, p) != int32(u) {
			t.Errorf("upstream %d: input %d partition %d, want %v", u, i, p, w)
		}
	}
	if one := NewLayout([]int32{4}); one.ID(0, 3) != 3 || !one.Has(0, 7) {
		t.Error("one input's partitions are renumbered, or a new one not taken")
	}
	if l.Has(0, 3) || !l.Has(2, 1) || l.Has(2, 2) || l.Has(1, 1) {
		t.Error("Has takes a partition added since the start")
	}
}
