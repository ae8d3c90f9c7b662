package service

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/windowd/windowd/kafka"
)

// After each assignment franz-go fetches the group's committed offsets,
// require_stable, and only then calls adjustOffsets and starts fetching
// records. A transaction with offsets of the group pending holds that
// fetch: franz-go retries it every second for as long as the transaction
// lasts (by design: Kafka mandates the wait), which for a transaction the
// broker lost is for good. watchOffsets tells the operator which
// transaction, as watchRestore does for a restore.

// awaitOffsets records that parts were assigned at now and wait for their
// group offsets (done in adjustOffsets, dropped in dropAwaited).
func (p *pipeline) awaitOffsets(parts []int32, now time.Time) {
	p.off.Lock()
	defer p.off.Unlock()
	if p.off.awaiting == nil {
		p.off.awaiting = map[int32]time.Time{}
	}
	for _, part := range parts {
		p.off.awaiting[part] = now
	}
}

// dropAwaited forgets parts: their offsets came, or they went.
func (p *pipeline) dropAwaited(parts []int32) {
	p.off.Lock()
	defer p.off.Unlock()
	for _, part := range parts {
		delete(p.off.awaiting, part)
	}
}

// awaited returns the partitions still waiting for their group offsets,
// in order, and since when the oldest waits.
func (p *pipeline) awaited() ([]int32, time.Time) {
	p.off.Lock()
	defer p.off.Unlock()
	var parts []int32
	var since time.Time
	for part, t := range p.off.awaiting {
		parts = append(parts, part)
		if since.IsZero() || t.Before(since) {
			since = t
		}
	}
	slices.Sort(parts)
	return parts, since
}

// watchOffsets runs while the pipeline runs (until ctx ends). When
// assigned partitions have waited p.restoreStall for their group offsets
// (and again every p.restoreStall while they wait), it asks the broker
// which transaction holds them, logs it once per cause (an error when the
// broker lost it) and shows it in /readyz (p.offBlocked) until the offsets
// come.
func (p *pipeline) watchOffsets(ctx context.Context) {
	tick := time.NewTicker(max(p.restoreStall/4, 10*time.Millisecond))
	defer tick.Stop()
	var st stall
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		parts, since := p.awaited()
		now := p.now()
		if len(parts) == 0 || now.Sub(since) < p.restoreStall {
			if p.offBlocked.Swap(nil) != nil {
				p.log.Info("group offsets fetched", zap.String("group", p.cfg.Input.Group))
			}
			st = stall{}
			continue
		}
		waiting := now.Sub(since).Round(time.Second)
		why := st.update(ctx, now, p.restoreStall, func() (string, bool) { return p.offsetsBlocker(ctx, parts) }, func(why string, lost bool) {
			fields := []zap.Field{zap.String("group", p.cfg.Input.Group), p.in.partitionsField(parts),
				zap.Duration("waiting", waiting), zap.String("why", why)}
			if lost {
				p.log.Error("group offsets held for good by a transaction the broker left hanging: abort it (docs/OPERATIONS.md, Broker failures)", fields...)
			} else {
				p.log.Warn("group offsets not fetched", fields...)
			}
		})
		if why == "" {
			continue // ctx ended while asking
		}
		text := fmt.Sprintf("waiting %s for the group's committed offsets of partitions %v; %s", waiting, p.in.labels(parts), why)
		p.offBlocked.Store(&text)
	}
}

// offsetsBlocker says why the group's offsets of parts do not come: those
// a transaction holds (require_stable) and the transactions open on the
// group's partition of __consumer_offsets, oldest first (the first three).
// lost: one of them is a transaction the broker lost (kafka.OpenTxn.Lost).
func (p *pipeline) offsetsBlocker(ctx context.Context, parts []int32) (why string, lost bool) {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	group := p.cfg.Input.Group
	var pending []string
	for topic, kps := range p.in.toKafka(parts) {
		held, err := kafka.PendingGroupOffsets(lctx, p.cl, p.adm, group, topic, kps)
		if err != nil {
			return fmt.Sprintf("fetching them failed: %v", err), false
		}
		for _, kp := range held {
			part, _ := p.in.id(topic, kp)
			pending = append(pending, p.in.label(part))
		}
	}
	if len(pending) == 0 {
		return "no transaction holds them", false
	}
	slices.Sort(pending)
	why = fmt.Sprintf("a transaction holds those of partitions %v", pending)
	open, err := kafka.GroupOffsetsTransactions(lctx, p.adm, group, p.txnID)
	switch {
	case err != nil:
		return fmt.Sprintf("%s; describing the producers of %s failed: %v", why, kafka.OffsetsTopic, err), false
	case len(open) == 0:
		return fmt.Sprintf("%s; none is open on the group's partition of %s now", why, kafka.OffsetsTopic), false
	}
	// The partition holds other groups' offsets too: which open
	// transaction has this group's, the broker does not say.
	text, lost := describeOpen(open, 3)
	return fmt.Sprintf("%s; open on the group's partition of %s: %s", why, kafka.OffsetsTopic, text), lost
}
