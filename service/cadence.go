package service

import "time"

// When the commit cycle is due (docs/SEMANTICS.md, Delivery). A cycle is due
// commit_interval after the last one. While the pipeline is behind its
// input the cycle is put off, up to commit_interval_max: a record that
// waited in Kafka gains nothing from a shorter cycle, while each cycle
// costs every changed key a changelog record and a state write (and under
// exactly_once a transaction), so frequent cycles slow the drain that
// every waiting record is waiting for. Caught up, the cycle comes every
// commit_interval, as configured.
//
// Behind is one of:
//   - more records wait in Kafka than the cycle processed: the cycle
//     grows until it has taken in as many as wait, so a lag that stays
//     (the records franz-go has fetched ahead, at a high steady rate)
//     lengthens a cycle to that lag's time, not to commit_interval_max;
//   - the waiting records shrink by at least half of what the cycle
//     processed (a backlog draining) and would still take longer than
//     commit_interval at the cycle's rate: the cycle takes the backlog's
//     whole tail. With the first rule alone a drain's tail was halved in
//     cycle after cycle: 2M records under exactly_once took six cycles
//     with records where four do.

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

// behindLocked reports whether the pipeline is behind its input, the
// cycle having run for since (see above). The tail's rate test,
// waiting/(processed/since) > interval, is in floats (a backlog of 1e12
// records times a since in ns would overflow).
func (p *pipeline) behindLocked(since time.Duration) bool {
	waiting, processed := p.waitingLocked(), p.mu.cycleRecords
	if waiting > processed {
		return true
	}
	draining := 2*(p.mu.cycleWaiting-waiting) >= processed
	interval := time.Duration(p.cfg.CommitInterval) * time.Millisecond
	return draining && float64(waiting)*float64(since) > float64(processed)*float64(interval)
}

// waitingLocked is the number of input records waiting in Kafka: the sum over
// the assigned partitions of the distance from the position to the last
// known end (offsets: transaction markers count too).
func (p *pipeline) waitingLocked() int64 {
	var n int64
	for _, st := range p.mu.parts {
		n += st.waiting()
	}
	return n
}

// waiting is the number of the partition's records waiting in Kafka: from
// its position to its last known end, 0 while either is unknown.
func (st *partition) waiting() int64 {
	if c := st.consumed(); c >= 0 && st.end > c {
		return st.end - c
	}
	return 0
}

// cycleStartedLocked starts the count of the next cycle's records.
func (p *pipeline) cycleStartedLocked(start time.Time) {
	p.mu.lastCommit = start
	p.mu.cycleRecords, p.mu.putOff = 0, false
	p.mu.cycleWaiting = p.waitingLocked()
}
