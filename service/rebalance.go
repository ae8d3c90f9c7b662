package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/kafka"
	"github.com/windowd/windowd/watermark"
)

// onAssigned starts the restore of each new partition's state; the
// partition is paused until its state is restored (restorejob.go).
func (p *pipeline) onAssigned(ctx context.Context, _ *kgo.Client, assigned map[string][]int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing.Load() {
		// The final cycle ran; under exactly_once a transaction begun
		// now would wait for a heartbeat while the client leaves the
		// group, which waits for this callback.
		return
	}
	parts := p.in.fromKafka(assigned)
	if err := p.assignLocked(ctx, parts); err != nil {
		if ctx.Err() == nil {
			p.mu.failed = fmt.Errorf("assigning partitions %v: %w", parts, err)
		}
		return
	}
	p.assignedOnce.Store(true)
	p.inGroup.Store(true)
	p.awaitOffsets(parts, p.now())
	p.log.Info("partitions assigned", p.in.partitionsField(parts))
}

func (p *pipeline) assignLocked(ctx context.Context, parts []int32) error {
	if p.eos {
		// Every session of the group ends here, also one that only took
		// partitions away: the place to settle what this member owns.
		if err := p.settleAssignmentLocked(ctx, 3); err != nil {
			return err
		}
	}
	if err := p.grewInputLocked(ctx, parts); err != nil {
		return err
	}
	if len(parts) == 0 {
		return nil
	}
	// Commit what is pending first: under exactly_once the session's
	// transaction ends with the session.
	if err := p.commitLocked(ctx, false); err != nil && !errors.Is(err, errRolledBack) {
		return err
	}
	if p.eos {
		// Loading the producer id fences (and aborts) a transaction this
		// instance's previous incarnation left open, before the restore
		// waits for the changelog's stable offset to pass it.
		if err := p.loadProducerID(ctx); err != nil {
			// A broker that went away in the middle of the assignment:
			// the pipeline rejoins once it is back (errUnanswered).
			return fmt.Errorf("initialising the transactional producer: %w", unanswered(err))
		}
		for _, topic := range p.in.topics {
			if _, ok := p.mu.inputIDs[topic]; ok {
				continue
			}
			id, err := kafka.TopicID(ctx, p.adm, topic)
			if err != nil {
				return err
			}
			if p.mu.inputIDs == nil {
				p.mu.inputIDs = map[string][16]byte{}
			}
			p.mu.inputIDs[topic] = id
		}
	}
	if err := p.growChangelog(ctx, parts); err != nil {
		return err
	}
	for _, part := range parts {
		delete(p.mu.keptLost, part)
		p.startRestoreLocked(part)
	}
	return nil
}

// loadProducerID loads the transactional producer's id. The coordinator
// answers CONCURRENT_TRANSACTIONS until it has aborted the transaction
// this pipeline's previous incarnation left open, and franz-go retries
// that without end: the wait is logged every producerIDWaitLog, as it
// holds the assignment (and /readyz) until then.
func (p *pipeline) loadProducerID(ctx context.Context) error {
	done := make(chan error, 1)
	go func() {
		_, _, err := p.cl.ProducerID(ctx)
		done <- err
	}()
	start := p.now()
	tick := time.NewTicker(producerIDWaitLog)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			p.log.Warn("assigning partitions: still waiting for the transaction coordinator's producer id (it first aborts a transaction left open, e.g. by this pipeline before a broker outage)",
				zap.Duration("waited", p.now().Sub(start).Round(time.Second)))
		}
	}
}

// gateIfBehindLocked runs assigned partition part on its own frontier when it
// joins behind the frontier (it moved, or it was held), until releaseGated:
// its records are then not late merely because this instance's frontier is
// ahead, and its windows fire with its records (windowing.Engine.CatchUp).
func (p *pipeline) gateIfBehindLocked(part int32) {
	if f := p.mu.eng.Frontier(); f > watermark.MinTime && f < watermark.MaxTime {
		if g, _ := p.mu.eng.Watermarks().Generator(part); g.Watermark < f {
			p.mu.eng.CatchUp(part)
			p.mu.gated[part] = f
		}
	}
}

