package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/windowd/windowd/watermark"
)

// Restoring in the background (docs/OPERATIONS.md, Restore). A partition
// assigned to this instance is paused in the consumer and restored from its
// changelog by a reader goroutine while the instance's other partitions go
// on being processed:
//
//   - The reader lists the changelog partition's bounds, reads it from where
//     local state stops (from the start, into an emptied shard, when local
//     state has nothing of it that the changelog still holds) and keeps each
//     key's latest value (restore.go), handing batches to the poll loop.
//   - The poll loop applies the batches between polls (the engine is
//     the loop's) and, after the last one, assigns the partition: its
//     generator, skip set and offset come from the changelog's last marker,
//     its windows may fire from then on, its consumer resumes at the offset
//     its state covers.
//   - Until then the partition holds the frontier where it is
//     (watermark.Frontier.HoldRestoring): no window closes before the
//     restored partition has joined, as when a restore blocked the instance.
//   - Under exactly_once, the loop ends the open transaction before applying
//     a batch and checkpoints the batch alone after: restored state is the
//     changelog's committed state and never part of a transaction that
//     could roll back.
//   - A revoke or loss cancels the partition's restore; a restore whose
//     last batch has not been applied leaves no changelog position for the
//     partition, so the next one starts over (a cold one from an emptied
//     shard).
//   - A standby replica (standby.go) is a job whose partition is not
//     assigned here: its reader follows the changelog until the partition
//     is assigned, and then ends as a restore.
//
// At most maxParallelRestores partitions read their changelogs at once
// (standbys, and restores with nothing to read, do not count).

// resumeFetchMaxWait is how long the broker may hold a fetch that finds no
// data (franz-go's default is 5 s, the Java consumer's 500 ms). A partition
// resumed after its restore is fetched only once the fetch in flight over
// the others returns: with them at their end it waited up to 5 s, and a
// partition restored early sat idle while the others restored.
const resumeFetchMaxWait = 500 * time.Millisecond

// maxParallelRestores bounds the partitions of one pipeline that read their
// changelogs at the same time; the others wait for a slot.
const maxParallelRestores = 2

// restoreJob is the restore of one assigned partition, or a standby.
type restoreJob struct {
	part   int32
	cancel context.CancelFunc
	done   chan struct{}     // closed when the reader returned
	out    chan restoreBatch // reader to poll loop
	start  time.Time
	// records and total are the changelog records read so far and the
	// offsets to read, for readiness and the status page.
	records, total atomic.Int64
	pos            atomic.Int64 // changelog offset after the last record read
	// blocked: why the reader has read nothing for a while (the
	// transactions holding the partition, restorewatch.go); nil while it
	// reads.
	blocked atomic.Pointer[string]
	// standby: the partition is not assigned here; its reader follows the
	// changelog until promote is closed (standby.go).
	standby atomic.Bool
	promote chan struct{}

	loop restoreApplied // the poll loop's side
}

// restoreApplied is the poll loop's side of a restore job: only its
// …Locked methods touch it (the reader has the channel and the atomics).
type restoreApplied struct {
	stats restoreStats
	begun bool // the first batch was applied
	// applied: the changelog offset the applied batches reach (a
	// standby's position, answered with a stale query: query.go).
	applied int64
}

// restoreBatch is what a reader hands the poll loop: first the bounds
// (begin), then latest values, the last batch with the marker and covers.
type restoreBatch struct {
	begin    bool
	from, hi int64
	cold     bool

	entries []restoreEntry // in key order

	end           bool
	mk            *marker
	def           []byte // the last definition record read (definition.go)
	covers        coverLogs
	records, size int64
	// pos: a batch of latest values ends before this changelog offset.
	pos int64
	// promoted: the reader was a standby's; before its promotion it had
	// read standbyRecords of the records.
	promoted       bool
	standbyRecords int64

	err error
}

