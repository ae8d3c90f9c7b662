package windowing

import (
	"math"
	"sort"
)

// This file holds sliding windows (docs/SEMANTICS.md, Windows, "Sliding
// windows"): one window per distinct event time t at which a key has a
// record, holding every record of the key in (t − size, t]; as windowd's
// windows are half-open, that is [t − size + 1, t + 1), so the window's end
// minus one names its record time.
//
// A sliding key keeps two things. Its windows hold their own aggregates
// and trigger state like any per-window key, so every trigger and
// accumulation mode works unchanged. Its slices, one per distinct record
// time (slice.start is that time), hold the records a new window needs: a
// record at t updates its slice and the existing windows whose range holds
// t (the later times within size: few, unless the record is out of order
// by much), and when t has no window yet, the new window starts from the
// merge of the slices in its range. That merge reads an index with the
// merged aggregates of every subtree (slideIndex, O(log n)) when every
// aggregate merges cheaply (count, sum, avg, min, max); quantiles, top_k
// and distinct_approx merge the range's slices one by one.
//
// Slices live while a later record can still need them: a record at t is
// taken while F < t + 1 + L, so its window reads slices above t − size ≥
// F − L − size, and slices at or below F − L − size go when a window of the
// key expires. So that the slices of a key whose windows have all expired
// are still found (a record within allowed_lateness may come) and then
// go, the newest window is retired instead of deleted at its expiry: it
// emits nothing more and stays, with a timer at t + size + L, when every
// slice it covers has become useless; a newer window makes it go at once.

// slidingAssign is step (1) for sliding windows.
func (e *Engine) assignSliding(ks *keyState, ev *Event, now int64) error {
	t, size := ev.Time, e.spec.Window.Size
	if t == math.MaxInt64 || t < math.MinInt64+size {
		e.outOfRange = true // (t − size, t] is not representable
		return nil
	}
	start, end := t-size+1, t+1
	if expired(e.f, end, e.spec.AllowedLateness) {
		return nil // dropped as late
	}
	ks.sliding = true
	var sl *slice
	if n := len(ks.slices); n > 0 && t <= ks.slices[n-1].start {
		sl = ks.findSlice(t) // not after the key's newest record: a tie or out of order
	}
	fresh := sl == nil
	if fresh {
		sl = &slice{start: t, acc: make([]accum, len(e.spec.Aggregates)), lastF: math.MinInt64}
		ks.insertSlice(sl)
		e.grow(ks, e.sliceBytes())
	}
	for i := range e.spec.Aggregates {
		sl.acc[i].add(&e.spec.Aggregates[i], &ev.Inputs[i])
	}
	if ks.index != nil {
		if fresh {
			ks.index.insert(sl)
		} else {
			ks.index.update(sl)
		}
	}
	// The windows whose range holds t: the times in [t, t + size), whose
	// starts are in [start, end).
	var own *window
	i := sort.Search(len(ks.windows), func(i int) bool { return ks.windows[i].start >= start })
	for ; i < len(ks.windows) && ks.windows[i].start < end; i++ {
		w := ks.windows[i]
		if w.start == start {
			own = w
		}
		if w.retired || expired(e.f, w.end, e.spec.AllowedLateness) {
			continue
		}
		if err := e.update(ks, w, ev, now); err != nil {
			return err
		}
	}
	if own != nil {
		return nil
	}
	w, err := e.newWindow(ks, start, end)
	if err != nil {
		return err
	}
	e.slideRange(ks, start, t, w.acc)
	w.sincePane = w.acc[0].n // every record adds a value to every aggregate
	ks.dirty = true
	e.touched = append(e.touched, w)
	if d := procDelay(&e.spec.Trigger, w.lateProc()); d > 0 {
		if err := e.setProc(ks, w, addSat(now, d)); err != nil {
			return err
		}
	}
	// A retired window before the new one has nothing left to keep.
	for _, old := range ks.windows {
		if old.retired && old.end < end {
			if err := e.store.DeleteTimer(timerOf(EventTimer, old.timer, ks, old, e.byEnd)); err != nil {
				return err
			}
			return e.deleteWindow(ks, old)
		}
	}
	return nil
}

