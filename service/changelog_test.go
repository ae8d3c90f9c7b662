package service

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/watermark"
)

func TestMarkerRoundTrip(t *testing.T) {
	m := marker{position: 901, gen: watermark.Generator{MaxTS: 1700000123456, Seen: 42, Watermark: 1700000121456}, frontier: -5}
	got, err := decodeMarker(encodeMarker(m))
	if err != nil || got != m {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	b := encodeMarker(m)
	for _, bad := range [][]byte{nil, {2}, b[:len(b)-1], append(append([]byte(nil), b...), 0)} {
		if _, err := decodeMarker(bad); err == nil {
			t.Errorf("decodeMarker(%v) accepted a corrupt marker", bad)
		}
	}
}

func TestSkipSetsRoundTrip(t *testing.T) {
	in := map[int32]*skipSet{
		0: {keys: map[string]int64{"u1": 10, "": 3, "u\x00bin": 12}, max: 12},
		7: {keys: map[string]int64{"k": 1 << 40}, max: 1 << 40},
	}
	out, err := decodeSkip(encodeSkip(in))
	if err != nil || !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
	if out, err := decodeSkip(nil); err != nil || len(out) != 0 {
		t.Fatalf("absent: %+v, %v", out, err)
	}
	b := encodeSkip(in)
	if _, err := decodeSkip(b[:len(b)-2]); err == nil {
		t.Fatal("truncated skip sets accepted")
	}
}

func TestOffsetsRoundTrip(t *testing.T) {
	in := map[int32]int64{0: 0, 3: 12345, 9: -1}
	out := map[int32]int64{}
	if err := decodeOffsets(encodeOffsets(in), out); err != nil || !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip: %v, %v", out, err)
	}
}

func TestChangelogTopicName(t *testing.T) {
	p := &config.Pipeline{Name: "clicks"}
	p.Input.Group = "windowd-clicks"
	if got := changelogTopic(p); got != "windowd-clicks-clicks-changelog" {
		t.Fatalf("changelog topic %q", got)
	}
}

// The changelog partitioner keeps partition p's state on changelog
// partition p and leaves every other topic to the default partitioner,
// which sends equal keys to one partition.
func TestChangelogPartitioner(t *testing.T) {
	cp := newChangelogPartitioner("g-p-changelog")
	tp := cp.ForTopic("g-p-changelog")
	for _, part := range []int32{0, 3, 7} {
		r := &kgo.Record{Topic: "g-p-changelog", Partition: part, Key: []byte("kuser")}
		if got := tp.Partition(r, 8); got != int(part) {
			t.Fatalf("changelog record of partition %d went to %d", part, got)
		}
	}
	out, ok := cp.ForTopic("out").(kgo.TopicBackupPartitioner)
	if !ok {
		t.Fatalf("the output topic's partitioner is %T, not franz-go's default", cp.ForTopic("out"))
	}
	r := &kgo.Record{Topic: "out", Key: []byte("u1"), Partition: 5}
	if !out.RequiresConsistency(r) {
		t.Fatal("keyed pane records are not partitioned by key")
	}
	first := out.PartitionByBackup(r, 8, nil)
	for i := 0; i < 20; i++ {
		if got := out.PartitionByBackup(&kgo.Record{Topic: "out", Key: []byte("u1"), Partition: int32(i % 8)}, 8, nil); got != first {
			t.Fatalf("pane records of one key went to partitions %d and %d", first, got)
		}
	}
}
