package kafka

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

const (
	// PollTimeout bounds a poll: the processing-time tick of a member
	// whose partitions deliver nothing.
	PollTimeout = 100 * time.Millisecond
	// PollMaxRecords bounds the records of one poll. franz-go fetches
	// again from a broker only once its buffered fetch is taken whole, so
	// a poll that takes a fetch in several parts leaves the loop waiting
	// for the next one. With 1 MiB per partition a fetch of 4 partitions
	// held about 26,000 records of 160 bytes, and 30,000 rather than
	// 10,000 drained 2M records 9% faster on two cores (medians of five,
	// 1.67 against 1.84 s); at FetchPartitionBytes (512 KiB) it holds
	// about 13,000, and 30,000 still takes a fetch of 9 such partitions
	// whole (docs/PERFORMANCE.md).
	PollMaxRecords = 30000
	// errLogInterval spaces the fetch errors logged: they repeat every
	// poll while a broker is away.
	errLogInterval = 10 * time.Second
)

// Member is the poll loop of one consumer-group member, shared by a
// pipeline and a repartition stage. Its client is built with GroupOpts
// and, unless Hold, kgo.BlockRebalanceOnPoll: rebalance callbacks then run
// between polls, after Step and before the next poll.
type Member struct {
	Client *kgo.Client
	Log    *zap.Logger
	Now    func() time.Time
	// Mu guards the member's state: Step runs with it held.
	Mu *sync.Mutex
	// Hold takes Mu before the poll rather than after it (exactly_once,
	// whose callbacks serialise with the loop by Mu instead of
	// BlockRebalanceOnPoll): a rollback of a callback lands either before
	// the poll, whose records are then the rewound ones, or inside Step.
	Hold bool
	// Before, when set, runs before each poll without Mu; an error stops
	// the loop.
	Before func() error
	// Step processes one poll's records (Mu held); an error stops the loop.
	Step func(ctx context.Context, fetches kgo.Fetches) error
	// Wake, when set, says that Step has work besides records: the next
	// poll takes only what the client has buffered, without waiting for
	// more.
	Wake <-chan struct{}
	// After, when set, runs with Mu held after each Step and the
	// rebalance callbacks it let run; an error stops the loop (a failure
	// a callback recorded).
	After func() error

	lastErrLog time.Time
}

// Run polls until ctx is done or the client is closed (nil), or until
// Before, Step or After fails (that error). The caller then shuts the
// member down.
func (m *Member) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		if m.Before != nil {
			if err := m.Before(); err != nil {
				return err
			}
		}
		closed, err := m.poll(ctx)
		if closed {
			return nil
		}
		m.Client.AllowRebalance()
		if err == nil && m.After != nil {
			m.Mu.Lock()
			err = m.After()
			m.Mu.Unlock()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// poll polls once and runs Step; closed reports a closed client.
func (m *Member) poll(ctx context.Context) (closed bool, err error) {
	wait := PollTimeout
	select {
	case <-m.Wake:
		// Not a canceled context: franz-go returns nothing then, not
		// even what it has buffered.
		wait = time.Millisecond
	default:
	}
	pollCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if m.Hold {
		m.Mu.Lock()
		defer m.Mu.Unlock()
	}
	fetches := m.Client.PollRecords(pollCtx, PollMaxRecords)
	if fetches.IsClientClosed() {
		return true, nil
	}
	if !m.Hold {
		m.Mu.Lock()
		defer m.Mu.Unlock()
	}
	m.logFetchErrors(fetches)
	return false, m.Step(ctx, fetches)
}

// logFetchErrors logs a poll's fetch errors, at most one per
// errLogInterval; a poll's deadline is not an error. franz-go retries them.
func (m *Member) logFetchErrors(fetches kgo.Fetches) {
	now := m.Now()
	fetches.EachError(func(topic string, part int32, err error) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return
		}
		if now.Sub(m.lastErrLog) >= errLogInterval {
			m.lastErrLog = now
			m.Log.Warn("fetch error (retrying)", zap.String("topic", topic), zap.Int32("partition", part), zap.Error(err))
		}
	})
}
