// Package watermark tracks event-time progress: one generator per input
// partition (an upstream replica) and the pipeline Frontier, the minimum of
// the active partitions' watermarks.
//
// Invariants:
//   - A generator's watermark never decreases.
//   - The frontier never decreases: not when a partition joins with a lower
//     watermark, not when partitions leave, not after a restore.
//   - A partition is idle only when it has delivered no record for the idle
//     timeout of processing time and is caught up; idle partitions are left
//     out of the minimum, and when every assigned partition is idle the
//     frontier moves to the largest partition watermark.
//   - After a restore, partitions not yet assigned again can be held in the
//     minimum for a while (HoldRestored), so a partial first assignment does
//     not let the frontier run ahead of them.
//   - While an assigned partition's state restores (HoldRestoring), the
//     frontier stays where it is.
//   - Under QuietAdvance, when every assigned partition is idle and caught
//     up (none held, restoring or paused), the frontier moves with
//     processing time from the tick that saw the last of them idle:
//     F = max(F, W + (now - t_quiet)), W the largest partition watermark
//     then. A record, a lagging partition, an assignment, a revocation or
//     a hold ends it at once; the next quiet period starts from its own
//     tick.
//   - Under a Marked spec (stage 2 of a repartitioned pipeline) records never
//     move a partition's watermark; Mark does, from the partition's
//     Upstreams (the last marker of every input partition), and never lowers it.
//
// The package is pure: processing time is passed in as Unix milliseconds.
package watermark

import (
	"math"
	"slices"
	"sort"

	"github.com/windowd/windowd/codec"
)

// MinTime is the watermark of a partition that has emitted none yet (minus infinity).
const MinTime int64 = math.MinInt64

// MaxTime is the frontier at end of input (plus infinity).
const MaxTime int64 = math.MaxInt64

// Generator is the watermark generator of one partition.
type Generator struct {
	MaxTS     int64 // largest event time seen (MinTime before the first record)
	Seen      int64 // records observed
	Watermark int64 // last emitted watermark (MinTime before the first)
}

// NewGenerator returns a generator that has seen nothing.
func NewGenerator() Generator {
	return Generator{MaxTS: MinTime, Watermark: MinTime}
}

// Observe feeds one record's event time; it reports whether the emitted
// watermark advanced.
func (g *Generator) Observe(spec *Spec, ts int64) bool {
	if ts > g.MaxTS {
		g.MaxTS = ts
	}
	g.Seen++
	every := spec.Every
	if every < 1 {
		every = 1
	}
	if g.Seen%every != 0 {
		return false
	}
	delay := spec.MaxDelay
	if spec.Strategy == Monotonic {
		delay = 0
	}
	wm := subSat(g.MaxTS, delay)
	if wm > g.Watermark {
		g.Watermark = wm
		return true
	}
	return false
}

func subSat(a, b int64) int64 {
	if b > 0 && a < math.MinInt64+b {
		return math.MinInt64
	}
	return a - b
}

// partition is the frontier's view of one input partition.
type partition struct {
	id         int32
	gen        Generator
	held       bool  // restored from state, not yet assigned: still holds the frontier
	restoring  bool  // assigned, its state still restoring: holds the frontier where it is (HoldRestoring)
	holdUntil  int64 // processing time at which a held partition stops holding
	assigned   bool
	caughtUp   bool
	idle       bool
	paused     bool  // watermark alignment paused its consumption (Align)
	lastActive int64 // processing time of the last record, of the assignment, or of the resume
	// base (Marked spec): what the upstream partitions' own watermarks
	// give this partition, below its watermark while the quiet advance
	// upstream raised it (MarkQuiet); MinTime: its watermark.
	base int64
}

// PartitionStatus is a read-only view of one partition, for metrics and tests.
type PartitionStatus struct {
	Partition int32
	Watermark int64
	Idle      bool
	Assigned  bool
	Held      bool // restored, not yet assigned, still holding the frontier
	Restoring bool // its state is restoring: the frontier stays where it is (HoldRestoring)
	Paused    bool // watermark alignment paused it (Align)
}

