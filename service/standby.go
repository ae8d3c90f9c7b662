package service

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/kafka"
)

// Standby replicas (docs/OPERATIONS.md, Standby replicas): with
// state.standby_replicas N, every instance keeps a warm copy of partitions
// other members own, so that a failover finds their state local and reads
// only the changelog's tail. The placement is a function of the group's
// assignment (kafka.StandbysOf), read by a planner goroutine every
// standbyPlanEvery; the poll loop starts and stops the copies. A standby is
// a restore job whose reader does not stop at the changelog's end: it
// follows the changelog and hands the loop a batch every standbyFlush;
// once the partition is assigned here, the same reader reads what is left
// and the restore ends as any other (restorejob.go). A standby's partition
// is not in the frontier and its windows do not fire.

const (
	standbyPlanEvery = 2 * time.Second        // how often the group's assignment is read
	standbyFlush     = time.Second            // a standby's batch at least this often
	standbyTick      = 250 * time.Millisecond // a standby's reader checks for its promotion at least this often
)

// errPromoted stops a standby's reader at its promotion.
var errPromoted = errors.New("standby promoted")

// standbyPlan is the planner's latest placement for this member.
type standbyPlan struct {
	sync.Mutex
	parts   []int32
	keep    []int32 // the group gives them to this member: a running standby stays for its promotion
	changed bool    // parts not yet reconciled by the loop
}

// planStandbys reads the group's assignment every standbyPlanEvery until
// ctx ends and publishes this member's standby partitions.
func (p *pipeline) planStandbys(ctx context.Context) {
	t := time.NewTicker(standbyPlanEvery)
	defer t.Stop()
	for {
		member, _ := p.cl.GroupMetadata()
		if member != "" {
			if all, err := kafka.GroupAssignment(ctx, p.adm, p.cfg.Input.Group, p.cfg.Input.Topic); err == nil {
				parts := kafka.StandbysOf(all, member, p.standbys)
				// The group may describe an assignment the poll loop has not
				// been given yet: a standby of a partition it gives this
				// member (its owner has just failed) is promoted a moment
				// later, and stopping it now would make that promotion a
				// restore from the changelog's start.
				keep := all[member]
				p.sb.Lock()
				p.sb.parts, p.sb.keep, p.sb.changed = parts, keep, true
				p.sb.Unlock()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// reconcileStandbysLocked starts the standbys the plan wants that do not run
// yet and stops those it no longer wants.
func (p *pipeline) reconcileStandbysLocked() {
	p.sb.Lock()
	want, keep, changed := p.sb.parts, p.sb.keep, p.sb.changed
	p.sb.changed = false
	p.sb.Unlock()
	if !changed {
		return
	}
	var stopped, started []int32
	for _, j := range p.rs.list() {
		if j.standby.Load() && !slices.Contains(want, j.part) && !slices.Contains(keep, j.part) {
			p.stopStandbyLocked(j)
			stopped = append(stopped, j.part)
		}
	}
	for _, part := range want {
		if _, assigned := p.mu.parts[part]; assigned || p.restoringPart(part) {
			continue
		}
		p.startReaderLocked(part, true)
		started = append(started, part)
	}
	n := 0
	for _, j := range p.rs.list() {
		if j.standby.Load() {
			n++
		}
	}
	p.m.standbys.WithLabelValues(p.cfg.Name).Set(float64(n))
	if len(started)+len(stopped) > 0 {
		p.log.Info("standby replicas", zap.Int32s("partitions", want), zap.Int32s("started", started), zap.Int32s("stopped", stopped))
	}
}

// stopStandbyLocked ends standby j and drops what it copied: the
// partition is neither owned nor kept here.
func (p *pipeline) stopStandbyLocked(j *restoreJob) {
	p.endRestore(j)
	if j.loop.begun {
		if err := p.dropPartitionLocked(j.part); err != nil {
			p.log.Warn("dropping a standby's state failed", zap.Int32("partition", j.part), zap.Error(err))
		}
	}
}

// warmPositions is the changelog position local state has reached per
// partition (owned, restoring, standby, left from before), which
// kafka.WarmBalancer sends the group's leader (any goroutine).
func (p *pipeline) warmPositions() map[int32]int64 {
	out := map[int32]int64{}
	if s := p.warm.Load(); s != nil {
		maps.Copy(out, *s)
	}
	for _, j := range p.rs.list() {
		out[j.part] = max(out[j.part], j.pos.Load())
	}
	return out
}

// publishWarmLocked refreshes what warmPositions reads of local state: the
// changelog positions the last checkpoint holds (loadMeta and
// checkpoint call it, a join metadata needs nothing fresher).
func (p *pipeline) publishWarmLocked() {
	m := maps.Clone(p.mu.clNext)
	p.warm.Store(&m)
}

// followChangelog is a standby's reader after its first batch: it follows
// the changelog from offset from, handing the loop the latest values it
// read every standbyFlush (or restoreBatchBytes), until j is promoted; it
// returns the offset to read next. end and latest carry what it read into
// the restore that follows.
func (p *pipeline) followChangelog(ctx context.Context, j *restoreJob, from int64, end *restoreBatch, latest **latestValues,
	send func(restoreBatch) bool) (int64, error) {
	last := p.now()
	// tail: the batch is flushed on time rather than on size, the reader
	// has caught up with the changelog.
	flush := func(tail bool) error {
		if !send(restoreBatch{entries: (*latest).entries(), pos: j.pos.Load()}) {
			return ctx.Err()
		}
		*latest, last = (*latest).next(), p.now()
		if tail {
			// Caught up: what follows changes keys it has restored.
			(*latest).seen = nil
		}
		return nil
	}
	apply := func(r *kgo.Record) error {
		if full, err := p.readRecord(j, r, end, *latest); err != nil || !full {
			return err
		}
		return flush(false)
	}
	afterPoll := func() error {
		j.records.Store(end.records)
		select {
		case <-j.promote:
			return errPromoted
		default:
		}
		if len((*latest).values) > 0 && p.now().Sub(last) >= standbyFlush {
			return flush(true)
		}
		return nil
	}
	next, err := kafka.TailPartition(ctx, p.baseOpts, p.clTopic, j.part, from, standbyTick, p.log, apply, afterPoll)
	if errors.Is(err, errPromoted) {
		return next, nil
	}
	if err == nil {
		err = errors.New("the changelog reader stopped")
	}
	return next, err
}
