package windowing

import (
	"math"
	"sort"
)

// Transaction windows (docs/SEMANTICS.md, Transaction windows): a key's
// records in event-time order, cut after each record that closes (or
// discards) a window and wherever two of them are the timeout apart or
// more. The windows are a function of the key's records, whatever order
// they arrive in:
//
//   - a window that a record at c ended is [first, c + 1): it fires when
//     the frontier passes c, so earlier records that arrive late are
//     still in it;
//   - a window that no record ended is [first, last + timeout), a
//     session's bounds: it fires (timed out) when the frontier passes
//     last + timeout.
//
// Windows are disjoint and in start order, and their ends grow with their
// starts, so they expire in order. A record joins the window whose range
// holds it (extending an open one up to its timeout, and taking in the
// next window when that now starts within the timeout, as a session merge
// does); a closing record inside a window whose later records arrived
// before it cuts the window in two: the records after it leave for a
// window of their own. Splitting needs the records by time, so a
// transaction key keeps them merged per event time in a store (txnstore.go),
// as a sliding key does; in discarding mode a pane
// empties its window's times in the store, which then holds exactly what
// each window's next pane would show.

// Ending says whether a record ends its transaction window.
type Ending uint8

// Endings, from Pipeline's close_when and discard_when.
const (
	NotEnding Ending = iota
	// Closes: the record is its window's last.
	Closes
	// Discards: the record is its window's last, and the window emits
	// nothing (its records are counted in Stats.Discarded).
	Discards
)

// lastOf is the event time of transaction window w's last record.
func (e *Engine) lastOf(w *window) int64 {
	if w.ended != NotEnding {
		return w.end - 1
	}
	return w.end - e.spec.Window.Gap
}

// txnSlides is a transaction key's slides and its store in one
// allocation: a record reads the header and then the store.
type txnSlides struct {
	slides
	store txnFlat
}

// txnKey is a key of a transaction pipeline: its state, its store and the
// first times of its store in one allocation (Engine.newKeyState). A
// record reads the key's state, its store's header and its newest times:
// adjacent lines, not three separate misses.
type txnKey struct {
	keyState
	ts     txnSlides
	inline [txnInline]accum
}

// txnInline is the accumulators a txnKey holds in place: a few times of a
// pipeline with a few aggregates (the store moves to the heap past them).
const txnInline = 12

// newTxnKey returns an empty state of (shard, key) with its store.
func newTxnKey(shard uint32, key string, specs []AggSpec) *keyState {
	tk := &txnKey{keyState: keyState{shard: shard, key: key}}
	tk.ts.store = txnFlat{specs: specs, slab: tk.inline[:0]}
	tk.ts.slideStore = &tk.ts.store
	tk.slide = &tk.ts.slides
	return &tk.keyState
}

// txnStore is transaction key ks's records by time.
func txnStore(ks *keyState) *txnFlat { return ks.slide.slideStore.(*txnFlat) }

// newTxnSlides returns an empty store of a transaction key.
func newTxnSlides(specs []AggSpec) *slides {
	ts := &txnSlides{store: txnFlat{specs: specs}}
	ts.slideStore = &ts.store
	return &ts.slides
}

