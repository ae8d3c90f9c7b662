package windowing

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/windowd/windowd/watermark"
)

// Joins of two inputs of a pipeline (docs/SEMANTICS.md, Joins): a Joiner
// keeps each side's records of a key until the frontier proves they can
// no longer match, emits a match as soon as both records are in, and an
// unmatched left (left and full joins) or right (full joins) row once,
// when the frontier passes the record's last chance to match, never
// before. With early.every an unmatched row is shown early (not final)
// and retracted if a match comes after all.
//
// The Joiner holds its records in memory, by partition, and with a Store
// also durably (joinstate.go); it is pure like the engine: no Kafka, no
// Pebble of its own, no wall clock.

// JoinKind is inner, left or full.
type JoinKind uint8

// Join kinds.
const (
	InnerJoin JoinKind = iota + 1
	LeftJoin
	FullJoin
)

func (k JoinKind) String() string {
	switch k {
	case InnerJoin:
		return "inner"
	case LeftJoin:
		return "left"
	case FullJoin:
		return "full"
	}
	return fmt.Sprintf("JoinKind(%d)", uint8(k))
}

// JoinSpec is a join of two inputs.
type JoinSpec struct {
	Kind JoinKind
	// Interval: a left record at time tl matches a right one at tr when
	// Lower <= tr - tl <= Upper. Otherwise both are in the same window of
	// Window (tumbling or hopping).
	Interval     bool
	Lower, Upper int64
	Window       WindowSpec
	// Left and Right are the inputs' indexes (Event.Input).
	Left, Right     int32
	AllowedLateness int64
	// EarlyEvery (> 0): an unmatched row is shown that long (processing
	// time) after its record arrived, not final, when no match came yet.
	EarlyEvery int64
}

// JoinRecord is one side of a join row.
type JoinRecord struct {
	Time      int64
	Value     string // the record's value, JSON
	Partition int32  // its upstream partition (Event.Partition)
	Offset    int64
}

// JoinRow is a match (both sides) or an unmatched row (one side nil), or
// the retraction of an early unmatched row.
type JoinRow struct {
	Key         string
	Left, Right *JoinRecord
	// Start and End: the window of a window join; for an interval join
	// the times the other side's records match in, [Start, End).
	Start, End int64
	Timing     Timing
	Final      bool
	Retraction bool
}

// JoinEmitter receives a Joiner's rows and dropped records.
type JoinEmitter interface {
	// Row receives a row; it must not keep r.
	Row(r *JoinRow) error
	// Dropped receives a record too late to match anything (DropExpired),
	// with the bounds it missed, or one whose time has no representable
	// window (DropOutOfRange).
	Dropped(ev *Event, reason DropReason, missed Span) error
}

// joinRec is a record held by a Joiner.
type joinRec struct {
	JoinRecord
	side    int // 0: left, 1: right
	b       *joinBucket
	matched bool // a match was emitted
	early   bool // its unmatched row was shown early and not retracted
	shown   Timing
	gone    bool  // let go, or dropped with its shard or key
	seq     int64 // arrival order: its timers fire in it
	earlyAt int64 // the processing time its early row is due (0: none)
}

// joinBucket holds a key's records: of one window (window join), in
// arrival order, or all of the key's (interval join), in time order.
type joinBucket struct {
	k          *joinKey
	start, end int64
	recs       [2][]*joinRec
	gone       int  // records let go still in recs (interval join)
	over       bool // expired, or dropped with its key (window join)
}

// joinTimer is an expiry (rec nil: the bucket's) or, early, an early
// unmatched row's time.
type joinTimer struct {
	at  int64
	seq int64 // arrival order: timers of one time fire in it
	b   *joinBucket
	rec *joinRec
}

type joinTimers []joinTimer

func (h joinTimers) Len() int { return len(h) }
func (h joinTimers) Less(i, j int) bool {
	return h[i].at < h[j].at || (h[i].at == h[j].at && h[i].seq < h[j].seq)
}
func (h joinTimers) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *joinTimers) Push(x any)   { *h = append(*h, x.(joinTimer)) }
func (h *joinTimers) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}

