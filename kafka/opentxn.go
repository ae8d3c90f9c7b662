package kafka

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OpenTxn is a transaction open on a partition. Until it ends, the
// partition's last stable offset stays at its first offset, and
// read_committed readers (a changelog restore) wait there.
type OpenTxn struct {
	Topic         string
	Partition     int32
	ProducerID    int64
	ProducerEpoch int16
	StartOffset   int64     // its first record's offset
	LastWrite     time.Time // the producer's last write to the partition
	// Lost: the transaction belongs to windowd's own transactional id,
	// whose coordinator has moved past it (a later epoch, not in the
	// middle of ending one), yet no marker reached this partition. The
	// broker lost its markers; nothing but an operator's abort ends it
	// (docs/OPERATIONS.md, Broker failures).
	Lost bool
	// Coordinator: for a lost transaction, the state and epoch its
	// transactional id's coordinator holds.
	CoordinatorState string
	CoordinatorEpoch int16
}

func (t OpenTxn) String() string {
	s := fmt.Sprintf("a transaction open on %s/%d from offset %d (producer %d, epoch %d, last write %s)",
		t.Topic, t.Partition, t.StartOffset, t.ProducerID, t.ProducerEpoch, t.LastWrite.UTC().Format(time.RFC3339))
	if t.Lost {
		s += fmt.Sprintf(" that the broker left hanging: its transactional id is at epoch %d (%s), no marker will end it",
			t.CoordinatorEpoch, t.CoordinatorState)
	}
	return s
}

// OpenTransactions lists the transactions open on partition part of
// topic, oldest first. txnID, when not empty, is windowd's own
// transactional id: its coordinator's state tells a transaction the broker
// lost from one still running.
func OpenTransactions(ctx context.Context, adm *kadm.Client, topic string, part int32, txnID string) ([]OpenTxn, error) {
	set := make(kadm.TopicsSet)
	set.Add(topic, part)
	prods, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		return nil, err
	}
	var described []kadm.DescribedProducer
	var perr error
	prods.EachPartition(func(p kadm.DescribedProducersPartition) {
		if p.Err != nil {
			perr = fmt.Errorf("%s/%d: %w", p.Topic, p.Partition, p.Err)
		}
	})
	if perr != nil {
		return nil, perr
	}
	prods.EachProducer(func(p kadm.DescribedProducer) { described = append(described, p) })
	var own *kadm.DescribedTransaction
	if txnID != "" {
		txns, err := adm.DescribeTransactions(ctx, txnID)
		if err != nil {
			return nil, err
		}
		if d, ok := txns[txnID]; ok && d.Err == nil {
			own = &d
		}
	}
	return openTxns(described, own), nil
}

// openTxns picks the producers with a transaction open (oldest first) and
// marks as Lost those of own's producer id at an epoch own has passed.
// own (nil: unknown) is windowd's transactional id as its coordinator
// describes it. A coordinator preparing a commit or an abort is still
// writing markers: only a settled state (Empty, Ongoing, CompleteCommit,
// CompleteAbort) proves the older epoch's markers are not coming.
func openTxns(prods []kadm.DescribedProducer, own *kadm.DescribedTransaction) []OpenTxn {
	var out []OpenTxn
	for _, p := range prods {
		if p.CurrentTxnStartOffset < 0 {
			continue
		}
		t := OpenTxn{Topic: p.Topic, Partition: p.Partition, ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch,
			StartOffset: p.CurrentTxnStartOffset, LastWrite: time.UnixMilli(p.LastTimestamp)}
		if own != nil && own.ProducerID == p.ProducerID && own.ProducerEpoch > p.ProducerEpoch {
			switch own.State {
			case "Empty", "Ongoing", "CompleteCommit", "CompleteAbort":
				t.Lost, t.CoordinatorState, t.CoordinatorEpoch = true, own.State, own.ProducerEpoch
			}
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b OpenTxn) int { return cmp.Compare(a.StartOffset, b.StartOffset) })
	return out
}

// OffsetsTopic is Kafka's topic of the groups' committed offsets.
const OffsetsTopic = "__consumer_offsets"

// PendingGroupOffsets returns which of parts (partitions of topic) have
// committed offsets of group that a transaction holds: a require_stable
// offset fetch (what franz-go's group consumer sends after each
// assignment, retried every second for as long as it lasts) answers
// UNSTABLE_OFFSET_COMMIT for them until the transaction ends. The request
// names the partitions: a fetch of all the group's offsets lists only
// those committed, not those only pending.
func PendingGroupOffsets(ctx context.Context, cl *kgo.Client, adm *kadm.Client, group, topic string, parts []int32) ([]int32, error) {
	id, err := TopicID(ctx, adm, topic)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.RequireStable = true
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic, rt.TopicID, rt.Partitions = topic, id, parts
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	var pending []int32
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return nil, err
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == kerr.UnstableOffsetCommit.Code {
					pending = append(pending, p.Partition)
				}
			}
		}
	}
	slices.Sort(pending)
	return pending, nil
}

// GroupOffsetsPartition returns the partition of OffsetsTopic that holds
// group's committed offsets, as the broker picks it: the group id's Java
// String.hashCode, made non-negative by clearing its sign bit (Kafka's
// Utils.abs), modulo the topic's partitions.
func GroupOffsetsPartition(group string, partitions int) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(group)) {
		h = 31*h + int32(u)
	}
	return int32(int(h&0x7fffffff) % partitions)
}

// GroupOffsetsTransactions lists the transactions open on the partition of
// OffsetsTopic that holds group's offsets (GroupOffsetsPartition), as
// OpenTransactions does.
func GroupOffsetsTransactions(ctx context.Context, adm *kadm.Client, group, txnID string) ([]OpenTxn, error) {
	td, err := adm.ListTopicsWithInternal(ctx, OffsetsTopic)
	if err != nil {
		return nil, err
	}
	t, ok := td[OffsetsTopic]
	switch {
	case !ok || len(t.Partitions) == 0 && t.Err == nil:
		return nil, fmt.Errorf("listing %s: the broker named no partition of it", OffsetsTopic)
	case t.Err != nil:
		return nil, fmt.Errorf("listing %s: %w", OffsetsTopic, t.Err)
	}
	return OpenTransactions(ctx, adm, OffsetsTopic, GroupOffsetsPartition(group, len(t.Partitions)), txnID)
}