// assignTransaction is step (1) for transaction windows.
func (e *Engine) assignTransaction(ks *keyState, ev *Event, now int64) error {
	t, gap := ev.Time, e.spec.Window.Gap
	if !e.Representable(t) {
		e.outOfRange = true
		return nil
	}
	// p: the key's last window that starts at or before t (mostly its
	// newest).
	p := len(ks.windows) - 1
	if p >= 0 && ks.windows[p].start > t {
		p = sort.Search(p, func(i int) bool { return ks.windows[i].start > t }) - 1
	}
	if p < 0 || !e.holds(ks.windows[p], t) {
		return e.openTransaction(ks, p+1, ev, now)
	}
	w := ks.windows[p]
	last := e.lastOf(w)
	if ev.Ends == NotEnding {
		if t > last {
			// w is open and t within its timeout: w now reaches to
			// t + timeout, and takes in the next window if that starts
			// before.
			end, ended := t+gap, NotEnding
			if p+1 < len(ks.windows) && ks.windows[p+1].start < end {
				next := ks.windows[p+1]
				end, ended = next.end, next.ended
				// The merged window keeps the earliest pending
				// processing-time deadline of its phase, as a session
				// merge does: a merge never restarts a trigger's clock.
				late := w.lateProc()
				hasProc, proc := w.procOf(late)
				if ok, d := next.procOf(late); ok && (!hasProc || d < proc) {
					hasProc, proc = true, d
				}
				if err := e.absorb(ks, w, next); err != nil {
					return err
				}
				if hasProc && (!w.hasProc || w.proc != proc) {
					if err := e.cancelProc(ks, w); err != nil {
						return err
					}
					if err := e.setProc(ks, w, proc); err != nil {
						return err
					}
				}
			}
			if err := e.rebound(ks, w, w.start, end); err != nil {
				return err
			}
			if err := e.setEnded(ks, w, ended); err != nil {
				return err
			}
		}
		e.keep(ks, ev)
		e.fold(ks, w)
		return e.update(ks, w, ev, now)
	}
	// A record that ends w at t. Its window then ends at t + 1: when that
	// has expired, the record is late like any other and goes.
	if e.expired(t + 1) {
		return nil
	}
	e.keep(ks, ev)
	if t < last {
		return e.split(ks, w, ev, now)
	}
	ended := ev.Ends
	if t == last && w.ended == Discards {
		ended = Discards // a discard at the same time wins
	}
	if w.end != t+1 {
		if err := e.rebound(ks, w, w.start, t+1); err != nil {
			return err
		}
	}
	if err := e.setEnded(ks, w, ended); err != nil {
		return err
	}
	e.fold(ks, w)
	return e.update(ks, w, ev, now)
}

// leftTimer returns the window of event timer t, or nil when t is one that
// rebound left behind when its window's deadline moved earlier (or whose
// window has gone since): not the window's timer (window.timer), it is
// deleted and fires nothing. A restore brings back only the windows' own
// timers.
func (e *Engine) leftTimer(t Timer, ks *keyState) (*keyState, *window, error) {
	if ks == nil {
		var err error
		if ks, err = e.keyState(t.Shard, t.Key); err != nil {
			return nil, nil, err
		}
	}
	if w := ks.find(t.Start); w != nil && w.timer == t.Deadline {
		return ks, w, nil
	}
	return ks, nil, e.store.DeleteTimer(t)
}

// holds reports whether record time t belongs to transaction window w,
// which starts at or before t: t is at or before w's last record, or w is
// open and t within its timeout.
func (e *Engine) holds(w *window, t int64) bool {
	return t <= e.lastOf(w) || w.ended == NotEnding && t < w.end
}

// openTransaction takes ev, which no window of ks holds, into a window of
// its own at index i, or into the window at i when that starts within the
// timeout after it. A record whose own window has expired is late.
func (e *Engine) openTransaction(ks *keyState, i int, ev *Event, now int64) error {
	t := ev.Time
	end := t + e.spec.Window.Gap
	if ev.Ends != NotEnding {
		end = t + 1
	} else if i < len(ks.windows) && ks.windows[i].start < end {
		next := ks.windows[i]
		e.keep(ks, ev)
		if err := e.rebound(ks, next, t, next.end); err != nil {
			return err
		}
		return e.update(ks, next, ev, now)
	}
	if e.expired(end) {
		return nil // dropped as late
	}
	e.keep(ks, ev)
	w, err := e.newWindow(ks, t, end)
	if err != nil {
		return err
	}
	w.ended = ev.Ends
	return e.update(ks, w, ev, now)
}

