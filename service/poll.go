package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/kafka"
	"github.com/windowd/windowd/windowing"
)

// run is the poll loop; it returns nil when ctx is done and the final
// commit succeeded, or the error that stopped it.
func (p *pipeline) run(ctx context.Context, grace time.Duration) error {
	// The group's callbacks may already be running (the client joined
	// when the pipeline was built), and their commit cycles set it too.
	p.mu.Lock()
	p.mu.lastCommit = p.now()
	p.mu.Unlock()
	var stage1 chan error
	if p.up != nil {
		// Stage 1 stops with this loop: the stage that fails first stops both.
		upCtx, stopUp := context.WithCancel(ctx)
		defer stopUp()
		stage1 = make(chan error, 1)
		go func() { stage1 <- p.up.run(upCtx, grace) }()
		defer func() {
			stopUp()
			if uerr := <-stage1; uerr != nil {
				p.log.Error("repartition stage stopped", zap.Error(uerr))
			}
		}()
	}
	if p.standbys > 0 {
		planCtx, stopPlan := context.WithCancel(ctx)
		defer stopPlan()
		go p.planStandbys(planCtx)
	}
	offCtx, stopOff := context.WithCancel(ctx)
	defer stopOff()
	go p.watchOffsets(offCtx)
	m := &kafka.Member{
		Client: p.cl, Log: p.log, Now: p.now, Mu: &p.mu.Mutex,
		// Under exactly_once, mu is held from the poll through step. A
		// rollback (of a rebalance callback, or of a commit cycle in
		// step) rewinds the consumer, and franz-go drops what it had
		// buffered; holding mu puts every rollback either before the
		// poll, whose records are then the rewound ones, or inside step,
		// which drops the rest of the poll. (franz-go also rules out
		// polling while a transaction ends, which callbacks do under mu.)
		// Callbacks wait for mu at most a poll's timeout. Not otherwise:
		// BlockRebalanceOnPoll makes callbacks wait for AllowRebalance,
		// and a poll waits for a rebalance's callbacks, which wait for mu.
		Hold: p.eos,
		Step: p.stepLocked,
		// A restore's reader has a batch for step to apply.
		Wake: p.rs.wake,
		// A failure a rebalance callback recorded.
		After: func() error { return p.mu.failed },
	}
	if stage1 != nil {
		m.Before = func() error {
			select {
			case uerr := <-stage1:
				if uerr == nil {
					uerr = errors.New("repartition stage stopped")
				}
				stage1 <- nil // for the deferred wait; the error is reported once, below
				return uerr
			default:
				return nil
			}
		}
	}
	return p.shutdown(m.Run(ctx), grace)
}

// stepLocked runs one poll through the step order of docs/SEMANTICS.md: the
// poll's records, then what the loop keeps up between polls (releases,
// restores, high watermarks, the exactly_once settlement), the
// processing-time tick, the registry and alignment pauses, and the commit
// cycle when it is due.
func (p *pipeline) stepLocked(ctx context.Context, fetches kgo.Fetches) error {
	defer p.mu.panes.flush() // the poll's panes go out now, not at the next cycle
	p.applyReleasedLocked()
	now := p.now()
	if err := p.processPollLocked(ctx, fetches, now); err != nil {
		return err
	}
	if err := p.keepUpLocked(ctx, now); err != nil {
		return err
	}
	if err := p.mu.eng.Tick(p.nowMS()); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	if err := p.releaseGatedLocked(); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	p.pausePartitionsLocked()
	if p.commitDueLocked() {
		if _, err := p.commitCycleLocked(ctx); err != nil {
			return err
		}
	}
	p.updateMetricsLocked()
	return nil
}

// prefetchRecords is how many records the loop has the engine prefetch
// the state of at a time (prefetchLocked).
const prefetchRecords = windowing.PrefetchBatch

// prefetcher is an engine that reads records' state ahead
// (windowing.Engine.PrefetchKeys; the join's engine does not).
type prefetcher interface {
	PrefetchKeys(part int32, keys []string)
}

// prefetchLocked finds PrefetchKeys by a type assertion at run time, where a
// renamed method would quietly turn prefetching off; this makes it a
// compile error.
var _ prefetcher = (*windowing.Engine)(nil)

// prefetchLocked has the engine read the state of the records of
// partition part decoded in ds before it processes them: their loads
// overlap rather than come one record at a time.
func (p *pipeline) prefetchLocked(part int32, ds []decoded) {
	pf, ok := p.mu.eng.(prefetcher)
	if !ok {
		return
	}
	keys := p.mu.prefetchKeys[:0]
	for i := range ds {
		if ds[i].err == nil {
			keys = append(keys, ds[i].ev.Key)
		}
	}
	pf.PrefetchKeys(part, keys)
	clear(keys) // do not keep the poll's records alive
	p.mu.prefetchKeys = keys
}

