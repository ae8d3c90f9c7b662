package kafka

import (
	"sort"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The transaction commits exactly the engine's positions, for every
// assigned partition, under the input topic's name and id, whatever the
// client had prepared from what it polled.
func TestSetTxnOffsets(t *testing.T) {
	id := [16]byte{1, 2, 3}

	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.MemberID = "m-1"
	polled := kmsg.NewTxnOffsetCommitRequestTopic()
	polled.Topic, polled.TopicID = "in", [16]byte{9}
	pp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	pp.Partition, pp.Offset = 0, 500 // polled ahead of what was processed
	polled.Partitions = append(polled.Partitions, pp)
	req.Topics = append(req.Topics, polled)

	SetTxnOffsets(req, map[string][16]byte{"in": id}, map[string]map[int32]int64{"in": {0: 120, 3: 7}})
	if len(req.Topics) != 1 {
		t.Fatalf("%d topics", len(req.Topics))
	}
	got := req.Topics[0]
	if got.Topic != "in" || got.TopicID != ([16]byte{9}) {
		t.Fatalf("topic %q id %v: want the name and the id the client resolved", got.Topic, got.TopicID)
	}
	sort.Slice(got.Partitions, func(i, j int) bool { return got.Partitions[i].Partition < got.Partitions[j].Partition })
	want := []struct {
		part int32
		off  int64
	}{{0, 120}, {3, 7}}
	if len(got.Partitions) != len(want) {
		t.Fatalf("partitions %+v", got.Partitions)
	}
	for i, w := range want {
		pt := got.Partitions[i]
		if pt.Partition != w.part || pt.Offset != w.off || pt.LeaderEpoch != -1 || pt.Metadata == nil || *pt.Metadata != "m-1" {
			t.Errorf("partition %d: %+v, want offset %d", w.part, pt, w.off)
		}
	}

	// Nothing polled yet (the client prepared no topic): the stored id is used.
	req = kmsg.NewPtrTxnOffsetCommitRequest()
	SetTxnOffsets(req, map[string][16]byte{"in": id}, map[string]map[int32]int64{"in": {1: 1}})
	if len(req.Topics) != 1 || req.Topics[0].TopicID != ([16]byte{1, 2, 3}) || req.Topics[0].Partitions[0].Offset != 1 {
		t.Fatalf("without a prepared topic: %+v", req.Topics)
	}

	// No position: nothing to commit.
	SetTxnOffsets(req, map[string][16]byte{"in": id}, nil)
	if len(req.Topics) != 0 {
		t.Fatalf("no positions, yet %+v", req.Topics)
	}

	// Two topics (co-partitioned inputs): each under its own name and id.
	req = kmsg.NewPtrTxnOffsetCommitRequest()
	SetTxnOffsets(req, map[string][16]byte{"a": {1}, "b": {2}}, map[string]map[int32]int64{"b": {0: 5}, "a": {0: 9}, "c": {}})
	if len(req.Topics) != 2 || req.Topics[0].Topic != "a" || req.Topics[0].TopicID != ([16]byte{1}) || req.Topics[1].TopicID != ([16]byte{2}) ||
		req.Topics[0].Partitions[0].Offset != 9 || req.Topics[1].Partitions[0].Offset != 5 {
		t.Fatalf("two topics: %+v", req.Topics)
	}
}
