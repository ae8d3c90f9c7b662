package repartition

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/windowd/windowd/codec"
)

// TestKeyPartitionIsKafkas: a key's repartition partition is the one
// Kafka's default partitioner (franz-go's murmur2 sticky-key partitioner)
// gives, so other clients agree on where a key lives.
func TestKeyPartitionIsKafkas(t *testing.T) {
	kafka := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for _, n := range []int32{1, 3, 8, 64} {
		for i := 0; i < 500; i++ {
			key := fmt.Sprintf("user-%d%s", i, "xyz"[:i%4])
			want := int32(kafka.Partition(&kgo.Record{Key: []byte(key)}, int(n)))
			if got := KeyPartition(key, n); got != want {
				t.Fatalf("KeyPartition(%q, %d) = %d, Kafka's partitioner says %d", key, n, got, want)
			}
		}
	}
}

func TestMarkerEncoding(t *testing.T) {
	// Without Quiet, Base is the watermark. Upstream is not on the wire:
	// the Source stands for it.
	for _, c := range []struct {
		s Source
		m Marker
	}{{Source{}, Marker{}}, {Source{P: 7}, Marker{Watermark: math.MinInt64, Base: math.MinInt64, Time: 1700000000000}},
		{Source{P: math.MaxInt32, In: 7}, Marker{Watermark: -5, Base: -5, Idle: true, Time: -1}},
		{Source{P: 3, In: 1}, Marker{Watermark: 9000, Idle: true, Quiet: true, Base: 5000, Time: 1700000000000}}} {
		s, got, err := DecodeMarker(AppendMarker(nil, c.s, Marker{Upstream: 99, Watermark: c.m.Watermark, Idle: c.m.Idle, Quiet: c.m.Quiet, Base: c.m.Base, Time: c.m.Time}))
		if err != nil || got != c.m || s != c.s {
			t.Errorf("round trip of %+v of %+v: %+v of %+v, %v", c.m, c.s, got, s, err)
		}
	}
	for _, bad := range [][]byte{nil, {1}, {2, 0, 0, 0, 0}, {1, 2, 0, 0, 0}, {1, 0, 1, 0, 0}, {1, 8, 0, 0, 0},
		{1, 4, 0, 0, 0}, {1, 4, 0, 0, 0, 0}, append(AppendMarker(nil, Source{}, Marker{}), 0)} {
		if _, _, err := DecodeMarker(bad); err == nil {
			t.Errorf("DecodeMarker(%x): no error", bad)
		}
	}
	for _, s := range []Source{{P: 5}, {P: 5, In: 3}} {
		got, off, ok := DecodeUpstream(AppendUpstream(nil, s, 123456789))
		if !ok || got != s || off != 123456789 {
			t.Errorf("upstream round trip of %+v: %+v %d %v", s, got, off, ok)
		}
	}
	// One input writes what windowd always wrote: partition, offset.
	if got, want := AppendUpstream(nil, Source{P: 5}, 9), []byte{10, 18}; string(got) != string(want) {
		t.Errorf("upstream header of input 0: %x, want %x", got, want)
	}
	for _, bad := range [][]byte{nil, {1}, {1, 2, 0}, {1, 2, 3, 4}, {3, 0}} {
		if _, _, ok := DecodeUpstream(bad); ok {
			t.Errorf("DecodeUpstream(%x): ok", bad)
		}
	}
}

// TestLayoutSources: an input partition keeps its wire name when an
// earlier input gains partitions, though its upstream number moves; a
// layout does not have a partition added after it was made, nor an input
// it does not read.
func TestLayoutSources(t *testing.T) {
	before, after := NewLayout([]int32{4, 2}), NewLayout([]int32{6, 2})
	s := before.Source(4)
	if s != (Source{In: 1, P: 0}) {
		t.Fatalf("upstream 4 of [4 2]: %+v", s)
	}
	if u, ok := after.Upstream(s); !ok || u != 6 {
		t.Errorf("%+v in [6 2]: %d %v, want 6", s, u, ok)
	}
	for _, s := range []Source{{In: 0, P: 4}, {In: 2, P: 0}, {In: 1, P: 2}, {In: -1, P: 0}, {In: 0, P: -1}} {
		if u, ok := before.Upstream(s); ok {
			t.Errorf("%+v in [4 2]: %d, want none", s, u)
		}
	}
	for _, l := range []Layout{before, after, NewLayout([]int32{1}), NewLayout([]int32{3, 1, 7})} {
		w := codec.NewWriter(nil)
		l.Encode(w)
		r := codec.NewReader(w.Bytes(), "layout")
		if back, ok := DecodeLayout(r); !ok || r.Done() != nil || !back.Equal(l) || !slices.Equal(back.Counts(), l.Counts()) {
			t.Errorf("layout %v: round trip %v %v", l.Counts(), back.Counts(), ok)
		}
	}
	if before.Equal(after) {
		t.Error("[4 2] equals [6 2]")
	}
	one := NewLayout([]int32{3})
	if u, ok := one.Upstream(Source{P: 2}); !ok || u != 2 {
		t.Errorf("one input: partition 2 is upstream %d %v", u, ok)
	}
	if u, ok := one.Upstream(Source{P: 3}); ok {
		t.Errorf("one input of 3 partitions: partition 3 is upstream %d (added since: stage 2 has no table entry for it)", u)
	}
}