// JoinOptions say where a Joiner keeps its records.
type JoinOptions struct {
	// ShardByPartition keeps each partition's records in a shard of
	// their own, whose expiries fire only while the partition is
	// assigned, as Options.ShardByPartition does for an engine (the
	// Kafka service). Otherwise every record is in one shard (replay).
	ShardByPartition bool
	// Shards: as Options.Shards (partition p's records in shard p mod
	// Shards when above 0).
	Shards int32
	// Store, when set, holds the Joiner's records durably
	// (joinstate.go): each changed key's at Flush and Checkpoint, read
	// back when the Joiner is made. Nil: memory only (replay).
	Store Store
	// MaxPendingBytes: NeedsCheckpoint reports true once the store has
	// that much uncommitted (DefaultMaxPendingBytes when 0).
	MaxPendingBytes int
	// Evolve: the configuration changed since the store's records were
	// written (nil: it did not). Its Sealed bound and a changed
	// allowed_lateness (Rearm) apply as for an engine's windows.
	Evolve *Evolution
}

// Joiner runs a join.
type Joiner struct {
	spec    JoinSpec
	opts    JoinOptions
	wm      *watermark.Frontier
	f       int64
	emit    JoinEmitter
	windows Assigner
	spans   []Span
	shards  map[uint32]*joinShard
	// owned: shards whose expiries and early rows may fire
	// (ShardByPartition); catching: shards of partitions that joined
	// behind the frontier and run on their own (CatchUp).
	owned    map[uint32]bool
	catching map[uint32]bool
	// recheck: a shard may have expiries due that no step of the
	// frontier would fire (restored or released).
	recheck bool
	dirty   []*joinKey // keys changed since the last Flush (with a Store)
	// unflushed estimates what the next Flush writes: the records taken
	// since the last one, and a record's worth of every other change.
	unflushed int
	// sealed: a record (window) ending at or before it may have had
	// partners let go under a smaller allowed_lateness: it is not taken.
	sealed int64
	seq    int64
	stats  Stats
	row    JoinRow
	held   int // records held
	bytes  int // estimate of the memory the held records take
}

// NewJoiner returns a Joiner of spec at frontier minus infinity, or, with
// opts.Store, at the frontier and with the records the store holds.
func NewJoiner(spec JoinSpec, wm watermark.Spec, emit JoinEmitter, opts JoinOptions) (*Joiner, error) {
	if spec.Interval && spec.Lower > spec.Upper {
		return nil, fmt.Errorf("join: interval lower bound %d above upper %d", spec.Lower, spec.Upper)
	}
	if !spec.Interval && spec.Window.Kind != Tumbling && spec.Window.Kind != Hopping {
		return nil, fmt.Errorf("join: a window join takes tumbling or hopping windows, not %s", spec.Window.Kind)
	}
	if opts.MaxPendingBytes <= 0 {
		opts.MaxPendingBytes = DefaultMaxPendingBytes
	}
	j := &Joiner{spec: spec, opts: opts, wm: watermark.NewFrontier(wm), f: watermark.MinTime, emit: emit,
		shards: map[uint32]*joinShard{}, owned: map[uint32]bool{}, catching: map[uint32]bool{}, sealed: watermark.MinTime}
	if !spec.Interval {
		j.windows = NewAssigner(spec.Window)
	}
	if opts.Store != nil {
		if err := j.load(); err != nil {
			return nil, err
		}
	}
	if ev := opts.Evolve; ev != nil {
		j.sealed = ev.Sealed
		// Records let go under the prior lateness at the frontier the
		// state was left at stay gone: a record that could have matched
		// one of them is not taken, also once the lateness grows. Held
		// records take the new lateness (their expiries are armed when
		// read, with it).
		if ev.Rearm && ev.PriorLateness != spec.AllowedLateness && j.f != watermark.MinTime && j.f != watermark.MaxTime {
			j.sealed = max(j.sealed, j.f-ev.PriorLateness)
		}
	}
	return j, nil
}