// restores are a pipeline's restores under way, readable without mu (by
// readiness and the status page).
type restores struct {
	sync.Mutex
	jobs  map[int32]*restoreJob
	slots chan struct{} // maxParallelRestores
	wake  chan struct{} // a batch is ready: the poll returns early
}

func newRestores() *restores {
	return &restores{jobs: map[int32]*restoreJob{}, slots: make(chan struct{}, maxParallelRestores), wake: make(chan struct{}, 1)}
}

// list returns the jobs in partition order.
func (r *restores) list() []*restoreJob {
	r.Lock()
	defer r.Unlock()
	out := make([]*restoreJob, 0, len(r.jobs))
	for _, j := range r.jobs {
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b *restoreJob) int { return int(a.part) - int(b.part) })
	return out
}

// restoring returns the restores under way of assigned partitions (not
// standbys), in partition order.
func (r *restores) restoring() []*restoreJob {
	jobs := r.list()
	return slices.DeleteFunc(jobs, func(j *restoreJob) bool { return j.standby.Load() })
}

// restoringPart reports whether part's restore (or standby) is under way.
func (p *pipeline) restoringPart(part int32) bool {
	p.rs.Lock()
	defer p.rs.Unlock()
	_, ok := p.rs.jobs[part]
	return ok
}

// startRestoreLocked pauses newly assigned partition part and starts its
// restore.
func (p *pipeline) startRestoreLocked(part int32) {
	p.cl.PauseFetchPartitions(p.in.toKafka([]int32{part}))
	p.mu.eng.Watermarks().HoldRestoring(part)
	if part >= coStride {
		// A follower (coinputs.go): it joins with its lead's restore,
		// or at once when its lead already runs here (the group gave
		// the follower later: nothing else would ever join it, and it
		// would hold the frontier restoring).
		if _, joined := p.mu.parts[lead(part)]; joined && !p.restoringPart(lead(part)) {
			p.joinFollowerLocked(part)
			return
		}
		p.mu.following[part] = true
		return
	}
	p.rs.Lock()
	j := p.rs.jobs[part]
	p.rs.Unlock()
	if j != nil {
		if j.standby.Load() {
			// A warm standby: its reader reads what is left of the
			// changelog and ends like a restore.
			j.start = p.now()
			j.standby.Store(false)
			close(j.promote)
			p.log.Info("standby promoted: restoring the rest of the changelog", zap.Int32("partition", part), zap.Int64("records_read", j.records.Load()))
		}
		return
	}
	p.startReaderLocked(part, false)
}

// startReaderLocked starts the reader of part, a restore or a standby.
func (p *pipeline) startReaderLocked(part int32, standby bool) {
	ctx, cancel := context.WithCancel(p.prodCtx)
	j := &restoreJob{part: part, cancel: cancel, done: make(chan struct{}), out: make(chan restoreBatch, 1), start: p.now(), promote: make(chan struct{})}
	j.standby.Store(standby)
	p.rs.Lock()
	p.rs.jobs[part] = j
	p.rs.Unlock()
	clNext, known := p.mu.clNext[part]
	go p.readChangelog(ctx, j, clNext, known)
}

// restoreStepBudget bounds the time a step spends applying restore
// batches (at least one is applied): the records of the other partitions
// are processed between steps, and a step that applied every batch the
// readers had made them wait for the whole restore.
const restoreStepBudget = 100 * time.Millisecond

