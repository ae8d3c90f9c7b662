package windowing

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"
	"strings"

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
// The Joiner holds its state in memory (replay); it is pure like the
// engine: no Kafka, no Pebble, no wall clock.

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
	gone    bool // expired
}

// joinBucket holds a key's records: of one window (window join), in
// arrival order, or all of the key's (interval join), in time order.
type joinBucket struct {
	key        string
	start, end int64
	recs       [2][]*joinRec
	gone       int // expired records still in recs (interval join)
}

type bucketID struct {
	key   string
	start int64
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

// Joiner runs a join.
type Joiner struct {
	spec    JoinSpec
	wm      *watermark.Frontier
	f       int64
	emit    JoinEmitter
	windows Assigner
	spans   []Span
	buckets map[bucketID]*joinBucket
	expiry  joinTimers // by frontier
	early   joinTimers // by processing time
	seq     int64
	stats   Stats
	row     JoinRow
	held    int // records held
}

// NewJoiner returns a Joiner of spec at frontier minus infinity.
func NewJoiner(spec JoinSpec, wm watermark.Spec, emit JoinEmitter) (*Joiner, error) {
	if spec.Interval && spec.Lower > spec.Upper {
		return nil, fmt.Errorf("join: interval lower bound %d above upper %d", spec.Lower, spec.Upper)
	}
	if !spec.Interval && spec.Window.Kind != Tumbling && spec.Window.Kind != Hopping {
		return nil, fmt.Errorf("join: a window join takes tumbling or hopping windows, not %s", spec.Window.Kind)
	}
	j := &Joiner{spec: spec, wm: watermark.NewFrontier(wm), f: watermark.MinTime, emit: emit, buckets: map[bucketID]*joinBucket{}}
	if !spec.Interval {
		j.windows = NewAssigner(spec.Window)
	}
	return j, nil
}

// Assign adds upstream partition p to the frontier.
func (j *Joiner) Assign(p int32, now int64, caughtUp bool) { j.wm.Assign(p, now, caughtUp) }

// Frontier is the current frontier.
func (j *Joiner) Frontier() int64 { return j.f }

// Stats returns the counts so far (Panes: the rows emitted, by timing).
func (j *Joiner) Stats() Stats { return j.stats }

// Held is the number of records the Joiner holds.
func (j *Joiner) Held() int { return j.held }

// NeedsCheckpoint is false: a Joiner's state is in memory.
func (j *Joiner) NeedsCheckpoint() bool { return false }

// Checkpoint does nothing: a Joiner's state is in memory.
func (j *Joiner) Checkpoint(bool) error { return nil }

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
		ok, err := j.take(ev, s, now)
		if err != nil || !ok {
			return err
		}
	}
	j.wm.Observe(ev.Partition, ev.Time, now)
	return j.advance()
}

