package service

import "time"

// When the commit cycle is due (docs/SEMANTICS.md, Delivery). A cycle is due
// commit_interval after the last one. While the pipeline is behind its
// input — the records already waiting in Kafka are more than it processed
// since the last cycle, so they take longer than the cycle so far to
// process — the cycle is put off, up to commit_interval_max: a record that
// waited in Kafka gains nothing from a shorter cycle, while each cycle costs
// every changed key a changelog record and a state write (and under
// exactly_once a transaction), so frequent cycles slow the drain that every
// waiting record is waiting for. Caught up, the cycle comes every
// commit_interval, as configured.

// commitDueLocked reports whether the commit cycle is due now.
func (p *pipeline) commitDueLocked() bool {
	since := p.now().Sub(p.mu.lastCommit)
	if since < time.Duration(p.cfg.CommitInterval)*time.Millisecond {
		return false
	}
	if since >= time.Duration(p.cfg.CommitIntervalMax)*time.Millisecond || p.waitingLocked() <= p.mu.cycleRecords {
		return true
	}
	if !p.mu.putOff {
		p.mu.putOff = true
		p.m.commitsPutOff.WithLabelValues(p.cfg.Name).Inc()
	}
	return false
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