// processPollLocked feeds the poll's records to the engine in order,
// running a commit cycle in the middle when uncommitted state has grown
// past its bound. After a rollback the rest of the poll is dropped: the
// rewound fetches deliver it again.
func (p *pipeline) processPollLocked(ctx context.Context, fetches kgo.Fetches, now time.Time) error {
	var err error
	rolledBack, dropped := false, 0
	p.in.renumber(fetches) // co-partitioned inputs: one topic of the pipeline's partitions
	poll := p.mu.ahead.start(fetches, p.cfg.Input.Topic, now.UnixMilli())
	next := 0 // the poll's number of fp.Records[0]
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		if err != nil || fp.Topic != p.cfg.Input.Topic {
			return
		}
		first := next
		next += len(fp.Records)
		if rolledBack {
			dropped += len(fp.Records)
			return
		}
		st := p.mu.parts[fp.Partition]
		if st == nil {
			return // polled before the partition was revoked: no longer ours
		}
		if fp.HighWatermark > st.end {
			st.end = fp.HighWatermark
		}
		for i, r := range fp.Records {
			if i%prefetchRecords == 0 {
				p.prefetchLocked(fp.Partition, poll.decoded(first+i, first+min(i+prefetchRecords, len(fp.Records))))
			}
			if err = p.handleDecodedLocked(r, poll.get(first+i), now.UnixMilli()); err != nil {
				var wait *registryUnavailable
				if errors.As(err, &wait) {
					// The rest of the partition's poll comes again
					// once the registry answers (registrywait.go);
					// meanwhile the partition holds the frontier.
					p.mu.wait.hold(r.Partition, r, wait.un, p.now())
					p.mu.eng.Watermarks().Wait(r.Partition)
					err = nil
				}
				return
			}
			if !p.mu.eng.NeedsCheckpoint() {
				continue
			}
			// Bound memory: uncommitted state writes must not pile
			// up until the next interval. After a rollback the rest
			// of the poll comes again: the rollback rewound the
			// partitions processed since the checkpoint, and the
			// abort reset every other partition franz-go delivered
			// records of to its committed offset.
			if rolledBack, err = p.commitCycleLocked(ctx); rolledBack {
				dropped += len(fp.Records) - i - 1
			}
			if rolledBack || err != nil {
				return
			}
		}
		// The fetch told the partition's end: whether it is caught up
		// (and so may turn idle) is known now, not only at the next
		// listing of the ends.
		p.mu.eng.Watermarks().SetCaughtUp(fp.Partition, st.caughtUp())
	})
	poll.finish() // the poll's records go back to their pool (recordpool.go)
	if dropped > 0 {
		p.log.Info("dropped the rest of a poll after a rollback; the rewound fetches deliver it again", zap.Int("records", dropped))
	}
	return err
}

// keepUpLocked does what the loop keeps up between polls: standbys,
// finished restores, the partitions' high watermarks (idleness) and kept
// lost state, and under exactly_once the settlement of the assignment.
func (p *pipeline) keepUpLocked(ctx context.Context, now time.Time) error {
	p.reconcileStandbysLocked()
	if err := p.applyRestoresLocked(ctx); err != nil && !errors.Is(err, errRolledBack) {
		return err
	}
	if now.Sub(p.mu.lastEnds) >= endsInterval {
		p.mu.lastEnds = now
		p.refreshEndsLocked(ctx)
		if err := p.dropExpiredHoldsLocked(); err != nil {
			return fatalError{err}
		}
	}
	if p.eos && p.unsettled() && p.now().Sub(p.mu.lastSettle) >= time.Second {
		// No session has settled the assignment yet (the group was
		// rebalancing again, or could not be read): commits wait.
		return p.settleAssignmentLocked(ctx, 1)
	}
	return nil
}

// pausePartitionsLocked runs the registry outage's and the alignment's pauses.
func (p *pipeline) pausePartitionsLocked() {
	if p.mu.wait != nil {
		var aligned func(int32) bool
		if p.mu.align != nil {
			aligned = p.mu.eng.Watermarks().Paused
		}
		p.mu.wait.step(p.now(), aligned)
		p.mu.wait.recovered(p.reg)
	}
	if p.mu.align != nil {
		p.mu.align.step(p.mu.eng.Watermarks(), p.now())
	}
}

// commitCycleLocked runs a commit cycle and is the one place a failed cycle is
// handled: a rollback reports rolledBack, a fatal error is
// returned, and any other failure is counted, logged and retried at the
// next cycle (offsets not committed meanwhile).
func (p *pipeline) commitCycleLocked(ctx context.Context) (rolledBack bool, err error) {
	switch err = p.commitLocked(ctx, true); {
	case err == nil:
		return false, nil
	case errors.Is(err, errRolledBack):
		return true, nil
	case isFatal(err):
		return false, err
	}
	p.m.commitFailures.WithLabelValues(p.cfg.Name).Inc()
	p.log.Warn("commit cycle failed; offsets not committed, will retry", zap.Error(err))
	return false, nil
}
