package windowing

import "math"

// This file holds hopping windows by slicing. A hopping window of size S and
// hop H overlaps S/H others, and aggregating each record into each of them
// makes the work per record and the state grow with S/H. A sliced key keeps
// its partial aggregates per slice instead: [s, s+G) for G = gcd(S, H),
// aligned like the windows, so that every window is a run of S/G slices. A
// record updates one slice; a window's pane merges its slices when it fires.
// Windows keep only their trigger state (pane index, timers, last pane).
//
// Slicing is used when it gives the same panes as aggregating per window:
// hopping windows, accumulating or retracting mode (discarding would reset
// slices that later windows share), mergeable aggregates (count, sum, avg,
// min, max, and quantiles, whose merge is exact: see quantiles.go; not
// distinct_approx, whose merged sketches may estimate differently from one
// sketch, nor top_k, whose merge drops counters differently from adding
// the records one by one once a window holds more distinct values than
// its capacity), and triggers that need no per-window state
// per record (on_time and closing; no early count or interval, no late
// firing). Otherwise every window aggregates for itself.
//
// What a window knows per record is derived from its slices when it fires:
//   - lateSeen: a slice of the window took a record while the frontier was
//     at or past the window's end (slice.lastF >= end);
//   - changed since its last pane (closing: if_changed): a slice of the
//     window took a record after that pane (slice.seq > window.paneSeq, with
//     seq counting the key's records).
//
// Invariant: every window that contains a slice and has not expired exists
// from the slice's first record on (a new slice creates the missing windows
// containing it), so every record of a window's slices arrived while the
// window existed, and merging the slices gives the window's records exactly.
// A slice goes when no window contains it any more (deleteWindow).

// slice is the partial aggregate of one key over [start, start+G).
type slice struct {
	start int64
	acc   []accum
	lastF int64  // the largest frontier at which a record was added
	seq   uint64 // the key's record sequence number of the last record added
	// partial: aggregates added after the slice was opened (layout.go)
	partial uint64
}

const sliceBaseSize = 80 // slice struct, slice slot

// sliceLen returns the slice length of spec, or 0 when spec is not
// sliced: ms for hopping windows, units for calendar windows (a slice of
// calendar windows is gcd(size, hop) units, aligned like the windows).
func sliceLen(spec *Spec, opts *Options) int64 {
	w := spec.Window
	switch w.Kind {
	case Calendar:
		w.Size, w.Hop = w.Calendar.Size, w.Calendar.Hop
	case Cumulate:
		// The slices are the steps (cumulate.go); a calendar period's
		// steps have no fixed length, and a fixed period of one step
		// is a tumbling window.
		w.Hop = w.Step
		if w.Calendar != nil {
			w.Size = math.MaxInt64
		}
	case Hopping:
	default:
		return 0
	}
	if opts.NoSlicing || w.Hop <= 0 || w.Hop >= w.Size || spec.Mode == Discarding {
		return 0
	}
	t := spec.Trigger
	if t.EarlyCount > 0 || t.EarlyEvery > 0 || t.Late {
		return 0
	}
	for _, a := range spec.Aggregates {
		switch a.Op {
		case Count, Sum, Avg, Min, Max, Quantiles, Ratio:
		default:
			return 0
		}
	}
	if w.Kind == Cumulate {
		return w.Step
	}
	g, h := w.Size, w.Hop
	for h != 0 {
		g, h = h, g%h
	}
	return g
}