func (p *pipeline) skipLenLocked(part int32) int {
	if s := p.mu.skip[part]; s != nil {
		return len(s.keys)
	}
	return 0
}

// adjustOffsets starts each assigned partition at the offset the local
// checkpoint holds: its state covers exactly the records before it.
func (p *pipeline) adjustOffsets(_ context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	p.off.Lock()
	defer p.off.Unlock()
	for topic, offs := range offsets {
		for kp, o := range offs {
			part, ok := p.in.id(topic, kp)
			if !ok {
				continue
			}
			delete(p.off.awaiting, part) // fetched (offsetwatch.go)
			if off, ok := p.off.stored[part]; ok && o.EpochOffset().Offset != off {
				offs[kp] = kgo.NewOffset().At(off).WithEpoch(-1)
				p.log.Info("resuming from local checkpoint", zap.String("topic", topic), zap.Int32("partition", kp), zap.Int64("offset", off), zap.Stringer("group_offset", o))
			}
		}
	}
	return offsets, nil
}

func (p *pipeline) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	p.hideQuery() // (the next checkpoint publishes what stays)
	parts := p.in.fromKafka(revoked)
	p.dropAwaited(parts)
	if p.eos {
		p.deferRelease(parts, true)
		return
	}
	p.handOver(ctx, parts, true)
}

// onLost: the group no longer accepts our commits and the partitions may
// already have a new owner: their local state is dropped without logging
// more of it (handOver).
func (p *pipeline) onLost(ctx context.Context, _ *kgo.Client, lost map[string][]int32) {
	p.hideQuery()
	parts := p.in.fromKafka(lost)
	p.dropAwaited(parts)
	if p.eos {
		p.deferRelease(parts, false)
		return
	}
	p.handOver(ctx, parts, false)
}

// handOver runs a commit cycle (to the group too when it still accepts
// commits) and releases the partitions.
func (p *pipeline) handOver(ctx context.Context, parts []int32, toGroup bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(parts) == 0 {
		return
	}
	switch {
	case p.closing.Load():
		// A clean shutdown keeps local state (its final cycle ran): a
		// restart catches up from the changelog instead of restoring.
		p.releaseLocked(parts)
	case toGroup:
		// Revoked: log and commit their last changes, then drop them;
		// their state now lives in the changelog and with their next owner.
		if err := p.commitLocked(ctx, true); err != nil {
			p.log.Warn("commit before giving up partitions failed", zap.Bool("revoked", toGroup), zap.Error(err))
		}
		p.releaseLocked(parts)
		p.dropReleasedLocked(ctx, parts)
	default:
		// Lost: another member may own them already and be restoring them,
		// so nothing more of theirs is logged, and the group refuses this
		// member's commits. The pipeline rolls back to its last checkpoint,
		// as exactly_once does after an abort: what it did since is done
		// again (at least once), and the lost partitions' state, now the
		// changelog up to its position, is kept for the group to hand
		// them back (keepLost); the other partitions rewind to their
		// checkpointed offsets.
		p.releaseLocked(parts)
		p.rel.Lock()
		p.rel.lost = append(p.rel.lost, parts...)
		p.rel.Unlock()
		p.mu.panes.sync() // the discarded state's panes go out before the same panes again
		if err := p.rollbackLocked(); err != nil {
			p.mu.failed = fmt.Errorf("rolling back after losing partitions %v: %w", parts, err)
		}
	}
	if !toGroup {
		p.inGroup.Store(false)
	}
	logHandOver(p.log, p.in.partitionsField(parts), toGroup)
}