// Frontier is the event-time frontier of one pipeline on one instance.
type Frontier struct {
	spec Spec
	// sorted holds the partitions in id order (deterministic iteration);
	// lookup finds one by id.
	sorted []*partition
	value  int64
	// What Advance computed over the partitions: the minimum watermark of
	// the active ones (held, or assigned and not idle), the maximum of
	// the assigned ones, and how many of each. They stay valid until
	// stale is set: by any change of a partition's membership, idleness
	// or hold, by a watermark that moves other than up, and by a rise of
	// the watermark that held the minimum (raised). A record that raises
	// another partition's watermark, most records, then costs Advance no
	// pass over the partitions. (Changes that only add to the active set,
	// such as Assign, HoldRestored or a record of an idle partition,
	// cannot make a stale minimum move the frontier, which never goes
	// back; they set stale anyway, so that the minimum is always exact.)
	min, max         int64
	active, assigned int
	stale            bool
	recomputes       int // passes over the partitions (for tests)
	// The quiet advance (Spec.QuietAdvance): quietSince is the tick at
	// which every assigned partition was idle and caught up (MinTime: not
	// quiet), quietBase the largest partition watermark then, now the
	// last tick. quietFrom is what the partitions alone gave the frontier
	// at the last Advance that the quiet advance moved (MaxTime: that
	// Advance was not quiet).
	quietSince, quietBase, now, quietFrom int64
	// markedQuiet (Marked spec): the last step that moved the frontier
	// went past what the upstream partitions' own watermarks give.
	markedQuiet bool
}

// NewFrontier returns a frontier at minus infinity with no partitions.
func NewFrontier(spec Spec) *Frontier {
	return &Frontier{spec: spec, value: MinTime, stale: true, quietSince: MinTime, quietFrom: MaxTime}
}

// raised notes that st's watermark rose from old. The minimum Advance
// computed stays valid when st is not active (its watermark only counts in
// the maximum, which matters only when no partition is active) or did not
// hold the minimum.
func (f *Frontier) raised(st *partition, old int64) {
	active := st.held || (st.assigned && !st.idle)
	if f.active == 0 || (active && old <= f.min) {
		f.stale = true
	}
}

// Value is the current frontier.
func (f *Frontier) Value() int64 { return f.value }

// index returns where partition p is in f.sorted and true, or where it
// goes and false when it is unknown.
func (f *Frontier) index(p int32) (int, bool) {
	// Partitions are mostly numbered 0..n-1: then p is at index p of the
	// id-ordered list, and a record needs no search.
	if p >= 0 && int(p) < len(f.sorted) && f.sorted[p].id == p {
		return int(p), true
	}
	i := sort.Search(len(f.sorted), func(i int) bool { return f.sorted[i].id >= p })
	return i, i < len(f.sorted) && f.sorted[i].id == p
}

// lookup returns partition p, or nil when it is unknown.
func (f *Frontier) lookup(p int32) *partition {
	if i, ok := f.index(p); ok {
		return f.sorted[i]
	}
	return nil
}

// part returns partition p, adding it when it is unknown.
func (f *Frontier) part(p int32) *partition {
	i, ok := f.index(p)
	if ok {
		return f.sorted[i]
	}
	st := &partition{id: p, gen: NewGenerator(), base: MinTime}
	f.stale = true
	f.sorted = slices.Insert(f.sorted, i, st)
	return st
}

// Assign makes p an active member of the minimum, resuming its persisted
// generator state if any. caughtUp says whether its consumer position has
// reached the end of the partition (always true in replay).
func (f *Frontier) Assign(p int32, now int64, caughtUp bool) {
	st := f.part(p)
	st.assigned = true
	st.held = false
	st.restoring = false
	st.idle = false
	st.caughtUp = caughtUp
	st.lastActive = now
	f.stale = true
	f.endQuiet()
}

// HoldRestored makes every partition restored from persisted state but not
// (yet) assigned keep holding the frontier at its persisted watermark until
// it is assigned or processing time reaches now+hold, and returns them.
//
// After a restart the group may first hand this instance only some of its
// old partitions (a crashed member is still registered until its session
// times out); without the hold the frontier would run ahead on those, and
// the others' records, replayed from the checkpoint, would arrive late.
func (f *Frontier) HoldRestored(now, hold int64) []int32 {
	var held []int32
	for _, st := range f.sorted {
		if !st.assigned && st.gen.Watermark != MinTime {
			st.held, st.holdUntil = true, now+hold
			held = append(held, st.id)
			f.stale = true
			f.endQuiet()
		}
	}
	return held
}

// HoldRestoring keeps the frontier where it is while partition p's state
// restores in the background, until Assign(p) or Revoke(p): p's watermark
// is not known before its state is, and a frontier that ran on meanwhile
// would make p's records late. The other partitions' records go on being
// processed; their windows wait, as they would behind p.
func (f *Frontier) HoldRestoring(p int32) {
	st := f.part(p)
	st.restoring = true
	f.stale = true
	f.endQuiet()
}