// slideRange merges the slices of ks from lo through hi into dst.
func (e *Engine) slideRange(ks *keyState, lo, hi int64, dst []accum) {
	if e.slideIndexed {
		if ks.index == nil {
			ks.index = newSlideIndex(e.spec.Aggregates, ks.slices)
		}
		ks.index.query(ks.index.root, lo, hi, dst)
		return
	}
	i := sort.Search(len(ks.slices), func(i int) bool { return ks.slices[i].start >= lo })
	for ; i < len(ks.slices) && ks.slices[i].start <= hi; i++ {
		for j := range e.spec.Aggregates {
			// Sketches of one pipeline share their parameters: merges
			// cannot fail.
			_ = dst[j].merge(&e.spec.Aggregates[j], &ks.slices[i].acc[j])
		}
	}
}

// retireOrDelete ends window w of ks at its expiry: a sliding key's newest
// window is retired (see the file comment) when slices remain, any other
// window deleted.
func (e *Engine) retireOrDelete(ks *keyState, w *window) error {
	if !ks.sliding || w != ks.windows[len(ks.windows)-1] || len(ks.slices) == 0 {
		return e.deleteWindow(ks, w)
	}
	if err := e.cancelProc(ks, w); err != nil {
		return err
	}
	w.retired = true
	ks.dirty = true
	keep := addSat(addSat(w.end-1, e.spec.Window.Size), e.spec.AllowedLateness)
	return e.setEventTimer(ks, w, keep)
}

// dropSlides removes the slices of a sliding key that no record still to
// be taken can need: those at or below F − L − size.
func (e *Engine) dropSlides(ks *keyState) {
	limit := e.f - e.spec.AllowedLateness - e.spec.Window.Size // the frontier is far from the int64 limits while windows expire
	if e.f == math.MaxInt64 {
		limit = math.MaxInt64
	}
	n := 0
	for n < len(ks.slices) && ks.slices[n].start <= limit {
		n++
	}
	// In batches: a range never reads below its window, so slices past
	// use may wait for a few more (at most a quarter of the key's, or 32).
	if n == 0 || n < 32 && 4*n < len(ks.slices) && limit != math.MaxInt64 {
		return
	}
	e.release(ks, n*e.sliceBytes())
	if ks.index != nil {
		ks.index.dropThrough(limit)
	}
	copy(ks.slices, ks.slices[n:])
	clear(ks.slices[len(ks.slices)-n:])
	ks.slices = ks.slices[:len(ks.slices)-n]
}

// slideIndexed reports whether the sliding windows of specs use a
// slideIndex: every aggregate merges in constant time.
func slideIndexed(specs []AggSpec) bool {
	for _, a := range specs {
		switch a.Op {
		case Count, Sum, Avg, Min, Max:
		default:
			return false
		}
	}
	return true
}

// slideIndex is an ordered index of a sliding key's slices by time, each
// node with the merged aggregates of its subtree: a treap, so that
// inserting a slice, changing one and merging a range of them take
// O(log n) merges. Slices go from it in batches (dropThrough).
type slideIndex struct {
	specs []AggSpec
	root  *slideNode
	seed  uint64
}

type slideNode struct {
	sl          *slice
	prio        uint64
	left, right *slideNode
	sub         []accum // the merge of the subtree's slices
}

func newSlideIndex(specs []AggSpec, slices []*slice) *slideIndex {
	x := &slideIndex{specs: specs, seed: 0x9e3779b97f4a7c15}
	for _, sl := range slices {
		x.insert(sl)
	}
	return x
}