// dropReleasedLocked drops released partitions' local state and
// checkpoints; a failure stops the pipeline. The checkpoint holds the other
// partitions' state too, so the panes and diverted records produced from it
// are acknowledged first (as in commit); when they cannot be, the
// checkpoint waits for the next commit cycle.
func (p *pipeline) dropReleasedLocked(ctx context.Context, parts []int32) {
	var err error
	for _, part := range parts {
		if err = p.dropPartitionLocked(part); err != nil {
			break
		}
	}
	if err == nil {
		p.mu.panes.sync()
		if ferr := p.flushOutputLocked(ctx); ferr != nil {
			if isFatal(ferr) {
				p.mu.failed = fmt.Errorf("releasing partitions %v: %w", parts, ferr)
			}
			return
		}
		err = p.checkpointLocked(nil)
	}
	if err != nil {
		p.mu.failed = fmt.Errorf("releasing partitions %v: %w", parts, err)
	}
}

func (p *pipeline) releaseLocked(parts []int32) {
	if p.mu.wait != nil {
		p.mu.wait.forget(parts)
	}
	var gated []int32
	for _, part := range parts {
		if st := p.mu.parts[part]; st != nil {
			// Its records no longer wait for this cycle: without them
			// the backlog would look drained (cadence.go).
			p.mu.cycleWaiting = max(p.mu.cycleWaiting-st.waiting(), 0)
		}
		p.cancelRestoreLocked(part)
		if _, ok := p.mu.gated[part]; ok {
			gated = append(gated, part)
			delete(p.mu.gated, part)
		}
		p.mu.eng.Revoke(part)
		delete(p.mu.parts, part)
		label := p.in.label(part)
		for _, g := range []*prometheus.GaugeVec{p.m.watermark, p.m.idle, p.m.holds, p.m.lag} {
			g.DeleteLabelValues(p.cfg.Name, label)
		}
	}
	// A follower released while gated may have been the last gated
	// partition of a state whose lead stays. A lead that caught up first
	// left the state's release to its last gated partition
	// (releaseGatedLocked): the lead, gated again, now makes it at the
	// next step.
	for _, part := range gated {
		l := lead(part)
		if _, held := p.mu.gated[l]; l != part && !held && p.mu.parts[l] != nil && !p.gatedShareLocked(l) {
			p.mu.gated[l] = watermark.MinTime
		}
	}
}

// releaseGatedLocked returns a partition that joined behind the frontier to the
// frontier once its own watermark has reached the frontier it joined at, or
// it is idle. Until then it runs on its own frontier
// (gateIfBehind). Not merely because its consumer reached the partition's
// end: its watermark is still behind the frontier then, and its next
// records, judged against the frontier, would be late (dropped under
// allowed_lateness 0) where replay, whose frontier the partition held,
// counts them; its frontier is held meanwhile, as the partition holds it
// after the release too.
func (p *pipeline) releaseGatedLocked() error {
	if len(p.mu.gated) == 0 {
		return nil
	}
	idle := map[int32]bool{}
	for _, s := range p.mu.eng.Watermarks().Status() {
		idle[s.Partition] = s.Idle
	}
	for part, f := range p.mu.gated {
		g, _ := p.mu.eng.Watermarks().Generator(part)
		if g.Watermark < f && !idle[part] {
			continue
		}
		delete(p.mu.gated, part)
		if p.gatedShareLocked(part) {
			continue // co-partitioned inputs: the last of a state's partitions releases it
		}
		if err := p.mu.eng.ReleaseTimers(part); err != nil {
			return err
		}
	}
	return nil
}

// gatedShareLocked reports whether a partition of part's state other than
// part is still gated (coinputs.go: a follower and its lead share one).
func (p *pipeline) gatedShareLocked(part int32) bool {
	for q := range p.mu.gated {
		if q != part && lead(q) == lead(part) {
			return true
		}
	}
	return false
}

// logHandOver logs partitions (a partitionsField) revoked (handed over to
// the group) or lost.
func logHandOver(log *zap.Logger, parts zap.Field, revoked bool) {
	if revoked {
		log.Info("partitions revoked", parts)
	} else {
		log.Warn("partitions lost", parts)
	}
}
