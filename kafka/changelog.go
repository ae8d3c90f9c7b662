package kafka

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// PartitionBounds lists the log start and end offsets of partition part of
// topic, retrying (with a metadata refresh, RefreshTopicMetadata) until the
// cluster gives an answer or ctx ends. A broker that does not know the
// partition's offsets yet is not an answer: reading nothing from there
// would restore an empty state.
func PartitionBounds(ctx context.Context, cl *kgo.Client, adm *kadm.Client, topic string, part int32, log *zap.Logger) (lo, hi int64, err error) {
	for backoff := 250 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		starts, err1 := adm.ListStartOffsets(lctx, topic)
		ends, err2 := adm.ListEndOffsets(lctx, topic)
		cancel()
		err = errors.Join(err1, err2)
		if err == nil {
			s, ok1 := starts.Lookup(topic, part)
			e, ok2 := ends.Lookup(topic, part)
			switch {
			case !ok1 || !ok2:
				err = fmt.Errorf("%s has no partition %d", topic, part)
			case s.Err != nil || e.Err != nil:
				err = errors.Join(s.Err, e.Err)
			case s.Offset < 0 || e.Offset < s.Offset:
				err = fmt.Errorf("%s[%d] listed as [%d, %d)", topic, part, s.Offset, e.Offset)
			default:
				return s.Offset, e.Offset, nil
			}
		}
		if ctx.Err() != nil {
			return 0, 0, ctx.Err()
		}
		log.Warn("listing changelog offsets failed (retrying)", zap.Int32("partition", part), zap.Error(err))
		RefreshTopicMetadata(ctx, cl, topic)
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(backoff):
		}
	}
}

// ReadPartition reads partition part of topic from offset from to hi
// (exclusive), read_committed, with a client of base's connection
// options: apply gets every data record in offset order (not the
// transactions' commit and abort markers), afterPoll runs after each
// poll's records. Fetch errors are retried; the first error of apply or
// afterPoll, or ctx's end, stops it.
func ReadPartition(ctx context.Context, base []kgo.Opt, topic string, part int32, from, hi int64, log *zap.Logger,
	apply func(*kgo.Record) error, afterPoll func() error) error {
	_, err := readPartition(ctx, base, topic, part, from, hi, 0, log, apply, afterPoll)
	return err
}

// TailPartition is ReadPartition without an end: it follows the partition
// as it grows, and runs afterPoll at least every tick, records or not. It
// stops at the first error of apply or afterPoll (returned), or ctx's end,
// and returns the offset it would have read next.
func TailPartition(ctx context.Context, base []kgo.Opt, topic string, part int32, from int64, tick time.Duration, log *zap.Logger,
	apply func(*kgo.Record) error, afterPoll func() error) (next int64, err error) {
	return readPartition(ctx, base, topic, part, from, math.MaxInt64, tick, log, apply, afterPoll)
}

func readPartition(ctx context.Context, base []kgo.Opt, topic string, part int32, from, hi int64, tick time.Duration, log *zap.Logger,
	apply func(*kgo.Record) error, afterPoll func() error) (int64, error) {
	opts := append(append([]kgo.Opt(nil), base...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// exactly_once: aborted records are not returned, but the abort
		// and commit markers after them are, so the read reaches the end
		// offset (the end of the last transaction).
		kgo.KeepControlRecords(),
		kgo.FetchMaxBytes(32<<20),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return from, err
	}
	defer cl.Close()
	next := from
	for next < hi {
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if tick > 0 {
			pctx, cancel = context.WithTimeout(ctx, tick)
		}
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return next, ctx.Err()
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				ferr = err
			}
		})
		if ferr != nil {
			log.Warn("reading the changelog failed (retrying)", zap.Int32("partition", part), zap.Error(ferr))
		}
		var aerr error
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			for _, r := range fp.Records {
				if aerr != nil {
					return
				}
				next = r.Offset + 1
				if r.Attrs.IsControl() {
					continue // a transaction's commit or abort marker
				}
				aerr = apply(r)
			}
			// Offsets past the last stable offset hold no data record
			// (transaction markers).
			if len(fp.Records) == 0 && fp.LastStableOffset >= hi && fp.Err == nil {
				next = max(next, hi)
			}
		})
		if aerr != nil {
			return next, aerr
		}
		if err := afterPoll(); err != nil {
			return next, err
		}
	}
	return next, nil
}
