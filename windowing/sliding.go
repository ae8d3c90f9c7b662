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
// accumulation mode works unchanged. Its slideStore (slidestore.go) holds
// its records merged per event time, what a new window starts from: a
// record at t is added to its time and to the existing windows whose range
// holds t (the later times within size: few, unless the record is out of
// order by much), and when t has no window yet, the new window starts from
// the merge of the times in its range: O(log n) merges in a tree of merged
// subtrees when every aggregate merges cheaply (count, sum, avg, min,
// max); quantiles, top_k and distinct_approx merge the range time by time.
//
// Records live while a later record can still need them: a record at t
// is taken while F < t + 1 + L, so its window reads times above t − size
// ≥ F − L − size, and times at or below F − L − size go when a window of
// the key expires. So that the records of a key whose windows have all
// expired are still found (a record within allowed_lateness may come) and
// then go, the newest window is retired instead of deleted at its expiry:
// it emits nothing more and stays until t + size + L, when every record it
// covers has become useless. A key has one retired window at most, its
// first: when a later newest window expires, the retired one takes over
// its end (so its time t) and the expired window goes. The retired
// window's timer stays where it was set and, when it fires, is set again
// at the new t + size + L: a key with a record every few seconds moves
// its timer once per size, not once per record (a timer an hour ahead,
// among thousands of keys' timers, is a search of its own).

// assignSliding is step (1) for sliding windows.
func (e *Engine) assignSliding(ks *keyState, ev *Event, now int64) error {
	t, size := ev.Time, e.spec.Window.Size
	if !e.Representable(t) {
		e.outOfRange = true
		return nil
	}
	start, end := t-size+1, t+1
	if e.expired(end) {
		return nil // dropped as late
	}
	ks.sliding = true
	if ks.slide == nil {
		ks.slide = newSlides(e.spec.Aggregates)
	}
	// A record after every time held (mostly) has no window to update:
	// the windows other than a retired one are at times held.
	newest := ks.slide.len() == 0 || t > ks.slide.newest()
	if ks.slide.add(t, ev.Inputs) {
		e.grow(ks, e.sliceBytes())
	}
	// The windows whose range holds t: the times in [t, t + size), whose
	// starts are in [start, end).
	var own *window
	i := len(ks.windows)
	if !newest {
		i = sort.Search(len(ks.windows), func(i int) bool { return ks.windows[i].start >= start })
	}
	for ; i < len(ks.windows) && ks.windows[i].start < end; i++ {
		w := ks.windows[i]
		if w.start == start {
			own = w
		}
		if w.retired || e.expired(w.end) {
			continue
		}
		if err := e.update(ks, w, ev, now); err != nil {
			return err
		}
	}
	if own != nil {
		return nil
	}
	w, err := e.openWindow(ks, start, end, newest)
	if err != nil {
		return err
	}
	e.slideRange(ks, start, t, w.acc)
	w.sincePane = max(1, records(w.acc, e.spec.Aggregates)) // it holds the record that made it
	ks.dirty = true
	e.touched = append(e.touched, w)
	return e.armProc(ks, w, now)
}

// slideRange merges the records of ks from lo through hi into dst.
func (e *Engine) slideRange(ks *keyState, lo, hi int64, dst []accum) {
	ks.slide.rangeInto(lo, hi, dst)
}

// retireOrDelete ends window w of ks at its expiry: a sliding key's newest
// window is retired (see the file comment) when records remain, any other
// window deleted.
func (e *Engine) retireOrDelete(ks *keyState, w *window) error {
	if !ks.sliding || w != ks.windows[len(ks.windows)-1] || ks.slide == nil || ks.slide.len() == 0 {
		return e.deleteWindow(ks, w)
	}
	if ks.slide.retired {
		// The retired window now keeps the records w's time needs: its
		// timer, earlier, is set again when it fires (fireRetired).
		ks.slide.retiredEnd = w.end
		return e.deleteWindow(ks, w)
	}
	if e.keepUntil(w) <= e.f {
		// A frontier step past its records' use too: they go now, as
		// fireRetired would take them (a timer at or below what the
		// timer scan has passed would never fire).
		return e.deleteWindow(ks, w)
	}
	if err := e.cancelProc(ks, w); err != nil {
		return err
	}
	w.retired = true
	ks.slide.retired, ks.slide.retiredEnd = true, w.end
	ks.dirty = true
	return e.setEventTimer(ks, w, e.keepUntil(w))
}

// keepUntil is the deadline of retired window w: the expiry of the last
// window that can read the records of w's time.
func (e *Engine) keepUntil(w *window) int64 {
	return addSat(addSat(w.end-1, e.spec.Window.Size), e.spec.AllowedLateness)
}

// fireRetired runs the timer of retired window w (the caller deleted it):
// w goes when its records have become useless, else its timer is set
// again at its deadline, which moved since the timer was set
// (retireOrDelete).
func (e *Engine) fireRetired(ks *keyState, w *window) error {
	ks.syncRetired(w)
	if keep := e.keepUntil(w); keep > e.f {
		return e.setEventTimer(ks, w, keep)
	}
	return e.deleteWindow(ks, w)
}

// dropSlides removes the records of a sliding key that no record still
// to be taken can need: those at or below F − L − size.
func (e *Engine) dropSlides(ks *keyState) {
	if ks.slide == nil {
		return
	}
	limit := e.f - e.spec.AllowedLateness - e.spec.Window.Size // the frontier is far from the int64 limits while windows expire
	if e.f == math.MaxInt64 {
		limit = math.MaxInt64
	}
	if n := ks.slide.dropThrough(limit); n > 0 {
		e.release(ks, n*e.sliceBytes())
	}
}