// Frontier is the current frontier.
func (j *Joiner) Frontier() int64 { return j.f }

// Watermarks is the frontier's state: every partition's generator.
func (j *Joiner) Watermarks() *watermark.Frontier { return j.wm }

// Stats returns the counts so far (Panes: the rows emitted, by timing).
func (j *Joiner) Stats() Stats { return j.stats }

// Held is the number of records the Joiner holds.
func (j *Joiner) Held() int { return j.held }

// side returns the side of ev's input, or -1 for another input.
func (j *Joiner) side(ev *Event) int {
	switch ev.Input {
	case j.spec.Left:
		return 0
	case j.spec.Right:
		return 1
	}
	return -1
}

// Record processes one event that arrived at processing time now: its
// matches, then the frontier and the expiries it passes.
func (j *Joiner) Record(ev *Event, now int64) error {
	j.stats.Records++
	if s := j.side(ev); s >= 0 {
		sh := j.shard(ev.Partition)
		f := j.f
		if j.catching[sh.id] {
			// Against the partition's own frontier (CatchUp).
			j.f = j.catchingFrontier(sh.id)
		}
		ok, err := j.take(sh, ev, s, now)
		j.f = f
		if err != nil || !ok {
			return err
		}
	}
	j.wm.Observe(ev.Partition, ev.Time, now)
	return j.advance()
}

// take matches and holds ev, or drops it; ok is false for a record
// without a representable window, which moves no watermark.
func (j *Joiner) take(sh *joinShard, ev *Event, s int, now int64) (ok bool, err error) {
	if j.spec.Interval {
		lo, hi := j.bounds(s, ev.Time)
		if lo == watermark.MinTime || hi == watermark.MaxTime {
			j.stats.OutOfRange++
			return false, j.emit.Dropped(ev, DropOutOfRange, Span{})
		}
		// The record's own last chance passed: a record of the other
		// side that it matches is gone, or will be dropped too. Behind
		// the sealed bound, a record it matches may have been let go
		// under a smaller allowed_lateness (Seal).
		if expired(j.f, addSat(ev.Time, 1), j.spec.AllowedLateness) || addSat(ev.Time, 1) <= j.sealed {
			j.stats.LateDropped++
			return true, j.emit.Dropped(ev, DropExpired, Span{Start: lo, End: hi})
		}
		b := j.bucket(sh, ev.Key, 0, 0)
		return true, j.hold(b, ev, s, now, lo, hi, addSat(hi, j.spec.AllowedLateness))
	}
	j.spans = j.windows.Windows(j.spans[:0], ev.Time)
	if len(j.spans) == 0 {
		j.stats.OutOfRange++
		return false, j.emit.Dropped(ev, DropOutOfRange, Span{})
	}
	took := false
	for _, sp := range j.spans {
		if expiredOrSealed(j.f, sp.End, j.spec.AllowedLateness, j.sealed) {
			continue
		}
		took = true
		b := j.bucket(sh, ev.Key, sp.Start, sp.End)
		if err := j.hold(b, ev, s, now, sp.Start, sp.End, watermark.MinTime); err != nil {
			return true, err
		}
	}
	if !took {
		j.stats.LateDropped++
		return true, j.emit.Dropped(ev, DropExpired, j.spans[len(j.spans)-1])
	}
	return true, nil
}

// bounds is the interval join's [lo, hi) of the other side's times that
// match a record of side s at t (MinTime or MaxTime when it overflows).
func (j *Joiner) bounds(s int, t int64) (lo, hi int64) {
	if s == 0 {
		return addClamped(t, j.spec.Lower), addClamped(addClamped(t, j.spec.Upper), 1)
	}
	return addClamped(t, -j.spec.Upper), addClamped(addClamped(t, -j.spec.Lower), 1)
}

