package service

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/kafka"
)

// The reader goroutine of a restore or standby (restorejob.go): it reads
// the partition's changelog and hands the poll loop batches of each key's
// latest value through the job's channel; it touches nothing of the
// loop's.

// readChangelog is the reader of j: from clNext when local state holds
// part up to there (known), else from the start into an emptied shard.
func (p *pipeline) readChangelog(ctx context.Context, j *restoreJob, clNext int64, known bool) {
	defer close(j.done)
	send := func(b restoreBatch) bool {
		select {
		case j.out <- b:
		case <-ctx.Done():
			return false
		}
		select {
		case p.rs.wake <- struct{}{}:
		default:
		}
		return true
	}
	fail := func(err error) {
		if ctx.Err() == nil {
			send(restoreBatch{err: err})
		}
	}
	standby := j.standby.Load() // at the start: a promoted standby still reads the tail first
	b, hi, err := p.restoreFrom(ctx, j, clNext, known)
	if err != nil {
		fail(err)
		return
	}
	if !standby && b.from < hi {
		// Only a restore with records to read waits for a slot: the
		// partitions whose state is already local (or that have none)
		// join at once and together, not one slot after another (their
		// consumers resuming at different times made a backfill's
		// partitions start apart, before watermark alignment could act).
		select {
		case p.rs.slots <- struct{}{}:
			defer func() { <-p.rs.slots }()
		case <-ctx.Done():
			return
		}
	}
	if p.restoreStarts != nil {
		p.restoreStarts(ctx, j.part)
	}
	if !send(b) {
		return
	}
	end := restoreBatch{end: true}
	var seen *seenKeys // see latestValues
	if b.cold {
		seen = newSeenKeys(hi - b.from)
	}
	latest := newLatestValues(seen)
	if standby {
		from, err := p.followChangelog(ctx, j, b.from, &end, &latest, send)
		if err != nil {
			fail(err)
			return
		}
		// Promoted: the rest of the changelog, as a restore.
		if _, hi, err = kafka.PartitionBounds(ctx, p.cl, p.adm, p.clTopic, j.part, p.log); err != nil {
			fail(err)
			return
		}
		b.from = min(from, hi)
		j.total.Store(end.records + hi - b.from)
		end.promoted, end.standbyRecords = true, end.records
	}
	if b.from < hi {
		if err := p.readRestore(ctx, j, b.from, hi, &end, &latest, send); err != nil {
			fail(err)
			return
		}
	}
	end.entries = latest.entries()
	end.hi = hi
	send(end)
}

// restoreFrom lists the bounds of j's changelog partition and returns the
// first batch (where the read starts, and whether cold, into an emptied
// shard) and the high watermark the read goes to.
func (p *pipeline) restoreFrom(ctx context.Context, j *restoreJob, clNext int64, known bool) (restoreBatch, int64, error) {
	lo, hi, err := kafka.PartitionBounds(ctx, p.cl, p.adm, p.clTopic, j.part, p.log)
	if err != nil {
		return restoreBatch{}, 0, err
	}
	b := restoreBatch{begin: true, from: lo, hi: hi}
	switch {
	case known && clNext >= lo && clNext <= hi:
		b.from = clNext
	case !known && lo == hi:
		// Nothing logged yet: local state, if any, is the only copy
		// (written before the changelog existed).
		b.from = hi
	default:
		b.cold = true
	}
	j.total.Store(hi - b.from)
	return b, hi, nil
}

// readRestore reads j's changelog from from to hi, sending a batch each
// time the latest values fill one, with the restore's progress in the
// metrics and the log.
func (p *pipeline) readRestore(ctx context.Context, j *restoreJob, from, hi int64, end *restoreBatch, latest **latestValues, send func(restoreBatch) bool) error {
	label := strconv.Itoa(int(j.part))
	remaining := p.m.restoreRemaining.WithLabelValues(p.cfg.Name, label)
	defer p.m.restoreRemaining.DeleteLabelValues(p.cfg.Name, label)
	progress := newRestoreProgress(p.now(), hi-from)
	apply := func(r *kgo.Record) error {
		if full, err := p.readRecord(j, r, end, *latest); err != nil || !full {
			return err
		}
		if !send(restoreBatch{entries: (*latest).entries(), pos: j.pos.Load()}) {
			return ctx.Err()
		}
		*latest = (*latest).next()
		return nil
	}
	read := end.records
	afterPoll := func() error {
		j.records.Store(end.records)
		remaining.Set(float64(max(0, hi-from-(end.records-read))))
		if share, rate, ok := progress.due(p.now(), end.records-read); ok {
			p.log.Info("restoring partition from the changelog", zap.Int32("partition", j.part), zap.String("changelog", p.clTopic),
				zap.Int64("records", end.records-read), zap.Int64("offsets", hi-from),
				zap.String("share", fmt.Sprintf("%.0f%%", 100*share)), zap.Float64("records_per_second", math.Round(rate)))
		}
		return nil
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go p.watchRestore(wctx, j, from, hi)
	return kafka.ReadPartition(ctx, p.baseOpts, p.clTopic, j.part, from, hi, p.log, apply, afterPoll)
}

// readRecord takes changelog record r of j into the batch being read
// (latest) and what the reader keeps across batches (end), and reports
// whether latest is full (restoreBatchBytes) and due to be handed over.
func (p *pipeline) readRecord(j *restoreJob, r *kgo.Record, end *restoreBatch, latest *latestValues) (full bool, err error) {
	j.pos.Store(r.Offset + 1)
	end.records++
	end.size += int64(len(r.Key) + len(r.Value))
	if err := p.applyChangelog(j.part, r, &end.mk, &end.def, &end.covers, latest); err != nil {
		return false, err
	}
	return latest.bytes >= restoreBatchBytes, nil
}