// split cuts window w of ks at ev, a record that ends it before its last
// record: w becomes [w.start, t + 1), ended by ev, and the records after t
// a window of their own, with w's former end.
func (e *Engine) split(ks *keyState, w *window, ev *Event, now int64) error {
	store := txnStore(ks)
	t, last := ev.Time, e.lastOf(w)
	end, ended := w.end, w.ended
	first := store.after(t) // t < last: a record of w is after t
	clear(w.acc)
	store.rangeInto(w.start, t, w.acc)
	if err := e.rebound(ks, w, w.start, t+1); err != nil {
		return err
	}
	if err := e.setEnded(ks, w, ev.Ends); err != nil {
		return err
	}
	rest, err := e.newWindow(ks, first, end)
	if err != nil {
		return err
	}
	rest.ended = ended
	// The records after t were in w's panes: rest numbers its panes on
	// from w's, so that bounds an earlier window of the key had (rest may
	// take them again) never get a pane id twice.
	rest.nextIndex = w.nextIndex
	store.rangeInto(first, last, rest.acc)
	for _, x := range []*window{w, rest} {
		x.sincePane++
		if closed(e.f, x.end) {
			x.lateSeen = true
		}
		e.touched = append(e.touched, x)
		if err := e.armProc(ks, x, now); err != nil {
			return err
		}
	}
	ks.dirty = true
	return nil
}

// keep adds ev to its key's records by time.
func (e *Engine) keep(ks *keyState, ev *Event) {
	if txnStore(ks).add(ev.Time, ev.Inputs) {
		e.grow(ks, e.sliceBytes())
	}
}

// fold merges the times of window w of ks at or below F − L into its
// first: a closing record that could cut them off would be late (its own
// window [c, c + 1) expired), so only their total is ever read again, by a
// split's left part. The store then holds a window's first time and its
// last few, whatever its length.
func (e *Engine) fold(ks *keyState, w *window) {
	if e.f < math.MinInt64+e.spec.AllowedLateness {
		return // no frontier yet
	}
	hi := min(e.f-e.spec.AllowedLateness, e.lastOf(w))
	if n := txnStore(ks).fold(w.start, hi); n > 0 {
		e.release(ks, n*e.sliceBytes())
	}
}

// setEnded records how w ends. A window that a record discards emits
// nothing more: its pending timer goes, and in retracting mode its last
// pane is retracted.
func (e *Engine) setEnded(ks *keyState, w *window, ended Ending) error {
	was := w.ended
	w.ended = ended
	ks.dirty = true
	if ended != Discards || was == Discards {
		return nil
	}
	if w.mode == Retracting && w.last != nil {
		if err := e.emitRetraction(ks, w.last); err != nil {
			return err
		}
		w.last = nil
	}
	return e.cancelProc(ks, w)
}

// rebound gives w the bounds [start, end): its event timer moves to them
// and its phase follows the frontier; a processing-time timer of the new
// phase stays, one of the other phase goes (as in a session merge). A
// window that only grows later in its phase keeps its event timer where it
// is, and the timer, when it fires, is set again at the window's end
// (fireWindow): a key with a record every few seconds moves no timer per
// record.
func (e *Engine) rebound(ks *keyState, w *window, start, end int64) error {
	late := closed(e.f, end)
	deadline := eventDeadline(late, end, e.spec.AllowedLateness)
	if start == w.start && late == w.onTimeDone && deadline >= w.timer {
		w.end = end
		ks.dirty = true
		return nil
	}
	hasProc, proc := w.procOf(late)
	drop := e.dropTimers
	if start == w.start && deadline < w.timer {
		// The event timer is left where it is, later (leftTimer):
		// taking a timer out of the middle of the set costs a search,
		// and a closing record moves one for every window.
		drop = e.cancelProc
	}
	if err := drop(ks, w); err != nil {
		return err
	}
	w.start, w.end, w.onTimeDone = start, end, late
	ks.dirty = true
	if err := e.setEventTimer(ks, w, deadline); err != nil {
		return err
	}
	if hasProc {
		return e.setProc(ks, w, proc)
	}
	return nil
}

// dropTransaction forgets the records of transaction window w of ks,
// which is deleted, and counts them when it was discarded: the windows
// before it are gone already, as windows expire in order.
func (e *Engine) dropTransaction(ks *keyState, w *window) {
	if w.ended == Discards && len(w.acc) > 0 {
		e.stats.Discarded += records(w.acc, e.spec.Aggregates)
	}
	if n := txnStore(ks).dropThrough(e.lastOf(w)); n > 0 {
		e.release(ks, n*e.sliceBytes())
	}
}

// shown empties the times of transaction window w in its key's store
// after a discarding pane showed their records: the times stay, for the
// window's bounds when a record splits it.
func (e *Engine) shown(ks *keyState, w *window) {
	txnStore(ks).clearRange(w.start, e.lastOf(w))
}