// Restoring reports whether HoldRestoring holds the frontier for p.
func (f *Frontier) Restoring(p int32) bool {
	st := f.lookup(p)
	return st != nil && st.restoring
}

// Revoke removes p from the minimum; its generator state is kept so that a
// later Assign resumes it.
func (f *Frontier) Revoke(p int32) {
	if st := f.lookup(p); st != nil {
		st.assigned = false
		st.held = false
		st.restoring = false
		st.idle = false
		f.stale = true
		f.endQuiet()
	}
}

// SetCaughtUp records whether p's consumer has reached the partition end.
func (f *Frontier) SetCaughtUp(p int32, caughtUp bool) {
	if st := f.lookup(p); st != nil {
		st.caughtUp = caughtUp
		if !caughtUp && st.assigned {
			f.endQuiet() // it lags: records are coming
		}
	}
}

// Wait marks assigned partition p as holding back a record it has not
// observed: the record waits (for the schema registry,
// service/registrywait.go) and comes later. p is active again, as the
// record's Observe would have made it, and lags, so that it does not turn
// idle while the record waits: its watermark holds the frontier until the
// record comes, and the record is not made late by the wait.
func (f *Frontier) Wait(p int32) {
	st := f.lookup(p)
	if st == nil || !st.assigned {
		return
	}
	st.caughtUp = false
	if st.idle {
		st.idle = false
		f.stale = true
	}
	f.endQuiet()
}

// Observe feeds a record of partition p that arrived at processing time now:
// p becomes active again and its generator sees ts.
func (f *Frontier) Observe(p int32, ts, now int64) {
	st := f.part(p)
	if !st.assigned {
		st.assigned = true
		st.caughtUp = true
		f.stale = true
	}
	if st.idle {
		st.idle = false
		f.stale = true
		f.endQuiet()
	}
	st.lastActive = now
	if f.spec.Marked {
		st.gen.Seen++
		if ts > st.gen.MaxTS {
			st.gen.MaxTS = ts
		}
		return
	}
	if old := st.gen.Watermark; st.gen.Observe(&f.spec, ts) {
		f.raised(st, old)
	}
}

// Mark raises p's watermark to wm (a frontier whose spec is Marked takes
// its partition watermarks from here); a lower wm changes nothing.
func (f *Frontier) Mark(p int32, wm int64) { f.MarkQuiet(p, wm, wm) }

// MarkQuiet is Mark of a watermark wm that the quiet advance upstream
// raised above base, what the upstream partitions' own watermarks give:
// a step of the frontier past base is a quiet one (QuietStep).
func (f *Frontier) MarkQuiet(p int32, wm, base int64) {
	st := f.part(p)
	st.base = max(st.base, min(base, wm))
	if old := st.gen.Watermark; wm > old {
		st.gen.Watermark = wm
		f.raised(st, old)
	}
}

// markedBase is what Advance would give over the partitions' bases (prev:
// the frontier before it), for a Marked spec.
func (f *Frontier) markedBase(prev int64) int64 {
	lo, hi, active := MaxTime, MinTime, 0
	for _, st := range f.sorted {
		b := st.gen.Watermark
		if st.base != MinTime {
			b = min(b, st.base)
		}
		switch {
		case st.restoring:
			active++
			lo = min(lo, prev)
		case st.held:
			active++
			lo = min(lo, b)
		case st.assigned:
			hi = max(hi, b)
			if !st.idle {
				active++
				lo = min(lo, b)
			}
		}
	}
	if active == 0 {
		return hi
	}
	return lo
}

// Tick re-evaluates idleness, holds and the quiet advance at processing
// time now.
func (f *Frontier) Tick(now int64) {
	f.now = now
	defer f.tickQuiet(now)
	for _, st := range f.sorted {
		if st.held && now >= st.holdUntil {
			st.held = false
			f.stale = true
		}
		if f.spec.IdleTimeout <= 0 {
			continue
		}
		if st.assigned && !st.idle && !st.paused && st.caughtUp && now-st.lastActive >= f.spec.IdleTimeout {
			st.idle = true
			f.stale = true
		}
	}
}