// applyRestoresLocked applies what the restores have read since the last poll,
// for up to restoreStepBudget, and assigns the partitions whose restore is
// complete (at the end of a step: a rollback here leaves nothing
// of the poll to process).
func (p *pipeline) applyRestoresLocked(ctx context.Context) error {
	if p.eos && p.unsettled() {
		// Until settleAssignment: ending the transaction now would abort
		// it. The batches wait in their channels.
		return nil
	}
	jobs := p.rs.list()
	next := func() (*restoreJob, restoreBatch, bool) {
		for _, j := range jobs {
			select {
			case b := <-j.out:
				// Round robin: the job goes last for the next batch.
				jobs = append(slices.DeleteFunc(jobs, func(o *restoreJob) bool { return o == j }), j)
				return j, b, true
			default:
			}
		}
		return nil, restoreBatch{}, false
	}
	j, b, ok := next()
	if !ok {
		return nil
	}
	if p.eos {
		// The restored state is checkpointed alone (below): the open
		// transaction ends first, committed, or aborted and rolled back.
		if err := p.commitLocked(ctx, false); err != nil && !errors.Is(err, errRolledBack) {
			return err
		}
	}
	start := p.now()
	finished := false
	for ok {
		done, err := p.applyRestoreBatchLocked(j, b)
		if err != nil {
			return fatalError{fmt.Errorf("restoring partition %d: %w", j.part, err)}
		}
		finished = finished || done
		if p.now().Sub(start) >= restoreStepBudget {
			break
		}
		j, b, ok = next()
	}
	if p.eos {
		if err := p.checkpointLocked(nil); err != nil {
			return err
		}
		if p.unsettled() {
			// No transaction may commit yet (settleAssignment); due
			// windows fire with the next frontier advance.
			return nil
		}
	} else if p.mu.eng.NeedsCheckpoint() {
		if err := p.commitLocked(ctx, true); err != nil {
			return err
		}
	}
	if finished {
		// Restored windows the frontier already passed fire now (those
		// of partitions that joined behind it wait: releaseGated).
		return p.mu.eng.FireDue()
	}
	return nil
}

// applyRestoreBatchLocked applies one batch of j and reports whether it was the
// last.
func (p *pipeline) applyRestoreBatchLocked(j *restoreJob, b restoreBatch) (done bool, err error) {
	switch {
	case b.err != nil && j.standby.Load():
		p.log.Warn("standby stopped: reading the changelog failed", zap.Int32("partition", j.part), zap.Error(b.err))
		p.stopStandbyLocked(j)
		return false, nil
	case b.err != nil:
		return false, b.err
	case b.begin:
		j.loop.begun = true
		j.loop.stats.from, j.loop.stats.to, j.loop.stats.cold = b.from, b.hi, b.cold
		if !b.cold {
			return false, nil
		}
		if err := p.dropPartitionLocked(j.part); err != nil {
			return false, err
		}
		for _, f := range p.in.followers(j.part) {
			if p.mu.following[f] {
				if err := p.dropPartitionLocked(f); err != nil {
					return false, err
				}
			}
		}
		// The drop and the changelog positions without part commit
		// together: a crash mid-restore then restarts it from scratch.
		return false, p.putLocalMeta(p.offsetsToStoreLocked())
	}
	if err := p.restoreLatestLocked(j.part, b.entries); err != nil {
		return false, err
	}
	j.loop.applied = max(j.loop.applied, b.pos)
	if !b.end {
		return false, nil
	}
	if b.def != nil {
		if err := p.adoptDefinitionLocked(j.part, b.def, b.mk); err != nil {
			return false, err
		}
	}
	if err := p.mu.eng.FinishLayouts(j.part); err != nil {
		return false, err
	}
	j.loop.stats.records, j.loop.stats.bytes = b.records-b.standbyRecords, b.size
	p.finishRestoreLocked(j, b)
	return true, nil
}