// searchTime returns the index of the first of recs (in time order) at
// or after t.
func searchTime(recs []*joinRec, t int64) int {
	i, _ := slices.BinarySearchFunc(recs, t, func(x *joinRec, t int64) int { return cmp.Compare(x.Time, t) })
	return i
}

// addClamped is a + b clamped to [MinTime, MaxTime].
func addClamped(a, b int64) int64 {
	switch {
	case b > 0 && a > watermark.MaxTime-b:
		return watermark.MaxTime
	case b < 0 && a < watermark.MinTime-b:
		return watermark.MinTime
	}
	return a + b
}

// bucket returns key's bucket of window start (interval joins: its one
// bucket) in shard sh, making it.
func (j *Joiner) bucket(sh *joinShard, key string, start, end int64) *joinBucket {
	k := sh.keys[key]
	if k == nil {
		k = &joinKey{key: strings.Clone(key), sh: sh}
		sh.keys[k.key] = k
	}
	if j.spec.Interval {
		if len(k.buckets) == 0 {
			k.buckets = append(k.buckets, &joinBucket{k: k})
		}
		return k.buckets[0]
	}
	if b := sh.windows[bucketID{key, start}]; b != nil {
		return b
	}
	b := &joinBucket{k: k, start: start, end: end}
	k.buckets = append(k.buckets, b)
	sh.windows[bucketID{k.key, start}] = b
	j.seq++
	heap.Push(&sh.expiry, joinTimer{at: addSat(end, j.spec.AllowedLateness), seq: j.seq, b: b})
	return b
}

// bucketID names a window join's bucket in its shard.
type bucketID struct {
	key   string
	start int64
}

// hold matches a record of side s in bucket b with the other side's
// records there ([lo, hi) of their times for an interval join) and keeps
// it; expireAt: its own expiry (interval joins).
func (j *Joiner) hold(b *joinBucket, ev *Event, s int, now, lo, hi, expireAt int64) error {
	j.seq++
	r := &joinRec{JoinRecord: JoinRecord{Time: ev.Time, Value: strings.Clone(ev.Value), Partition: ev.Partition, Offset: ev.Offset}, side: s, b: b, seq: j.seq}
	j.changed(b.k)
	if j.opts.Store != nil {
		j.unflushed += len(r.Value) + 64
	}
	others := b.recs[1-s]
	if j.spec.Interval {
		// An interval join's records are in time order: only those in
		// [lo, hi) are read.
		others = others[searchTime(others, lo):searchTime(others, hi)]
	}
	for _, o := range others {
		if o.gone {
			continue
		}
		left, right := r, o
		if s == 1 {
			left, right = o, r
		}
		for _, x := range []*joinRec{left, right} {
			if x.early {
				// The early unmatched row was wrong: take it back.
				x.early = false
				if err := j.unmatched(x, x.shown, false, true); err != nil {
					return err
				}
			}
			x.matched = true
		}
		// A late record's matches are LATE (interval joins: the record
		// is behind the frontier; window joins: as a pane, below).
		if err := j.match(left, right, j.spec.Interval && ev.Time < j.f); err != nil {
			return err
		}
	}
	j.insert(b, r)
	if j.spec.Interval {
		heap.Push(&b.k.sh.expiry, joinTimer{at: expireAt, seq: r.seq, rec: r})
	}
	if j.spec.EarlyEvery > 0 && !r.matched && j.outer(s) {
		r.earlyAt = addSat(now, j.spec.EarlyEvery)
		j.armEarly(r)
	}
	return nil
}

// insert adds r to its bucket: an interval join's after the records of
// its time already there, a window join's last.
func (j *Joiner) insert(b *joinBucket, r *joinRec) {
	s := r.side
	if j.spec.Interval {
		b.recs[s] = slices.Insert(b.recs[s], searchTime(b.recs[s], addClamped(r.Time, 1)), r)
	} else {
		b.recs[s] = append(b.recs[s], r)
	}
	b.k.sh.held++
	j.held++
	j.bytes += recBytes(r)
}