// Advance recomputes the frontier from the partitions and, while the input
// is quiet, the processing time since it went quiet; it reports whether the
// frontier moved.
func (f *Frontier) Advance() bool {
	f.quietFrom = MaxTime
	if f.stale {
		f.recompute()
	}
	if f.assigned == 0 && f.active == 0 {
		return false
	}
	candidate := f.min
	if f.active == 0 {
		candidate = f.max
	}
	prev, moved := f.value, false
	if candidate > f.value {
		f.value = candidate
		moved = true
	}
	if q := f.QuietValue(); q > f.value {
		f.quietFrom = f.value
		f.value = q
		moved = true
	}
	if f.spec.Marked && moved {
		// Upstream's quiet advance, carried by the markers.
		b := max(prev, f.markedBase(prev))
		if f.markedQuiet = b < f.value; f.markedQuiet {
			f.quietFrom = b
		}
	}
	return moved
}

// endQuiet ends the quiet advance: a partition is active, lags, holds or
// changed hands.
func (f *Frontier) endQuiet() { f.quietSince = MinTime }

// tickQuiet starts the quiet advance at now when every assigned partition
// is idle and caught up and none is held, restoring or paused, and ends it
// when one is not.
func (f *Frontier) tickQuiet(now int64) {
	if !f.spec.QuietAdvance || f.spec.IdleTimeout <= 0 {
		return
	}
	quiet, w := false, MinTime
	for _, st := range f.sorted {
		if st.held || st.restoring {
			quiet = false
			break
		}
		if !st.assigned {
			continue
		}
		if !st.idle || !st.caughtUp || st.paused {
			quiet = false
			break
		}
		quiet = true
		w = max(w, st.gen.Watermark)
	}
	switch {
	case !quiet || w == MinTime:
		f.endQuiet()
	case f.quietSince == MinTime:
		f.quietSince, f.quietBase = now, w
	}
}

// Quiet reports whether the quiet advance is moving the frontier (under a
// Marked spec: whether the last step was the quiet advance upstream's).
func (f *Frontier) Quiet() bool { return f.quietSince != MinTime || f.markedQuiet }

// QuietValue is where the quiet advance puts the frontier at the last tick,
// W + (now - t_quiet), or MinTime when the input is not quiet.
func (f *Frontier) QuietValue() int64 {
	if f.quietSince == MinTime {
		return MinTime
	}
	d := f.now - f.quietSince
	if f.quietBase > MaxTime-d {
		return MaxTime - 1
	}
	return f.quietBase + d
}

// QuietStep reports whether the last Advance was moved by the quiet advance
// and, when it was, the frontier the partitions' watermarks alone gave: a
// window whose deadline is past that was reached by the quiet advance.
func (f *Frontier) QuietStep() (from int64, quiet bool) {
	return f.quietFrom, f.quietFrom != MaxTime
}

// recompute sets min, max, active and assigned from the partitions.
func (f *Frontier) recompute() {
	min, max := MaxTime, MinTime
	active, assigned := 0, 0
	for _, st := range f.sorted {
		if st.restoring {
			// Counts at the frontier itself: it stays where it is.
			active++
			if f.value < min {
				min = f.value
			}
			continue
		}
		if st.held {
			// Held partitions always count (they are neither assigned nor idle).
			active++
			if st.gen.Watermark < min {
				min = st.gen.Watermark
			}
			continue
		}
		if !st.assigned {
			continue
		}
		assigned++
		wm := st.gen.Watermark
		if wm > max {
			max = wm
		}
		if st.idle {
			continue
		}
		active++
		if wm < min {
			min = wm
		}
	}
	f.min, f.max, f.active, f.assigned = min, max, active, assigned
	f.stale = false
	f.recomputes++
}

// Align applies watermark alignment at processing time now
// (docs/SEMANTICS.md, Watermark alignment): an assigned partition whose
// watermark is more than Spec.MaxDrift ahead of the frontier is paused, a
// paused one back within it (or no longer assigned) resumes. It returns
// the partitions to pause and to resume now. A paused partition is never
// idle (its idleness clock restarts when it resumes), and the partition
// holding the frontier, whose watermark is the frontier, is never paused.
// Without MaxDrift, or before the frontier is known, nothing is paused.
func (f *Frontier) Align(now int64) (pause, resume []int32) {
	for _, st := range f.sorted {
		ahead := f.spec.MaxDrift > 0 && st.assigned && f.value != MinTime && f.value != MaxTime &&
			st.gen.Watermark != MinTime && st.gen.Watermark-f.value > f.spec.MaxDrift
		switch {
		case ahead && !st.paused:
			st.paused = true
			if st.idle {
				// Records may come while it is paused, unfetched: it
				// holds the frontier at its watermark meanwhile.
				st.idle = false
				f.stale = true
			}
			pause = append(pause, st.id)
		case !ahead && st.paused:
			st.paused = false
			st.lastActive = now
			resume = append(resume, st.id)
		}
	}
	return pause, resume
}