// findSlice returns ks's slice starting at start, or nil.
//
// (A slice that exists has every unexpired window containing it, so a
// record of it creates none. The one exception: a partition catching up on
// a frontier below the one its previous owner expired windows at, which
// per-window aggregation would re-create for a record that old owner
// dropped as expired.)
func (ks *keyState) findSlice(start int64) *slice {
	// Records mostly go to the newest slice.
	if n := len(ks.slices); n > 0 && ks.slices[n-1].start == start {
		return ks.slices[n-1]
	}
	lo, hi := 0, len(ks.slices)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if ks.slices[m].start < start {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(ks.slices) && ks.slices[lo].start == start {
		return ks.slices[lo]
	}
	return nil
}

// insertSlice adds sl in start order.
func (ks *keyState) insertSlice(sl *slice) {
	i := len(ks.slices)
	for i > 0 && ks.slices[i-1].start > sl.start {
		i--
	}
	ks.slices = append(ks.slices, nil)
	copy(ks.slices[i+1:], ks.slices[i:])
	ks.slices[i] = sl
}

// assignSliced is assignFixed for a sliced key: the record goes into its
// slice; a new slice first creates the missing windows that contain it.
func (e *Engine) assignSliced(ks *keyState, ev *Event) error {
	e.spans = e.assigner.Windows(e.spans[:0], ev.Time)
	e.outOfRange = len(e.spans) == 0
	if e.outOfRange {
		return nil
	}
	// Windows expire in start order: the newest one is the last to go.
	if e.expired(e.spans[len(e.spans)-1].End) {
		return nil // expired: dropped
	}
	start := e.assigner.sliceStart(ev.Time)
	sl := ks.findSlice(start)
	if sl == nil {
		for _, w := range e.spans {
			if e.expired(w.End) || ks.findSpan(w, e.byEnd) != nil {
				continue
			}
			if _, err := e.newWindow(ks, w.Start, w.End); err != nil {
				return err
			}
		}
		sl = &slice{start: start, acc: make([]accum, len(e.spec.Aggregates)), lastF: math.MinInt64}
		ks.insertSlice(sl)
		e.grow(ks, e.sliceBytes())
	}
	for i := range e.spec.Aggregates {
		sl.acc[i].add(&e.spec.Aggregates[i], &ev.Inputs[i])
	}
	sl.lastF = max(sl.lastF, e.f)
	ks.seq++
	sl.seq = ks.seq
	ks.dirty = true
	e.slicedTook = true // step 2 has nothing to do for a sliced spec
	return nil
}

// deriveSliced sets w's lateSeen and sincePane (0 or 1) from its slices and
// merges its slices' aggregates into e.merged, the accumulators its pane
// shows (see the file comment).
func (e *Engine) deriveSliced(ks *keyState, w *window) error {
	if cap(e.merged) < len(e.spec.Aggregates) {
		e.merged = make([]accum, len(e.spec.Aggregates))
	}
	e.merged = e.merged[:len(e.spec.Aggregates)]
	clear(e.merged)
	w.sincePane = 0
	for _, sl := range slicesOf(ks, w) {
		if closed(sl.lastF, w.end) {
			w.lateSeen = true
		}
		if sl.seq > w.paneSeq {
			w.sincePane = 1
		}
		if err := mergeAccums(e.merged, sl.acc, e.spec.Aggregates); err != nil {
			return err
		}
	}
	return nil
}

// unslice turns a sliced key's windows into windows of their own
// aggregates, each the merge of its slices (what its pane would show),
// and drops the slices: the key was sliced under a definition whose
// trigger, mode or aggregates allowed slicing and the current one does
// not (docs/OPERATIONS.md, Changing a deployed pipeline).
func (e *Engine) unslice(ks *keyState) error {
	for _, w := range ks.windows {
		if err := e.deriveSliced(ks, w); err != nil {
			return err
		}
		w.acc = append([]accum(nil), e.merged...)
		for _, sl := range ks.slices {
			if sl.start >= w.start && sl.start < w.end {
				w.partial |= sl.partial
			}
		}
	}
	ks.sliced, ks.slices, ks.dirty = false, nil, true
	return nil
}

// dropSlices removes the slices no remaining window of ks contains.
func (e *Engine) dropSlices(ks *keyState) {
	keep := int64(math.MaxInt64)
	if len(ks.windows) > 0 {
		keep = ks.windows[0].start
	}
	n := 0
	for n < len(ks.slices) && ks.slices[n].start < keep {
		n++
	}
	if n == 0 {
		return
	}
	e.release(ks, n*e.sliceBytes())
	if n == len(ks.slices) && cap(ks.slices) > keptSlots {
		ks.slices = nil
		return
	}
	copy(ks.slices, ks.slices[n:])
	clear(ks.slices[len(ks.slices)-n:])
	ks.slices = ks.slices[:len(ks.slices)-n]
}
