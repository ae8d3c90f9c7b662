package repartition

import (
	"fmt"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
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
	// Without Quiet, Base is the watermark.
	for _, m := range []Marker{{}, {Upstream: 7, Watermark: math.MinInt64, Base: math.MinInt64, Time: 1700000000000},
		{Upstream: math.MaxInt32, Watermark: -5, Base: -5, Idle: true, Time: -1},
		{Upstream: 3, Watermark: 9000, Idle: true, Quiet: true, Base: 5000, Time: 1700000000000}} {
		got, err := DecodeMarker(AppendMarker(nil, m))
		if err != nil || got != m {
			t.Errorf("round trip of %+v: %+v, %v", m, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {1}, {2, 0, 0, 0, 0}, {1, 2, 0, 0, 0}, {1, 0, 1, 0, 0}, {1, 4, 0, 0, 0}, append(AppendMarker(nil, Marker{}), 0)} {
		if _, err := DecodeMarker(bad); err == nil {
			t.Errorf("DecodeMarker(%x): no error", bad)
		}
	}
	p, off, ok := DecodeUpstream(AppendUpstream(nil, 5, 123456789))
	if !ok || p != 5 || off != 123456789 {
		t.Errorf("upstream round trip: %d %d %v", p, off, ok)
	}
	for _, bad := range [][]byte{nil, {1}, {1, 2, 3}, {3, 0}} {
		if _, _, ok := DecodeUpstream(bad); ok {
			t.Errorf("DecodeUpstream(%x): ok", bad)
		}
	}
}