// finishRestoreLocked assigns j's partition once its state is restored: the
// changelog's last marker gives its offset and generator, keys logged ahead
// of that offset skip the records they hold, and its consumer resumes where
// its state ends.
func (p *pipeline) finishRestoreLocked(j *restoreJob, b restoreBatch) {
	part := j.part
	if b.mk != nil && p.mu.rp != nil && b.mk.upstream != nil {
		p.mu.rp.ups[part] = p.mu.rp.adopt(b.mk.upstream, b.mk.layout)
	}
	if b.hi > 0 {
		j.loop.stats.to = b.hi
	}
	p.mu.clNext[part] = j.loop.stats.to
	resume := map[int32]int64{}
	var joined []int32 // part, and its followers assigned here (coinputs.go)
	for i, f := range append([]int32{part}, p.in.followers(part)...) {
		at := restoredOf(b.mk, i, b.covers.of(i))
		delete(p.mu.restoredFollow, f)
		if i > 0 && !p.mu.following[f] {
			// Not assigned here (yet): if it comes, it joins where
			// this state put it (joinFollowerLocked).
			if _, running := p.mu.parts[f]; at.marked && !running {
				if p.mu.restoredFollow == nil {
					p.mu.restoredFollow = map[int32]restoredAt{}
				}
				p.mu.restoredFollow[f] = at.kept()
			}
			continue
		}
		delete(p.mu.following, f)
		joined = append(joined, f)
		if off, ok := p.joinRestoredLocked(f, at); ok {
			resume[f] = off
		}
	}
	p.endRestore(j)
	// Where the offsets fetched at the assignment (or an offset fetch
	// still under way: franz-go applies this one instead) may not be
	// (AdjustFetchOffsetsFn ran before the restore).
	p.cl.SetOffsets(p.in.epochOffsets(resume))
	p.cl.ResumeFetchPartitions(p.in.toKafka(joined))
	j.loop.stats.took = p.now().Sub(j.start)
	label := strconv.Itoa(int(part))
	p.m.restoreRecords.WithLabelValues(p.cfg.Name, label).Add(float64(j.loop.stats.records))
	p.m.restoreSeconds.WithLabelValues(p.cfg.Name, label).Set(j.loop.stats.took.Seconds())
	rs := j.loop.stats
	if b.promoted {
		p.log.Info("partition state restored from its standby replica", zap.Int32("partition", part),
			zap.Int64("from_offset", rs.from), zap.Int64("to_offset", rs.to), zap.Int64("standby_records", b.standbyRecords),
			zap.Int64("tail_records", rs.records), zap.Duration("took", rs.took), zap.Int("keys_to_skip", p.skipLenLocked(part)))
	} else if rs.records > 0 || rs.cold {
		p.log.Info("partition state restored from the changelog", zap.Int32("partition", part), zap.Bool("from_scratch", rs.cold),
			zap.Int64("from_offset", rs.from), zap.Int64("to_offset", rs.to), zap.Int64("records", rs.records),
			zap.Int64("bytes", rs.bytes), zap.Duration("took", rs.took), zap.Int("keys_to_skip", p.skipLenLocked(part)))
	}
}

// joinFollowerLocked joins follower part to its lead's state, which runs
// here already: where the state's restore put it (its marker's position,
// generator and covers, kept by finishRestoreLocked), else from the
// position this member stored for it, else from the group's committed
// offset. The marker's position may be ahead of the group's offset (at
// least once: the changelog is written before the offsets are
// committed); resuming at the group's would count the records between
// twice.
func (p *pipeline) joinFollowerLocked(part int32) {
	at := restoredAt{position: -1}
	if kept, ok := p.mu.restoredFollow[part]; ok {
		at = kept
		delete(p.mu.restoredFollow, part)
	}
	if off, known := p.joinRestoredLocked(part, at); known {
		p.cl.SetOffsets(p.in.epochOffsets(map[int32]int64{part: off}))
	}
	p.cl.ResumeFetchPartitions(p.in.toKafka([]int32{part}))
	p.log.Info("partition joined its lead's state, which runs here", p.in.partitionsField([]int32{part}))
}

// restoredAt is where a restored state puts one of its partitions: its
// last marker's position (-1: none yet) and generator, when a marker was
// read, and the covers of its keys logged ahead of that position.
type restoredAt struct {
	marked   bool
	position int64
	gen      watermark.Generator
	covers   map[string]int64
}

// restoredOf is where a restore whose last marker is mk (nil: none) and
// whose covers of input i are covers puts input i's partition.
func restoredOf(mk *marker, i int, covers *coverLog) restoredAt {
	at := restoredAt{position: -1, covers: covers.latest()}
	if mk == nil {
		return at
	}
	at.marked, at.position, at.gen = true, mk.position, mk.gen
	if i > 0 {
		at.position, at.gen = -1, watermark.NewGenerator()
		if i-1 < len(mk.follow) {
			at.position, at.gen = mk.follow[i-1].position, mk.follow[i-1].gen
		}
	}
	return at
}

