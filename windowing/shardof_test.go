package windowing

import (
	"testing"

	"github.com/windowd/windowd/watermark"
)

// TestShardOf: partitions share a shard only with Options.Shards, and a
// catching-up shard's watermark is the least of its partitions'.
func TestShardOf(t *testing.T) {
	for _, c := range []struct {
		p           int32
		byPartition bool
		n           int32
		want        uint32
	}{
		{5, false, 0, 0}, {5, false, 2, 0}, {5, true, 0, 5}, {5, true, 2, 1}, {4, true, 2, 0}, {1, true, 4, 1},
	} {
		if got := shardOf(c.p, c.byPartition, c.n); got != c.want {
			t.Errorf("shardOf(%d, %v, %d) = %d, want %d", c.p, c.byPartition, c.n, got, c.want)
		}
	}
	wm := watermark.NewFrontier(watermark.Spec{Strategy: watermark.BoundedOutOfOrderness})
	if _, ok := shardWatermark(wm, 1, 2); ok {
		t.Fatal("a watermark of shard 1 with no partition known")
	}
	for p := int32(0); p < 6; p++ { // three inputs of two partitions
		wm.Assign(p, 0, true)
	}
	wm.Observe(1, 700, 0)
	wm.Observe(3, 300, 0)
	wm.Observe(5, 900, 0)
	wm.Observe(0, 100, 0)
	if got, ok := shardWatermark(wm, 1, 2); !ok || got != 300 {
		t.Errorf("shard 1 of partitions 1, 3, 5: %d, %v; want 300 (partition 3's)", got, ok)
	}
	if got, _ := shardWatermark(wm, 0, 2); got != watermark.MinTime {
		t.Errorf("shard 0, partitions 2 and 4 without a record: %d, want MinTime", got)
	}
	if got, ok := shardWatermark(wm, 1, 0); !ok || got != 700 {
		t.Errorf("shard 1 unshared: %d, %v; want partition 1's 700", got, ok)
	}
}
