package watermark

import (
	"testing"

	"github.com/windowd/windowd/codec"
)

// TestUpstreams steps markers of three upstream partitions into one
// downstream partition and checks its watermark after each.
func TestUpstreams(t *testing.T) {
	u := NewUpstreams(3)
	steps := []struct {
		p    int32
		wm   int64
		idle bool
		want int64
	}{
		{0, 10, false, MinTime}, // upstreams 1 and 2 unheard: nothing is known
		{1, 20, false, MinTime}, //
		{2, 5, false, 5},        // all heard: the minimum
		{2, 30, false, 10},      //
		{0, 3, false, 10},       // a lower marker (a restarted generator) does not lower 0
		{0, 40, true, 20},       // idle upstreams are left out
		{1, 25, true, 30},       //
		{2, 31, true, 40},       // all idle: the largest
		{1, 26, false, 26},      // 1 active again holds the minimum
		{7, 99, false, 26},      // out of range: ignored
		{-1, 99, false, 26},     //
	}
	for i, s := range steps {
		ok := u.Observe(s.p, s.wm, s.idle)
		if ok != (s.p >= 0 && s.p < 3) {
			t.Errorf("step %d: Observe(%d) = %v", i, s.p, ok)
		}
		if got := u.Watermark(); got != s.want {
			t.Fatalf("step %d: marker (%d, %d, idle %v): watermark %d, want %d", i, s.p, s.wm, s.idle, got, s.want)
		}
	}
	w := codec.NewWriter([]byte{0xff})
	u.Encode(w)
	r := codec.NewReader(append(w.Bytes()[1:], 0xee), "upstreams")
	v := DecodeUpstreams(r)
	if rest := r.Rest(); v == nil || r.Err() != nil || len(rest) != 1 || rest[0] != 0xee {
		t.Fatalf("decode: %v, rest %x", r.Err(), rest)
	}
	if v.Watermark() != 26 || v.Len() != 3 {
		t.Errorf("decoded watermark %d over %d, want 26 over 3", v.Watermark(), v.Len())
	}
	if wm, idle, seen := v.Upstream(0); wm != 40 || !idle || !seen {
		t.Errorf("decoded upstream 0 = (%d, %v, %v), want (40, true, true)", wm, idle, seen)
	}
	for _, bad := range [][]byte{nil, {3}, {1, 4, 0}, {1, 1}} {
		if r := codec.NewReader(bad, "upstreams"); DecodeUpstreams(r) != nil || r.Err() == nil {
			t.Errorf("DecodeUpstreams(%x): no error", bad)
		}
	}
}

// A watermark the quiet advance raised lasts while the partition's markers
// are quiet: its next marker of its own watermark (it is active again, or
// a new owner's first) brings it back, never below what its own watermark
// gave. Before, the raised value stayed, and once the partition was
// active again the other partitions carried the frontier past its
// records.
func TestUpstreamsQuietRaiseEnds(t *testing.T) {
	u := NewUpstreams(2)
	u.Observe(1, 100_000, false)
	u.ObserveQuiet(0, 660_000, 60_000, true) // idle, raised by the quiet advance
	if got := u.Watermark(); got != 100_000 {
		t.Fatalf("partition 0 idle: watermark %d, want partition 1's 100000", got)
	}
	u.Observe(0, 120_000, false) // active again
	u.Observe(1, 300_000, false)
	if got := u.Watermark(); got != 120_000 {
		t.Fatalf("partition 0 active at its own 120000: watermark %d, want 120000", got)
	}
	u.ObserveQuiet(0, 700_000, 130_000, true)
	u.Observe(0, MinTime, false) // a new owner's first marker
	if wm, _, _ := u.Upstream(0); wm != 130_000 {
		t.Fatalf("after a new owner's first marker: partition 0 at %d, want its own last 130000", wm)
	}
}

// TestMarkedFrontier: records do not move a marked partition's watermark;
// Mark does, and never lowers it.
func TestMarkedFrontier(t *testing.T) {
	f := NewFrontier(Spec{Strategy: Monotonic, Every: 1, Marked: true})
	f.Assign(0, 0, true)
	f.Assign(1, 0, true)
	f.Observe(0, 100, 1)
	f.Observe(1, 100, 1)
	if f.Advance() || f.Value() != MinTime {
		t.Fatalf("records moved a marked frontier to %d", f.Value())
	}
	f.Mark(0, 50)
	f.Mark(1, 60)
	f.Mark(1, 10)
	if !f.Advance() || f.Value() != 50 {
		t.Fatalf("frontier %d after marks 50 and 60, want 50", f.Value())
	}
	if g, _ := f.Generator(1); g.Watermark != 60 || g.MaxTS != 100 || g.Seen != 1 {
		t.Errorf("partition 1 generator %+v, want watermark 60, max_ts 100, seen 1", g)
	}
}
