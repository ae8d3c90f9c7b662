package windowing

// Count windows (docs/SEMANTICS.md, Count windows): the windows of a key
// are made of its records in the order they are read (partition offset
// order), not of time. Window k holds the key's records k·hop+1 …
// k·hop+size and is named [k·hop, k·hop+size) in records; the key's state
// counts its records (keyState.seq) for as long as the pipeline runs, so
// numbering goes on across restarts and a window's pane id never repeats.
//
// A window is complete when it holds size records: it then emits its
// ON_TIME pane, final, at once, and is deleted. Until then only the early
// triggers emit its panes (EARLY, not final); `early: {every: d}` is the
// longest a partial window waits for a pane. Count windows have no
// event-time timers: the frontier, lateness and the quiet advance do not
// apply to them.

// assignCount adds ev to the count windows of ks that hold its record
// number, opening the newest, and emits and deletes the windows it fills.
func (e *Engine) assignCount(ks *keyState, ev *Event, now int64) error {
	size, hop := e.spec.Window.Size, e.spec.Window.Hop
	ks.counting = true
	ks.seq++
	n := int64(ks.seq) // this record's number among the key's, from 1
	k := int64(0)      // the first window holding n: k·hop+size >= n
	if n > size {
		k = (n - size + hop - 1) / hop
	}
	for ; k*hop < n; k++ {
		start := k * hop
		w := ks.find(start)
		if w == nil {
			var err error
			if w, err = e.openCountWindow(ks, start, start+size); err != nil {
				return err
			}
			w.timer = ev.Time // firstTime
		}
		w.paneSeq = uint64(ev.Time) // lastTime
		if err := e.update(ks, w, ev, now); err != nil {
			return err
		}
		if n < start+size {
			continue
		}
		// Full: its final pane now, and no trigger of this record.
		e.touched = e.touched[:len(e.touched)-1]
		e.countFilled = true
		if err := e.emitPane(ks, w, OnTime, true); err != nil {
			return err
		}
		if err := e.deleteWindow(ks, w); err != nil {
			return err
		}
	}
	return nil
}

// openCountWindow opens the count window [start, end) of ks, after its
// others (a key's newest count window has the largest start). It has no
// event-time timer.
func (e *Engine) openCountWindow(ks *keyState, start, end int64) (*window, error) {
	var w *window
	if n := len(e.freeWindows); n > 0 {
		w = e.freeWindows[n-1]
		e.freeWindows[n-1] = nil
		e.freeWindows = e.freeWindows[:n-1]
	} else {
		w = allocWindow(len(e.spec.Aggregates))
	}
	w.start, w.end = start, end
	w.mode, w.partial = e.spec.Mode, 0
	ks.insert(w, true)
	e.open++
	e.grow(ks, e.windowBytes(ks))
	return w, nil
}
