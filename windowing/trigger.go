package windowing

// This file holds the engine's trigger decisions as pure functions of plain
// values: the frontier, a window's bounds and trigger state, the pipeline's
// TriggerSpec and Mode. They decide; the engine acts (emits panes, arms and
// deletes timers, deletes state). Each is small enough for the compiler to
// inline, takes no interface and allocates nothing: they run per record and
// per pane. trigger_test.go tables every branch.
//
// Notation as in docs/SEMANTICS.md: f is the frontier F, end is w.end,
// lateness is allowed_lateness L.

// closed reports whether a window ending at end is closed at frontier f:
// F >= w.end (docs/SEMANTICS.md, Lateness). A record that updates a closed
// window is late, a window first created closed is born late, and the
// on-time step of a window is due at F >= w.end (Firing).
func closed(f, end int64) bool { return f >= end }

// expired reports whether a window ending at end has expired at frontier f:
// F >= w.end + L, saturated at the int64 limit (docs/SEMANTICS.md,
// Lateness). A record is not added to an expired window.
func expired(f, end, lateness int64) bool { return f >= addSat(end, lateness) }

// eventDeadline is the deadline of a window's event-time timer: its end
// until its on-time step has run (or it was born late, with the step done),
// then its expiry, end + L (docs/SEMANTICS.md, Firing).
func eventDeadline(onTimeDone bool, end, lateness int64) int64 {
	if onTimeDone {
		return addSat(end, lateness)
	}
	return end
}

// dropReason decides whether a record is dropped, and why, once step (1)
// has offered it to its windows: took says that a window (or, for a sliced
// key, a slice) took it; outOfRange that it has no representable window.
// A record is dropped only when no window took it (docs/SEMANTICS.md,
// Lateness, "Dropped records"): as late data (DropExpired) when its windows
// had all expired, as bad input (DropOutOfRange) when it has none.
func dropReason(took, outOfRange bool) (reason DropReason, drop bool) {
	if took {
		return 0, false
	}
	if outOfRange {
		return DropOutOfRange, true
	}
	return DropExpired, true
}

// recordFiring decides step (2) of a record for one window it updated
// (docs/SEMANTICS.md, Step order and Triggers): while the window is open
// (F < w.end) an EARLY pane once sincePane, the records since its last pane,
// reaches early count N; once it is closed (late, not expired: it took the
// record) a LATE pane right away when `late: {every: 0s}`.
func recordFiring(trig *TriggerSpec, f, end, sincePane int64) (fire bool, timing Timing) {
	if !closed(f, end) {
		return trig.EarlyCount > 0 && sincePane >= trig.EarlyCount, Early
	}
	return trig.Late && trig.LateEvery == 0, Late
}

// procDelay is the delay of the processing-time timer that a record arms on
// a window with none pending, or 0 (or less) for none: the early `every`
// before the window's on-time step, the late `every` (d > 0) after it
// (docs/SEMANTICS.md, Triggers). late is window.lateProc: the phase of the
// timer is the window's, so an early timer never fires a LATE pane.
func procDelay(trig *TriggerSpec, late bool) int64 {
	if !late {
		return trig.EarlyEvery
	}
	if trig.Late {
		return trig.LateEvery
	}
	return 0
}

// procFiring decides what a due processing-time timer fires: a pane of its
// own phase (late: a late timer), only while the window is in that phase
// (an early one while F < w.end, a late one once F >= w.end) and only when
// the window changed since its last pane (sincePane > 0). Otherwise it
// fires nothing (docs/SEMANTICS.md, Triggers, "Timers across a session
// merge").
func procFiring(late bool, f, end, sincePane int64) (fire bool, timing Timing) {
	if sincePane == 0 || late != closed(f, end) {
		return false, Early
	}
	if late {
		return true, Late
	}
	return true, Early
}

// onTimeFiring decides the on-time step of a window whose event-time timer
// is due (F >= w.end) and whose on-time step has not run
// (docs/SEMANTICS.md, Firing). expire: the window also expires in this step
// (F >= w.end + L, always when L = 0); its one pane is then ON_TIME and
// final, emitted unless on_time is false and closing never, and its state
// is deleted. Otherwise pane says whether it emits its ON_TIME pane (final
// false), and it enters its late phase.
func onTimeFiring(trig *TriggerSpec, f, end, lateness int64) (pane, expire bool) {
	if expired(f, end, lateness) {
		return trig.OnTime || trig.Closing != ClosingNever, true
	}
	return trig.OnTime, false
}

// closingFiring decides the expiry of a window after its on-time step
// (docs/SEMANTICS.md, Firing): whether it emits a closing pane, final
// (closing always; if_changed when it changed since its last pane:
// sincePane > 0; never), and that pane's timing: LATE, or ON_TIME when the
// window got no late record (lateSeen) and emitted no ON_TIME or LATE pane
// (settled). Its state is deleted either way.
func closingFiring(c ClosingPolicy, sincePane int64, lateSeen, settled bool) (pane bool, timing Timing) {
	pane = c == ClosingAlways || (c == ClosingIfChanged && sincePane > 0)
	if lateSeen || settled {
		return pane, Late
	}
	return pane, OnTime
}

// settles reports whether a pane of timing settles its window: an ON_TIME
// or LATE pane makes a later closing pane LATE (closingFiring); an EARLY
// one does not.
func settles(timing Timing) bool { return timing != Early }

// accumulation decides what mode m does around one pane of a window
// (docs/SEMANTICS.md, Panes): retract, a retraction of the window's
// previous pane (when there is one) goes out right before it; remember, the
// window keeps this pane to retract before its next one (a final pane has
// no next one); discard, the window's aggregates restart empty after it.
// Accumulating does none of these.
func accumulation(m Mode, final bool) (retract, remember, discard bool) {
	return m == Retracting, m == Retracting && !final, m == Discarding
}

// bridgeMode returns the mode a window of mode m continues in after its
// next pane when the pipeline's mode is now cur (docs/OPERATIONS.md,
// Changing a deployed pipeline). That pane goes out in m and bridges: an
// accumulating or retracting window holds everything it has seen, so after
// the pane it can restart empty (discarding: later panes hold only the
// records after it), keep it as the pane the next one retracts
// (retracting) or go on accumulating. A discarding window that has
// emitted a pane holds only the records since, not the earlier panes' sum
// an accumulating or retracting pane must show: it stays discarding until
// it closes.
func bridgeMode(m, cur Mode) Mode {
	if m == Discarding {
		return m
	}
	return cur
}
