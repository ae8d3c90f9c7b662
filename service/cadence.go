package service

import "time"

// When the commit cycle is due (docs/SEMANTICS.md, Delivery). A cycle is due
// commit_interval after the last one. While the pipeline is behind its
// input — the records already waiting in Kafka would take longer than
// commit_interval to process, at the rate of the cycle so far — the cycle
// is put off, up to commit_interval_max: a record that waited in Kafka
// gains nothing from a shorter cycle, while each cycle costs every changed
// key a changelog record and a state write (and under exactly_once a
// transaction), so frequent cycles slow the drain that every waiting
// record is waiting for. Caught up, the cycle comes every commit_interval,
// as configured.
//
// Behind means more than one commit_interval of work waits: a drain's
// last cycle then takes the whole tail. Comparing the waiting records
// with the cycle's own count instead (an earlier rule) halved the tail in
// cycle after cycle: a drain of 2M records took six cycles with records
// where four do.

// commitDueLocked reports whether the commit cycle is due now.
func (p *pipeline) commitDueLocked() bool {
	since := p.now().Sub(p.mu.lastCommit)
	if since < time.Duration(p.cfg.CommitInterval)*time.Millisecond {
		return false
	}
	if since >= time.Duration(p.cfg.CommitIntervalMax)*time.Millisecond || !p.behindLocked(since) {
		return true
	}
	if !p.mu.putOff {
		p.mu.putOff = true
		p.m.commitsPutOff.WithLabelValues(p.cfg.Name).Inc()
	}
	return false
}

// behindLocked reports whether the records waiting in Kafka would take
// longer than commit_interval to process at the rate of the cycle so far
// (since its start, cycleRecords processed): waiting/(processed/since) >
// interval, in floats (a backlog of 1e12 records times a since in ns
// would overflow).
func (p *pipeline) behindLocked(since time.Duration) bool {
	interval := time.Duration(p.cfg.CommitInterval) * time.Millisecond
	return float64(p.waitingLocked())*float64(since) > float64(p.mu.cycleRecords)*float64(interval)
}

// waitingLocked is the number of input records waiting in Kafka: the sum over
// the assigned partitions of the distance from the position to the last
// known end (offsets: transaction markers count too).
func (p *pipeline) waitingLocked() int64 {
	var n int64
	for _, st := range p.mu.parts {
		if c := st.consumed(); c >= 0 && st.end > c {
			n += st.end - c
		}
	}
	return n
}

// cycleStartedLocked starts the count of the next cycle's records.
func (p *pipeline) cycleStartedLocked(start time.Time) {
	p.mu.lastCommit = start
	p.mu.cycleRecords, p.mu.putOff = 0, false
}