// recBytes estimates what a held record takes in memory.
func recBytes(r *joinRec) int {
	return int(unsafe.Sizeof(joinRec{})) + len(r.Value) + 2*int(unsafe.Sizeof(joinTimer{}))
}

// armEarly pushes r's early timer.
func (j *Joiner) armEarly(r *joinRec) {
	sh := r.b.k.sh
	if len(sh.early) > 2*sh.held+64 {
		sh.pruneEarly()
	}
	heap.Push(&sh.early, joinTimer{at: r.earlyAt, seq: r.seq, rec: r})
}

// pruneEarly drops the early timers of records matched or let go: while
// processing time stands still (a replay without clock lines) they would
// pile up with the stream.
func (sh *joinShard) pruneEarly() {
	kept := sh.early[:0]
	for _, t := range sh.early {
		if !t.rec.gone && !t.rec.matched {
			kept = append(kept, t)
		}
	}
	clear(sh.early[len(kept):])
	sh.early = kept
	heap.Init(&sh.early)
}

// timing is a row's timing at frontier f, as a pane's (docs/SEMANTICS.md,
// Joins): LATE once f has passed its end (the window's, or the
// interval's), else early (not final) or on time.
func timing(f, end int64, early bool) Timing {
	switch {
	case f >= end:
		return Late
	case early:
		return Early
	}
	return OnTime
}

// outer reports whether side s's unmatched records are emitted.
func (j *Joiner) outer(s int) bool {
	return j.spec.Kind == FullJoin || (j.spec.Kind == LeftJoin && s == 0)
}

func (j *Joiner) match(left, right *joinRec, late bool) error {
	r := &j.row
	*r = JoinRow{Key: left.b.k.key, Left: &left.JoinRecord, Right: &right.JoinRecord, Final: true}
	r.Start, r.End = left.b.start, left.b.end
	if j.spec.Interval {
		r.Start, r.End = j.bounds(0, left.Time)
	}
	if r.Timing = timing(j.f, r.End, false); late {
		r.Timing = Late
	}
	j.stats.Panes[r.Timing]++
	return j.emit.Row(r)
}

// span is the window or interval of x's unmatched row.
func (j *Joiner) span(x *joinRec) (start, end int64) {
	if j.spec.Interval {
		return j.bounds(x.side, x.Time)
	}
	return x.b.start, x.b.end
}

// unmatched emits x's unmatched row.
func (j *Joiner) unmatched(x *joinRec, timing Timing, final, retraction bool) error {
	j.changed(x.b.k)
	r := &j.row
	*r = JoinRow{Key: x.b.k.key, Timing: timing, Final: final, Retraction: retraction}
	if x.side == 0 {
		r.Left = &x.JoinRecord
	} else {
		r.Right = &x.JoinRecord
	}
	r.Start, r.End = j.span(x)
	if retraction {
		j.stats.Retractions++
	} else {
		j.stats.Panes[timing]++
	}
	return j.emit.Row(r)
}

// Tick moves processing time to now: early unmatched rows due (of
// shards that may fire), then idleness and the frontier.
func (j *Joiner) Tick(now int64) error {
	for id, sh := range j.shards {
		if !j.mayFire(id) {
			continue
		}
		for len(sh.early) > 0 && sh.early[0].at <= now {
			t := heap.Pop(&sh.early).(joinTimer)
			if x := t.rec; !x.gone && !x.matched && !x.early {
				_, end := j.span(x)
				x.early, x.shown, x.earlyAt = true, timing(j.f, end, true), 0
				if err := j.unmatched(x, x.shown, false, false); err != nil {
					return err
				}
			}
		}
	}
	j.wm.Tick(now)
	return j.advance()
}

