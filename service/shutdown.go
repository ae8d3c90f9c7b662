package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// shutdown commits what was processed (unless the pipeline failed), leaves
// the group and closes everything, within grace of now (docs/OPERATIONS.md,
// shutdown): the final commit gets all but a share of grace kept for
// leaving the group; a commit still running then (a transaction's end
// waiting for a broker that is down, a restore holding the pipeline) is
// abandoned, and so is a client that cannot leave a group stuck in a
// rebalance. What was not committed is processed again after a restart
// (at_least_once) or rolled back (exactly_once), so giving up loses
// nothing; only a pipeline that failed (cause) makes the shutdown fail.
func (p *pipeline) shutdown(cause error, grace time.Duration) error {
	deadline := time.Now().Add(grace - shutdownMargin(grace))
	commitBy := deadline.Add(-leaveBudget(grace))
	p.closing.Store(true)
	p.stopRestores()
	if cause != nil {
		cause = fmt.Errorf("pipeline %s: %w", p.cfg.Name, cause)
	}
	committed := make(chan error, 1)
	go func() { committed <- p.finalCommit(cause, commitBy) }()
	var err error
	select {
	case err = <-committed:
	case <-time.After(time.Until(commitBy)):
		p.log.Error("shutdown grace: the final commit did not finish in time; exiting without it (uncommitted work is processed again after a restart, or rolled back under exactly_once)",
			zap.Duration("shutdown_grace", grace))
		closeWithin(p.cl, deadline, p.log)
		p.prodCancel()
		p.m.ready.WithLabelValues(p.cfg.Name).Set(0)
		return cause
	}
	if err != nil && cause == nil {
		p.log.Error("final commit failed; exiting without it (uncommitted work is processed again after a restart, or rolled back under exactly_once)", zap.Error(err))
	}
	if cause == nil && err == nil {
		lctx, cancel := context.WithDeadline(context.Background(), deadline)
		_ = p.cl.LeaveGroupContext(lctx)
		cancel()
	}
	closeWithin(p.cl, deadline, p.log)
	p.prodCancel()
	p.closeQuery()
	if cerr := p.db.Close(); cerr != nil && cause == nil {
		cause = cerr
	}
	p.m.ready.WithLabelValues(p.cfg.Name).Set(0)
	return cause
}

// finalCommit runs the last commit cycle (none after a failure: cause) and
// stops the pane writer; under exactly_once a committed cycle marks the
// local state clean.
func (p *pipeline) finalCommit(cause error, by time.Time) error {
	gctx, cancel := context.WithDeadline(context.Background(), by)
	defer cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	if cause == nil {
		if err = p.commitLocked(gctx, true); errors.Is(err, errRolledBack) {
			err = nil // back at the last committed transaction: as clean
		}
		if err == nil && p.eos {
			err = p.markCleanLocked()
		}
	}
	p.mu.panes.stop()
	return err
}

// shutdownMargin is the part of grace a pipeline leaves the process for
// returning and exiting.
func shutdownMargin(grace time.Duration) time.Duration { return min(grace/10, 500*time.Millisecond) }

// leaveBudget is the part of grace kept for leaving the group and closing
// the client after the final commit.
func leaveBudget(grace time.Duration) time.Duration { return min(grace/4, 2*time.Second) }

// closeWithin closes cl, waiting for it until deadline at most: a client
// whose group is stuck in a rebalance (waiting for a dead member's session
// to expire) cannot leave it sooner, and the process must not wait for it.
func closeWithin(cl *kgo.Client, deadline time.Time, log *zap.Logger) {
	closed := make(chan struct{})
	go func() { cl.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(time.Until(deadline)):
		log.Warn("shutdown grace: the Kafka client did not close in time (the group is rebalancing?); the group drops this member when its session times out")
	}
}