// prio draws the next node priority (splitmix64).
func (x *slideIndex) prio() uint64 {
	x.seed += 0x9e3779b97f4a7c15
	z := x.seed
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// fix recomputes n.sub from its children and its slice.
func (x *slideIndex) fix(n *slideNode) {
	copy(n.sub, n.sl.acc)
	if n.left != nil {
		x.merge(n.sub, n.left.sub)
	}
	if n.right != nil {
		x.merge(n.sub, n.right.sub)
	}
}

// insert adds sl, whose time the index does not hold.
func (x *slideIndex) insert(sl *slice) {
	n := &slideNode{sl: sl, prio: x.prio(), sub: make([]accum, len(x.specs))}
	x.root = x.insertAt(x.root, n)
}

// insertAt inserts n into the subtree t and returns the subtree's root.
func (x *slideIndex) insertAt(t, n *slideNode) *slideNode {
	if t == nil {
		x.fix(n)
		return n
	}
	if n.sl.start < t.sl.start {
		t.left = x.insertAt(t.left, n)
		if t.left.prio > t.prio { // rotate right
			l := t.left
			t.left, l.right = l.right, t
			x.fix(t)
			x.fix(l)
			return l
		}
	} else {
		t.right = x.insertAt(t.right, n)
		if t.right.prio > t.prio { // rotate left
			r := t.right
			t.right, r.left = r.left, t
			x.fix(t)
			x.fix(r)
			return r
		}
	}
	x.fix(t)
	return t
}

// update recomputes the merges on the path to sl after sl changed.
func (x *slideIndex) update(sl *slice) {
	x.updateAt(x.root, sl.start)
}

func (x *slideIndex) updateAt(n *slideNode, at int64) {
	if n == nil {
		return
	}
	if at < n.sl.start {
		x.updateAt(n.left, at)
	} else if at > n.sl.start {
		x.updateAt(n.right, at)
	}
	x.fix(n)
}

// dropThrough removes the slices at or below limit.
func (x *slideIndex) dropThrough(limit int64) {
	x.root = x.dropAt(x.root, limit)
}

func (x *slideIndex) dropAt(n *slideNode, limit int64) *slideNode {
	for n != nil && n.sl.start <= limit {
		n = n.right // n and its left subtree go
	}
	if n == nil {
		return nil
	}
	n.left = x.dropAt(n.left, limit)
	x.fix(n)
	return n
}

// query merges into dst the slices of subtree n from lo through hi.
func (x *slideIndex) query(n *slideNode, lo, hi int64, dst []accum) {
	for n != nil {
		switch {
		case n.sl.start < lo:
			n = n.right
		case n.sl.start > hi:
			n = n.left
		default:
			// n is in the range: the part of its left subtree at or
			// above lo, n, the part of its right subtree at or below hi.
			x.from(n.left, lo, dst)
			x.merge(dst, n.sl.acc)
			x.through(n.right, hi, dst)
			return
		}
	}
}

// from merges the slices of n at or above lo.
func (x *slideIndex) from(n *slideNode, lo int64, dst []accum) {
	for n != nil {
		if n.sl.start < lo {
			n = n.right
			continue
		}
		if n.right != nil {
			x.merge(dst, n.right.sub)
		}
		x.merge(dst, n.sl.acc)
		n = n.left
	}
}

// through merges the slices of n at or below hi.
func (x *slideIndex) through(n *slideNode, hi int64, dst []accum) {
	for n != nil {
		if n.sl.start > hi {
			n = n.left
			continue
		}
		if n.left != nil {
			x.merge(dst, n.left.sub)
		}
		x.merge(dst, n.sl.acc)
		n = n.right
	}
}

// merge folds src into dst: the cheap aggregates of slideIndexed inline.
func (x *slideIndex) merge(dst, src []accum) {
	for i := range x.specs {
		a, b := &dst[i], &src[i]
		if b.n == 0 {
			continue
		}
		switch x.specs[i].Op {
		case Sum, Avg:
			a.f += b.f
		case Min:
			if a.n == 0 || b.f < a.f {
				a.f = b.f
			}
		case Max:
			if a.n == 0 || b.f > a.f {
				a.f = b.f
			}
		}
		a.n += b.n
	}
}
