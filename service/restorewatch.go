package service

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/windowd/windowd/kafka"
)

// restoreStallAfter is how long a restore may read nothing, with records
// left to read, before it asks the broker why: three times windowd's own
// transaction timeout, by when the broker has aborted any transaction a
// crashed windowd left open. What still holds the partition then is a
// transaction of another producer, or one the broker lost
// (docs/OPERATIONS.md, Broker failures).
const restoreStallAfter = 3 * txnTimeout

// watchRestore runs beside j's read of its changelog from from up to hi,
// until ctx ends. When the read has taken no record for p.restoreStall
// (and again every p.restoreStall while it takes none), it lists the
// transactions open on the partition (a read_committed read waits at the
// oldest one's first offset), logs them once (an error when the broker
// lost one: nothing but an operator ends it) and shows them in
// /readyz and the status API (j.blocked) until records come again.
func (p *pipeline) watchRestore(ctx context.Context, j *restoreJob, from, hi int64) {
	tick := time.NewTicker(max(p.restoreStall/4, 10*time.Millisecond))
	defer tick.Stop()
	last, since := j.records.Load(), p.now()
	var st stall
	for {
		select {
		case <-ctx.Done():
			j.blocked.Store(nil)
			return
		case <-tick.C:
		}
		if n := j.records.Load(); n != last {
			last, since = n, p.now()
			if j.blocked.Swap(nil) != nil {
				p.log.Info("restore reading the changelog again", zap.Int32("partition", j.part), zap.String("changelog", p.clTopic))
			}
			st = stall{}
			continue
		}
		now := p.now()
		idle, at := now.Sub(since), max(j.pos.Load(), from)
		if at >= hi || idle < p.restoreStall {
			continue
		}
		why := st.update(ctx, now, p.restoreStall, func() (string, bool) { return p.restoreBlocker(ctx, j) }, func(why string, lost bool) {
			fields := []zap.Field{zap.Int32("partition", j.part), zap.String("changelog", p.clTopic), zap.Int64("offset", at),
				zap.Int64("end_offset", hi), zap.Duration("idle", idle.Round(time.Second)), zap.String("why", why)}
			if lost {
				p.log.Error("restore blocked for good by a transaction the broker left hanging: abort it (docs/OPERATIONS.md, Broker failures)", fields...)
			} else {
				p.log.Warn("restore reads nothing", fields...)
			}
		})
		if why == "" {
			continue // ctx ended while asking
		}
		text := fmt.Sprintf("partition %d read nothing for %s at offset %d of %d; %s", j.part, idle.Round(time.Second), at, hi, why)
		j.blocked.Store(&text)
	}
}

// restoreBlocker says why j's read takes no record: the transactions
// open on its changelog partition, oldest first. lost: one of them is a
// transaction the broker lost (kafka.OpenTxn.Lost).
func (p *pipeline) restoreBlocker(ctx context.Context, j *restoreJob) (why string, lost bool) {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	open, err := kafka.OpenTransactions(lctx, p.adm, p.clTopic, j.part, p.txnID)
	switch {
	case err != nil:
		return fmt.Sprintf("describing its producers failed: %v", err), false
	case len(open) == 0:
		return "no transaction is open on it", false
	}
	// The oldest holds the last stable offset.
	text, lost := describeOpen(open, 1)
	return "waiting for " + text, lost
}