// kept is at with its covers' keys copied: they point into the restore
// batch's slab, which the next batch reuses.
func (at restoredAt) kept() restoredAt {
	covers := make(map[string]int64, len(at.covers))
	for k, c := range at.covers {
		covers[strings.Clone(k)] = c
	}
	at.covers = covers
	return at
}

// joinRestoredLocked assigns part where its restored state puts it (at):
// its generator and position, when a marker gave them, and its keys
// logged ahead of that position skip the records their state holds
// (covers). It returns where part resumes, when that is known.
func (p *pipeline) joinRestoredLocked(part int32, at restoredAt) (int64, bool) {
	if at.marked {
		if at.position >= 0 {
			p.off.Lock()
			p.off.stored[part] = at.position
			p.off.Unlock()
		}
		p.mu.eng.Watermarks().RestoreGenerator(part, at.gen)
	}
	p.off.Lock()
	resume, known := p.off.stored[part]
	p.off.Unlock()
	s := p.mu.skip[part]
	for k, c := range at.covers {
		if known && c <= resume {
			continue
		}
		if s == nil {
			s = &skipSet{keys: map[string]int64{}}
			p.mu.skip[part] = s
		}
		k = strings.Clone(k) // not the restore batch's slab
		s.keys[k] = max(s.keys[k], c)
		s.max = max(s.max, c)
	}
	st := p.partitionStateLocked(part)
	if known {
		st.position, st.marked = resume, resume
	}
	p.mu.eng.Assign(part, p.nowMS(), false)
	p.gateIfBehindLocked(part)
	return resume, known
}

// endRestore forgets j, whose reader has returned or been cancelled.
func (p *pipeline) endRestore(j *restoreJob) {
	j.cancel()
	<-j.done
	p.rs.Lock()
	delete(p.rs.jobs, j.part)
	p.rs.Unlock()
}

// restartReadersLocked starts every changelog reader (restore or standby)
// again from what local state holds: a rollback discarded the batches they
// had applied since the checkpoint.
func (p *pipeline) restartReadersLocked() {
	for _, j := range p.rs.list() {
		standby := j.standby.Load()
		p.endRestore(j)
		p.startReaderLocked(j.part, standby)
		p.log.Info("changelog reader restarted: a rollback discarded what it had applied", zap.Int32("partition", j.part), zap.Bool("standby", standby))
	}
}

// cancelRestoreLocked stops the restore of part, no longer assigned here,
// if one runs, and lifts its pause. Its state is what its next assignment
// restores from again.
func (p *pipeline) cancelRestoreLocked(part int32) {
	if p.mu.following[part] {
		delete(p.mu.following, part)
		p.cl.ResumeFetchPartitions(p.in.toKafka([]int32{part}))
		return
	}
	p.rs.Lock()
	j := p.rs.jobs[part]
	p.rs.Unlock()
	if j == nil {
		return
	}
	p.endRestore(j)
	p.cl.ResumeFetchPartitions(p.in.toKafka([]int32{part}))
	p.log.Info("restore cancelled: the partition is no longer assigned", zap.Int32("partition", part), zap.Int64("records_read", j.records.Load()))
}

// stopRestores cancels every restore and waits for the readers (shutdown).
func (p *pipeline) stopRestores() {
	for _, j := range p.rs.list() {
		p.endRestore(j)
	}
}

// holdRestoringLocked makes the partitions whose restore runs hold the frontier
// of a new engine (a rollback's).
func (p *pipeline) holdRestoringLocked() {
	for _, j := range p.rs.restoring() {
		p.mu.eng.Watermarks().HoldRestoring(j.part)
	}
	for f := range p.mu.following {
		p.mu.eng.Watermarks().HoldRestoring(f)
	}
}
