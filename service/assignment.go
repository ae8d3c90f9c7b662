package service

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/windowd/windowd/kafka"
)

// deferRelease is onRevoked and onLost under exactly_once. It must not wait
// for mu: the transact session calls it holding the lock its End needs,
// and the poll loop may be in End. The partitions stop being fetched before
// this runs; the poll loop releases them (applyReleased), the open
// transaction aborts (the session saw the revoke), and nothing commits
// until settleAssignment has checked what this member owns.
func (p *pipeline) deferRelease(parts []int32, revoked bool) {
	if len(parts) == 0 {
		return // a cooperative rebalance that took nothing
	}
	p.rel.Lock()
	defer p.rel.Unlock()
	if p.closing.Load() {
		return // the final transaction ended; local state stays as checkpointed
	}
	p.rel.released = append(p.rel.released, parts...)
	p.rel.awaitSettle = true
	p.rel.revokes++
	if !revoked {
		p.rel.lost = append(p.rel.lost, parts...)
		p.inGroup.Store(false)
	}
	logHandOver(p.log, p.in.partitionsField(parts), revoked)
}

// markEnd notes that a transaction end begins: revokes up to now are
// consumed by it (a revoke during the end counts for the next one).
func (p *pipeline) markEnd() {
	p.rel.Lock()
	p.rel.revokesAtEnd = p.rel.revokes
	p.rel.Unlock()
}

// revokedSinceEnd reports a revoke or loss since the last transaction end
// began: the transact session aborts the next end.
func (p *pipeline) revokedSinceEnd() bool {
	p.rel.Lock()
	defer p.rel.Unlock()
	return p.rel.revokes != p.rel.revokesAtEnd
}

// unsettled reports that partitions were taken away since the last
// settleAssignment.
func (p *pipeline) unsettled() bool {
	p.rel.Lock()
	defer p.rel.Unlock()
	return p.rel.awaitSettle
}

// applyReleasedLocked releases the partitions deferRelease recorded.
// Their local state stays until the rollback that follows drops it.
func (p *pipeline) applyReleasedLocked() {
	p.rel.Lock()
	parts := p.rel.released
	p.rel.released = nil
	p.rel.Unlock()
	if len(parts) > 0 {
		p.releaseLocked(parts)
	}
}

// settleAssignmentLocked runs at the end of every group session under
// exactly_once. franz-go's transact session passes on only the
// first revoke between two transaction ends, so the group's own record of
// this member's assignment is read, and anything the pipeline still holds
// beyond it is released. A group that is rebalancing again leaves the
// member unsettled until the next session.
func (p *pipeline) settleAssignmentLocked(ctx context.Context, attempts int) error {
	p.applyReleasedLocked()
	p.rel.Lock()
	unsettled, revokes := p.rel.awaitSettle, p.rel.revokes
	p.rel.Unlock()
	if !unsettled {
		return nil
	}
	p.mu.lastSettle = p.now()
	member, _ := p.cl.GroupMetadata()
	var owned map[int32]bool
	var err error
	for attempt := 0; attempt < attempts; attempt++ {
		if owned, err = kafka.DescribeAssignment(ctx, p.adm, p.cfg.Input.Group, p.cfg.Input.Topic, member); err == nil || attempt == attempts-1 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err != nil {
		p.log.Warn("could not read this member's assignment from the group; retrying", zap.Error(err))
		return nil
	}
	var extra []int32
	for part := range p.mu.parts {
		if !owned[lead(part)] { // a follower goes with its lead (coinputs.go)
			extra = append(extra, part)
		}
	}
	for part := range p.mu.following {
		if !owned[lead(part)] {
			extra = append(extra, part)
		}
	}
	for _, j := range p.rs.restoring() {
		if !owned[j.part] {
			extra = append(extra, j.part)
		}
	}
	if len(extra) > 0 {
		// A revoke the session did not pass on: what the open
		// transaction did for them must not commit.
		p.log.Info("partitions revoked (read from the group)", p.in.partitionsField(extra))
		p.releaseLocked(extra)
		p.mu.abortNext = true
	}
	p.rel.Lock()
	if p.rel.revokes == revokes { // else a newer revoke needs its own check
		p.rel.awaitSettle = false
	}
	p.rel.Unlock()
	return nil
}

// keepLostLocked (in a rollback: exactly_once's after an abort,
// at_least_once's after a loss) keeps the state of
// the partitions lost since the last rollback for two session timeouts
// instead of dropping it: a loss is usually the member's own session
// (a pause, a coordinator that could not be reached), and the group hands
// the partitions back when the member rejoins. The rollback has just
// returned their state to the last checkpoint (committed transaction), the
// changelog up to the state's position, so a partition assigned back reads
// only the changelog's tail: what another member committed meanwhile, if
// any (restorejob.go). A partition not assigned back in time is dropped
// (dropExpiredHolds).
func (p *pipeline) keepLostLocked() {
	p.rel.Lock()
	lost := p.rel.lost
	p.rel.lost = nil
	p.rel.Unlock()
	until := p.now().Add(2 * p.session)
	var kept []int32
	for _, part := range lost {
		if _, ok := p.mu.clNext[part]; ok {
			p.mu.keptLost[part] = until
			kept = append(kept, part)
		}
	}
	if len(kept) > 0 {
		p.log.Info("keeping the state of lost partitions as of the last checkpoint, for the group to hand them back",
			zap.Int32s("partitions", kept), zap.Duration("at_most", 2*p.session))
	}
}

// rollbackDropsLocked reports whether a rollback drops the local state of
// part, a partition of the checkpoint: unless it is assigned, restoring,
// or kept for the group to hand back. A co-partitioned follower's state is
// its lead's (coinputs.go): a follower, its offset and its skip set stay
// with its lead.
func (p *pipeline) rollbackDropsLocked(part int32) bool {
	return !p.keepsStateLocked(part) && !p.keepsStateLocked(lead(part))
}

// keepsStateLocked reports whether part's local state stays: it is
// assigned, restoring, or kept for the group to hand it back.
func (p *pipeline) keepsStateLocked(part int32) bool {
	_, assigned := p.mu.parts[part]
	return assigned || p.restoringPart(part) || p.keptForLocked(part)
}

// keptForLocked reports whether a lost partition's state is still kept.
func (p *pipeline) keptForLocked(part int32) bool {
	until, ok := p.mu.keptLost[part]
	return ok && p.now().Before(until)
}
