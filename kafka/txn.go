package kafka

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeAssignment reads member's partitions of topic from the group's
// record of its stable assignment.
func DescribeAssignment(ctx context.Context, adm *kadm.Client, group, topic, member string) (map[int32]bool, error) {
	all, err := GroupAssignment(ctx, adm, group, topic)
	if err != nil {
		return nil, err
	}
	parts, ok := all[member]
	if !ok {
		return nil, fmt.Errorf("group %s has no member %s", group, member)
	}
	owned := map[int32]bool{}
	for _, part := range parts {
		owned[part] = true
	}
	return owned, nil
}

// GroupAssignment reads every member's partitions of topic from the
// group's record of its assignment; an error while the group is not
// stable (a rebalance is under way).
func GroupAssignment(ctx context.Context, adm *kadm.Client, group, topic string) (map[string][]int32, error) {
	members, err := GroupMembers(ctx, adm, group, topic)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]int32, len(members))
	for _, m := range members {
		out[m.ID] = m.Partitions
	}
	return out, nil
}

// SetTxnOffsets makes the transaction commit exactly the positions the
// engine has processed (franz-go would commit what was polled, which runs
// ahead of a cycle that ends mid-poll), and commit them in every
// transaction: the offset commit carries the group generation, and a
// member the group no longer knows gets its transaction aborted.
// positions are by topic; a topic's id is the one the client resolved, or
// else topicIDs'.
func SetTxnOffsets(req *kmsg.TxnOffsetCommitRequest, topicIDs map[string][16]byte, positions map[string]map[int32]int64) {
	ids := maps.Clone(topicIDs)
	for _, t := range req.Topics {
		if t.TopicID != ([16]byte{}) {
			if ids == nil {
				ids = map[string][16]byte{}
			}
			ids[t.Topic] = t.TopicID
		}
	}
	req.Topics = req.Topics[:0]
	for _, topic := range slices.Sorted(maps.Keys(positions)) {
		if len(positions[topic]) == 0 {
			continue
		}
		t := kmsg.NewTxnOffsetCommitRequestTopic()
		t.Topic, t.TopicID = topic, ids[topic]
		for part, off := range positions[topic] {
			pt := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			pt.Partition, pt.Offset, pt.LeaderEpoch = part, off, -1
			pt.Metadata = &req.MemberID
			t.Partitions = append(t.Partitions, pt)
		}
		req.Topics = append(req.Topics, t)
	}
}

// TopicID reads the input topic's id, which the transaction's offset
// commits carry (TxnOffsetCommit v6+).
func TopicID(ctx context.Context, adm *kadm.Client, topic string) ([16]byte, error) {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tds, err := adm.ListTopics(lctx, topic)
	if err != nil {
		return [16]byte{}, fmt.Errorf("looking up topic %s: %w", topic, err)
	}
	td, ok := tds[topic]
	if !ok || td.Err != nil {
		return [16]byte{}, fmt.Errorf("looking up topic %s: %v", topic, td.Err)
	}
	return td.ID, nil
}