// take matches and holds ev, or drops it; ok is false for a record
// without a representable window, which moves no watermark.
func (j *Joiner) take(ev *Event, s int, now int64) (ok bool, err error) {
	if j.spec.Interval {
		lo, hi := j.bounds(s, ev.Time)
		if lo == watermark.MinTime || hi == watermark.MaxTime {
			j.stats.OutOfRange++
			return false, j.emit.Dropped(ev, DropOutOfRange, Span{})
		}
		// The record's own last chance passed: a record of the other
		// side that it matches is gone, or will be dropped too.
		if expired(j.f, addSat(ev.Time, 1), j.spec.AllowedLateness) {
			j.stats.LateDropped++
			return true, j.emit.Dropped(ev, DropExpired, Span{Start: lo, End: hi})
		}
		b := j.bucket(ev.Key, 0, 0)
		return true, j.hold(b, ev, s, now, lo, hi, addSat(hi, j.spec.AllowedLateness))
	}
	j.spans = j.windows.Windows(j.spans[:0], ev.Time)
	if len(j.spans) == 0 {
		j.stats.OutOfRange++
		return false, j.emit.Dropped(ev, DropOutOfRange, Span{})
	}
	took := false
	for _, sp := range j.spans {
		if expired(j.f, sp.End, j.spec.AllowedLateness) {
			continue
		}
		took = true
		b := j.bucket(ev.Key, sp.Start, sp.End)
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

// bucket returns the bucket of key and window start (interval joins: 0),
// making it.
func (j *Joiner) bucket(key string, start, end int64) *joinBucket {
	id := bucketID{key, start}
	if b := j.buckets[id]; b != nil {
		return b
	}
	key = strings.Clone(key)
	b := &joinBucket{key: key, start: start, end: end}
	j.buckets[bucketID{key, start}] = b
	if !j.spec.Interval {
		j.seq++
		heap.Push(&j.expiry, joinTimer{at: addSat(end, j.spec.AllowedLateness), seq: j.seq, b: b})
	}
	return b
}

// hold matches a record of side s in bucket b with the other side's
// records there ([lo, hi) of their times for an interval join) and keeps
// it; expireAt: its own expiry (interval joins).
func (j *Joiner) hold(b *joinBucket, ev *Event, s int, now, lo, hi, expireAt int64) error {
	r := &joinRec{JoinRecord: JoinRecord{Time: ev.Time, Value: strings.Clone(ev.Value), Partition: ev.Partition, Offset: ev.Offset}, side: s, b: b}
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
	if j.spec.Interval {
		// After the records of its time that came before it.
		b.recs[s] = slices.Insert(b.recs[s], searchTime(b.recs[s], addClamped(r.Time, 1)), r)
	} else {
		b.recs[s] = append(b.recs[s], r)
	}
	j.held++
	j.seq++
	if j.spec.Interval {
		heap.Push(&j.expiry, joinTimer{at: expireAt, seq: j.seq, rec: r})
	}
	if j.spec.EarlyEvery > 0 && !r.matched && j.outer(s) {
		if len(j.early) > 2*j.held+64 {
			j.pruneEarly()
		}
		heap.Push(&j.early, joinTimer{at: addSat(now, j.spec.EarlyEvery), seq: j.seq, rec: r})
	}
	return nil
}

// pruneEarly drops the early timers of records matched or let go: while
// processing time stands still (a replay without clock lines) they would
// pile up with the stream.
func (j *Joiner) pruneEarly() {
	kept := j.early[:0]
	for _, t := range j.early {
		if !t.rec.gone && !t.rec.matched {
			kept = append(kept, t)
		}
	}
	clear(j.early[len(kept):])
	j.early = kept
	heap.Init(&j.early)
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
	*r = JoinRow{Key: left.b.key, Left: &left.JoinRecord, Right: &right.JoinRecord, Final: true}
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
	r := &j.row
	*r = JoinRow{Key: x.b.key, Timing: timing, Final: final, Retraction: retraction}
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

// Tick moves processing time to now: early unmatched rows due, then
// idleness and the frontier.
func (j *Joiner) Tick(now int64) error {
	for len(j.early) > 0 && j.early[0].at <= now {
		t := heap.Pop(&j.early).(joinTimer)
		if x := t.rec; !x.gone && !x.matched && !x.early {
			_, end := j.span(x)
			x.early, x.shown = true, timing(j.f, end, true)
			if err := j.unmatched(x, x.shown, false, false); err != nil {
				return err
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
		return j.expire(j.wm.Value())
	}
	return nil
}

func (j *Joiner) advance() error {
	if !j.wm.Advance() {
		return nil
	}
	return j.expire(j.wm.Value())
}

// expire moves the frontier to f and lets go of every record (interval
// joins) or window (window joins) whose last chance it passed, emitting
// the unmatched rows, in the order of their last chances, then arrival.
func (j *Joiner) expire(f int64) error {
	prev := j.f
	j.f = f
	for len(j.expiry) > 0 && j.expiry[0].at <= f {
		t := heap.Pop(&j.expiry).(joinTimer)
		if x := t.rec; x != nil {
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
		for s := range 2 {
			for _, x := range b.recs[s] {
				if err := j.let(x, prev); err != nil {
					return err
				}
			}
		}
		delete(j.buckets, bucketID{b.key, b.start})
	}
	return nil
}

// let lets go of x at its last chance, in the frontier's step up from
// prev: its final unmatched row when it has no match and its side's are
// emitted, ON_TIME when the step passed its end, else LATE.
func (j *Joiner) let(x *joinRec, prev int64) error {
	x.gone = true
	j.held--
	if !x.matched && j.outer(x.side) {
		x.early = false
		_, end := j.span(x)
		return j.unmatched(x, timing(prev, end, false), true, false)
	}
	return nil
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
		delete(j.buckets, bucketID{b.key, b.start})
	}
}