// Paused reports whether Align paused partition p.
func (f *Frontier) Paused(p int32) bool {
	st := f.lookup(p)
	return st != nil && st.paused
}

// Finish moves the frontier to plus infinity (end of input) and reports whether it moved.
func (f *Frontier) Finish() bool {
	if f.value == MaxTime {
		return false
	}
	f.value = MaxTime
	return true
}

// Status returns every known partition in id order.
func (f *Frontier) Status() []PartitionStatus {
	out := make([]PartitionStatus, 0, len(f.sorted))
	for _, st := range f.sorted {
		out = append(out, PartitionStatus{Partition: st.id, Watermark: st.gen.Watermark, Idle: st.idle, Assigned: st.assigned, Held: st.held, Restoring: st.restoring, Paused: st.paused})
	}
	return out
}

const encodingVersion = 1

// MarshalBinary encodes the frontier value and every partition's generator
// (assignment, idleness and processing times are not persisted: they belong
// to the running instance).
func (f *Frontier) MarshalBinary() ([]byte, error) {
	w := codec.NewWriter(make([]byte, 0, 16+len(f.sorted)*24)).Byte(encodingVersion)
	w.Varint(f.value).Uvarint(uint64(len(f.sorted)))
	for _, st := range f.sorted {
		g := st.gen
		w.Varint(int64(st.id)).Varint(g.MaxTS).Varint(g.Seen).Varint(g.Watermark)
	}
	return w.Bytes(), nil
}

// UnmarshalBinary restores what MarshalBinary wrote. Restored partitions are
// not assigned until Assign or Observe; the frontier keeps the larger of its
// current and the restored value. A corrupt encoding changes nothing.
func (f *Frontier) UnmarshalBinary(b []byte) error {
	r := codec.NewReader(b, "frontier encoding")
	if r.Byte() != encodingVersion {
		r.Fail()
	}
	value := r.Varint()
	type entry struct {
		id  int64
		gen Generator
	}
	entries := make([]entry, r.Count())
	for i := range entries {
		e := &entries[i]
		e.id, e.gen.MaxTS, e.gen.Seen, e.gen.Watermark = r.Varint(), r.Varint(), r.Varint(), r.Varint()
		if e.id < math.MinInt32 || e.id > math.MaxInt32 {
			r.Fail()
		}
	}
	if err := r.Done(); err != nil {
		return err
	}
	for _, e := range entries {
		st := f.part(int32(e.id))
		if e.gen.Watermark > st.gen.Watermark {
			st.gen = e.gen
			f.stale = true
		}
	}
	if value > f.value {
		f.value = value
	}
	return nil
}

// Generator returns p's generator state; ok is false when p is unknown.
func (f *Frontier) Generator(p int32) (g Generator, ok bool) {
	st := f.lookup(p)
	if st == nil {
		return NewGenerator(), false
	}
	return st.gen, true
}

// RestoreGenerator sets p's generator to g, the state a previous owner of
// p persisted. The frontier itself never moves back: a partition restored
// with a lower watermark holds it from advancing, and its records below
// the frontier are late.
func (f *Frontier) RestoreGenerator(p int32, g Generator) {
	f.part(p).gen = g
	f.stale = true
}

// Drop forgets p's generator (its state moved to another instance, or is
// about to be restored from scratch), keeping the hold of a restore in
// progress (HoldRestoring): a partition whose restore holds the frontier
// goes on holding it until its state is back.
func (f *Frontier) Drop(p int32) {
	restoring := f.Restoring(p)
	f.Forget(p)
	if restoring {
		f.HoldRestoring(p)
	}
}

// Last returns the highest partition id known, and whether one is.
func (f *Frontier) Last() (int32, bool) {
	if len(f.sorted) == 0 {
		return 0, false
	}
	return f.sorted[len(f.sorted)-1].id, true
}

// Forget removes p entirely (its state moved to another instance); like
// a revocation, it ends the quiet advance.
func (f *Frontier) Forget(p int32) {
	i, ok := f.index(p)
	if !ok {
		return
	}
	f.sorted = slices.Delete(f.sorted, i, i+1)
	f.stale = true
	f.endQuiet()
}