// Finish moves the frontier to the end of time: every record's last
// chance passes.
func (j *Joiner) Finish() error {
	if j.wm.Finish() {
		j.f = j.wm.Value()
		return j.expireAll()
	}
	return nil
}

// advance takes in the frontier's step, if any, and fires the expiries
// due.
func (j *Joiner) advance() error {
	moved := j.wm.Advance()
	if moved {
		j.f = j.wm.Value()
	}
	if !moved && !j.recheck && len(j.catching) == 0 {
		return nil
	}
	return j.expireAll()
}

// expireAll fires the expiries due in every shard that may fire: at the
// frontier, or, catching up, at its own.
func (j *Joiner) expireAll() error {
	j.recheck = false
	for id, sh := range j.shards {
		switch {
		case j.catching[id]:
			if err := j.expire(sh, j.catchingFrontier(id)); err != nil {
				return err
			}
		case j.mayFire(id):
			if err := j.expire(sh, j.f); err != nil {
				return err
			}
		}
	}
	return nil
}

// expire lets go of every record (interval joins) or window (window
// joins) of sh whose last chance f has passed, emitting the unmatched
// rows, in the order of their last chances, then arrival. f is the
// frontier sh runs at: the Joiner's, or its own while it catches up.
func (j *Joiner) expire(sh *joinShard, f int64) error {
	if len(sh.expiry) == 0 || sh.expiry[0].at > f {
		sh.done = max(sh.done, f)
		return nil
	}
	prev := sh.done
	sh.done = max(sh.done, f)
	for len(sh.expiry) > 0 && sh.expiry[0].at <= f {
		t := heap.Pop(&sh.expiry).(joinTimer)
		if x := t.rec; x != nil {
			if x.gone {
				continue // dropped with its key
			}
			if err := j.let(x, prev); err != nil {
				return err
			}
			b := x.b
			if b.gone++; b.gone*2 > len(b.recs[0])+len(b.recs[1]) {
				j.compact(b)
			}
			continue
		}
		b := t.b
		if b.over {
			continue
		}
		b.over = true
		for s := range 2 {
			for _, x := range b.recs[s] {
				if err := j.let(x, prev); err != nil {
					return err
				}
			}
		}
		j.removeBucket(b)
	}
	return nil
}

// let lets go of x at its last chance, in the frontier's step up from
// prev: its final unmatched row when it has no match and its side's are
// emitted, ON_TIME when the step passed its end, else LATE.
func (j *Joiner) let(x *joinRec, prev int64) error {
	j.release(x)
	j.changed(x.b.k)
	if !x.matched && j.outer(x.side) {
		x.early = false
		_, end := j.span(x)
		return j.unmatched(x, timing(prev, end, false), true, false)
	}
	return nil
}

// release marks x gone and takes it off the counts.
func (j *Joiner) release(x *joinRec) {
	x.gone = true
	x.b.k.sh.held--
	j.held--
	j.bytes -= recBytes(x)
}

// compact drops b's expired records; an empty bucket goes.
func (j *Joiner) compact(b *joinBucket) {
	for s := range 2 {
		kept := b.recs[s][:0]
		for _, x := range b.recs[s] {
			if !x.gone {
				kept = append(kept, x)
			}
		}
		clear(b.recs[s][len(kept):])
		b.recs[s] = kept
	}
	b.gone = 0
	if len(b.recs[0])+len(b.recs[1]) == 0 {
		j.removeBucket(b)
	}
}

// removeBucket takes b off its key; a key left without a bucket goes
// (with a Store, at the next Flush, which deletes its stored records).
func (j *Joiner) removeBucket(b *joinBucket) {
	k := b.k
	if i := slices.Index(k.buckets, b); i >= 0 {
		k.buckets = slices.Delete(k.buckets, i, i+1)
	}
	if !j.spec.Interval && k.sh.windows[bucketID{k.key, b.start}] == b {
		delete(k.sh.windows, bucketID{k.key, b.start})
	}
	if len(k.buckets) == 0 && !k.dirty {
		k.forget()
	}
}
