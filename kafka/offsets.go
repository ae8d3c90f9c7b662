package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CommitTopicPositions commits positions (the next offset to consume, per
// partition, by topic) to cl's group in one commit; a partition's refusal
// is an error.
func CommitTopicPositions(ctx context.Context, cl *kgo.Client, positions map[string]map[int32]int64) error {
	uncommitted := map[string]map[int32]kgo.EpochOffset{}
	for topic, offs := range positions {
		for part, off := range offs {
			if uncommitted[topic] == nil {
				uncommitted[topic] = map[int32]kgo.EpochOffset{}
			}
			uncommitted[topic][part] = kgo.EpochOffset{Epoch: -1, Offset: off}
		}
	}
	if len(uncommitted) == 0 {
		return nil
	}
	var cerr error
	cl.CommitOffsetsSync(ctx, uncommitted,
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				cerr = err
				return
			}
			for _, t := range resp.Topics {
				for _, pt := range t.Partitions {
					if e := kerr.ErrorForCode(pt.ErrorCode); e != nil && cerr == nil {
						cerr = fmt.Errorf("commit %s[%d]: %w", t.Topic, pt.Partition, e)
					}
				}
			}
		})
	return cerr
}

// Unanswered reports an error of a request the cluster did not answer
// rather than refused: a broker that is down, starting or moving (no
// Kafka error at all, or a retriable one that outlived its retries). A
// later try may succeed. A TLS handshake failure and a canceled context
// are not among them.
func Unanswered(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || isTLSFailure(err) {
		return false
	}
	var ke *kerr.Error
	return !errors.As(err, &ke) || ke.Retriable
}

// IsFenced reports an error of a producer whose epoch the broker fenced
// (another producer with its transactional id, or its transaction timed
// out) or whose transaction the broker aborted.
func IsFenced(err error) bool {
	return errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidTxnState)
}

// EndOffsets lists the end offset (high watermark) of each partition of
// topic that the cluster answered for.
func EndOffsets(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	return listed(ends, topic), err
}

// StartOffsets lists the log start offset of each partition of topic that
// the cluster answered for.
func StartOffsets(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	return listed(starts, topic), err
}

func listed(l kadm.ListedOffsets, topic string) map[int32]int64 {
	out := map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) {
		if o.Topic == topic && o.Err == nil && o.Offset >= 0 {
			out[o.Partition] = o.Offset
		}
	})
	return out
}

// DeleteBefore deletes the records of topic's partitions below the given
// offsets (DeleteRecords): what every reader has processed.
func DeleteBefore(ctx context.Context, adm *kadm.Client, topic string, before map[int32]int64) error {
	del := kadm.Offsets{}
	for part, off := range before {
		del.AddOffset(topic, part, off, -1)
	}
	if len(del) == 0 {
		return nil
	}
	resp, err := adm.DeleteRecords(ctx, del)
	if err == nil {
		err = resp.Error()
	}
	return err
}
