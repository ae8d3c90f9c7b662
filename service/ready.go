package service

import (
	"fmt"
	"time"
)

// ready reports whether the pipeline has its assignment and commits succeed.
func (p *pipeline) ready() (bool, string) {
	if r := p.restoreStatus(); r != nil {
		msg := fmt.Sprintf("restoring partitions %v from changelog %s (%d of %d records so far)", r.Partitions, p.clTopic, r.Records, r.Total)
		for _, why := range r.Blocked {
			msg += "; " + why
		}
		return false, msg
	}
	if why := p.offBlocked.Load(); why != nil {
		// The watcher clears it at its next tick; the offsets may have
		// come since.
		if parts, _ := p.awaited(); len(parts) > 0 {
			return false, *why
		}
	}
	if !p.assignedOnce.Load() {
		return false, "waiting for partition assignment"
	}
	if !p.inGroup.Load() {
		return false, "partitions lost (group session expired?); rejoining"
	}
	stale := max(readyStaleAfter, 5*time.Duration(p.cfg.CommitIntervalMax)*time.Millisecond)
	last := p.lastCommitOK.Load()
	if last == 0 {
		return false, "no commit cycle has completed yet"
	}
	if age := p.now().Sub(time.Unix(0, last)); age > stale {
		return false, fmt.Sprintf("last successful commit %s ago (broker unreachable?)", age.Round(time.Second))
	}
	return true, ""
}
