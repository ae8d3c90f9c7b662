package service

import (
	"context"
	"fmt"
	"time"

	"github.com/windowd/windowd/kafka"
)

// commitLocked runs the commit cycle: write the changed keys and the
// partition markers to the changelog, wait for every produced record (panes,
// dead letters, changelog) to be acknowledged, write state, offsets and the
// frontier to Pebble in one synced batch, then commit the offsets to the
// group.
func (p *pipeline) commitLocked(ctx context.Context, toGroup bool) error {
	// Every pane emitted so far is produced before the cycle flushes,
	// ends the transaction or rolls back.
	p.mu.panes.sync()
	if p.eos {
		// The offsets commit with the transaction, always. The cycles of
		// assignment (toGroup false) and shutdown must end the open
		// transaction; the poll loop's may wait for the group to settle.
		return p.commitTxnLocked(ctx, !toGroup || p.closing.Load())
	}
	start := p.now()
	p.cycleStartedLocked(start)
	// The cycle's panes, dead letters and late records are acknowledged
	// before the state that produced them reaches the changelog: a key
	// value logged there is restored ahead of the input position (its
	// records are skipped, docs/SEMANTICS.md, State follows partitions),
	// so a crash with the value logged but a pane of it not yet written
	// would lose that pane for good.
	if err := p.flushOutputLocked(ctx); err != nil {
		return err
	}
	// After the cycle's panes, acknowledged above (docs/SEMANTICS.md,
	// Progress records).
	p.writeProgressLocked(ctx, p.closing.Load())
	if since := p.now().Sub(time.Unix(0, p.lastCommitOK.Load())); since > p.session {
		// No cycle succeeded within the session: the process may have
		// been paused (stopped, a long GC, a VM suspended) and the group
		// may have given its partitions to another member, whose
		// changelog records this cycle's would follow. Before writing any,
		// the group must still know this member (changelogWrittenLocked).
		if err := p.probeMembershipLocked(ctx); err != nil {
			return fmt.Errorf("no commit cycle for %s, more than the session: the group did not confirm this member, so no changelog record is written yet: %w", since.Round(time.Millisecond), err)
		}
	}
	// State changes go to the changelog before anything is committed.
	if err := p.mu.eng.Flush(); err != nil {
		return fatalError{fmt.Errorf("state flush: %w", err)}
	}
	acks := p.writeChangelogLocked()
	if err := p.flushOutputLocked(ctx); err != nil {
		return err
	}
	if err := acks.Err(); err != nil {
		return fatalError{fmt.Errorf("changelog not acknowledged: %w", err)}
	}
	if err := p.checkpointLocked(acks); err != nil {
		return err
	}
	if toGroup {
		if err := p.commitGroupLocked(ctx); err != nil {
			return err
		}
		if p.mu.rp != nil {
			p.purgeRepartitionLocked(ctx)
		}
	}
	p.cycleDone(start)
	return nil
}

// probeMembershipLocked asks the group whether it still knows this member
// by committing again the offsets the member committed last for the
// partitions assigned to it, which changes nothing: a member the group
// dropped gets UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION (its client then
// reports the partitions lost). Only assigned partitions: the group does
// not check whose a partition is, and another member's newer offset must
// stay.
func (p *pipeline) probeMembershipLocked(ctx context.Context) error {
	last := map[int32]int64{}
	for topic, offs := range p.cl.CommittedOffsets() {
		for kp, eo := range offs {
			part, ok := p.in.id(topic, kp)
			if _, mine := p.mu.parts[part]; ok && mine && eo.Offset >= 0 {
				last[part] = eo.Offset
			}
		}
	}
	return kafka.CommitTopicPositions(ctx, p.cl, p.in.offsetsToKafka(last))
}

// flushOutputLocked waits until every record produced so far is
// acknowledged; a refusal is fatal.
func (p *pipeline) flushOutputLocked(ctx context.Context) error {
	if err := p.prod.Flush(ctx); err != nil {
		if ctx.Err() != nil {
			return err
		}
		return fatalError{fmt.Errorf("output not acknowledged: %w", err)}
	}
	return nil
}

// checkpointLocked makes the local checkpoint: the changelog positions
// of the cycle's acknowledged records (acks nil: none), the offsets, the
// state and the frontier, in one synced Pebble batch.
func (p *pipeline) checkpointLocked(acks *kafka.Batch) error {
	if acks != nil {
		p.changelogWrittenLocked(acks)
	}
	offsets := p.offsetsToStoreLocked()
	if err := p.putLocalMeta(offsets); err != nil {
		return fatalError{err}
	}
	p.sealQueryLocked()
	if err := p.mu.eng.Checkpoint(true); err != nil {
		return fatalError{fmt.Errorf("state checkpoint: %w", err)}
	}
	p.publishQueryLocked()
	p.rearmedLocked()
	if p.mu.eng.Drained() && !p.mu.drainLogged {
		p.mu.drainLogged = true
		p.log.Info("drain finished: every window of the previous window definition has closed; drain may now be removed from the configuration")
	}
	p.off.Lock()
	p.off.stored = offsets
	p.off.Unlock()
	p.publishWarmLocked()
	p.m.stateBytes.WithLabelValues(p.cfg.Name).Set(float64(p.db.DiskBytes()))
	return nil
}

// cycleDone records a commit cycle, begun at start, that succeeded.
func (p *pipeline) cycleDone(start time.Time) {
	p.lastCommitOK.Store(p.now().UnixNano())
	p.m.commitLatency.WithLabelValues(p.cfg.Name).Observe(p.now().Sub(start).Seconds())
}

// offsetsToStoreLocked is the next input offset per partition that local state
// holds after this cycle.
func (p *pipeline) offsetsToStoreLocked() map[int32]int64 {
	offsets := map[int32]int64{}
	p.off.Lock()
	for part, off := range p.off.stored {
		offsets[part] = off
	}
	p.off.Unlock()
	for part, st := range p.mu.parts {
		if st.position >= 0 {
			offsets[part] = st.position
		}
	}
	return offsets
}

// positions are the known positions of parts.
func positions(parts map[int32]*partition) map[int32]int64 {
	out := make(map[int32]int64, len(parts))
	for part, st := range parts {
		if st.position >= 0 {
			out[part] = st.position
		}
	}
	return out
}

// commitGroupLocked commits the positions of the assigned partitions to the group.
func (p *pipeline) commitGroupLocked(ctx context.Context) error {
	return kafka.CommitTopicPositions(ctx, p.cl, p.in.offsetsToKafka(positions(p.mu.parts)))
}

// rearmedLocked notes, after a checkpoint, that a changed allowed_lateness
// has been applied to the state: the windows' expiries moved, and the
// sealed bound the start set. An engine made again from the state (an
// exactly_once rollback, newEngineLocked) must not apply it again: it
// would seal from the checkpoint's frontier, later than the start's, and
// drop the records of windows the grown lateness keeps open
// (TestLatenessGrownThenRollback).
func (p *pipeline) rearmedLocked() {
	if ev := p.engOpts.Evolve; ev != nil && ev.Rearm {
		c := *ev
		c.Rearm, c.Sealed = false, p.mu.eng.Sealed()
		p.engOpts.Evolve = &c
	}
}
