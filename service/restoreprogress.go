package service

import "time"

// restoreLogInterval is how often a restore logs its progress
// (docs/OPERATIONS.md, Restore).
const restoreLogInterval = 3 * time.Second

// restoreProgress paces a restore's progress lines: one at most every
// restoreLogInterval, with the share of the changelog read and the rate.
type restoreProgress struct {
	start, last time.Time
	total       int64 // changelog offsets to read
}

func newRestoreProgress(now time.Time, total int64) *restoreProgress {
	return &restoreProgress{start: now, last: now, total: total}
}

// due reports whether a progress line is due at now with records applied,
// and what it says: share of the changelog read (0..1) and records/s.
func (r *restoreProgress) due(now time.Time, records int64) (share, rate float64, ok bool) {
	if now.Sub(r.last) < restoreLogInterval {
		return 0, 0, false
	}
	r.last = now
	if r.total > 0 {
		share = min(1, float64(records)/float64(r.total))
	}
	if d := now.Sub(r.start).Seconds(); d > 0 {
		rate = float64(records) / d
	}
	return share, rate, true
}
