package windowing

import "github.com/windowd/windowd/watermark"

// rearm moves every open window's expiry from its deadline under the
// prior allowed_lateness to the one under the current (docs/OPERATIONS.md,
// Changing a deployed pipeline): a window past its new deadline expires at
// the next frontier step, one given more time stays open for it. Windows
// before their on-time step keep their timer at their end.
//
// Windows that had expired under the prior lateness at the frontier the
// state was left at stay closed, also once the lateness grows.
func (e *Engine) rearm(prior int64) error { return e.Rearm(prior, e.f) }

// Rearm is rearm for state restored from a changelog written under the
// prior allowed_lateness, at a writer's frontier f: windows ending at or
// before f − prior had expired there and are sealed; the restored open
// windows take the current lateness (windows already under it keep their
// timers: only a timer at end + prior moves).
func (e *Engine) Rearm(prior, f int64) error {
	if prior == e.spec.AllowedLateness {
		return nil
	}
	if f != watermark.MinTime && f != watermark.MaxTime {
		e.sealed = max(e.sealed, f-prior)
	}
	var all []Timer
	var cursor *Timer
	for {
		batch, err := e.store.DueTimers(EventTimer, watermark.MinTime, watermark.MaxTime, cursor, 4096, nil)
		if err != nil {
			return err
		}
		if len(batch) == 0 {
			break
		}
		all = append(all, batch...)
		cursor = &all[len(all)-1]
		if len(batch) < 4096 {
			break
		}
	}
	now := e.spec.AllowedLateness
	for _, t := range all {
		ks, err := e.keyState(t.Shard, t.Key)
		if err != nil {
			return err
		}
		w := ks.findNamed(t.Start, e.byEnd)
		if w == nil || w.timer != t.Deadline {
			continue
		}
		var to int64
		switch {
		case w.retired:
			ks.syncRetired(w)
			// A retired window's timer may be earlier than its deadline
			// and set again when it fires (fireRetired): only a later
			// one moves.
			if to = e.keepUntil(w); w.timer <= to {
				continue
			}
		case w.onTimeDone:
			if w.timer != addSat(w.end, prior) {
				continue
			}
			to = addSat(w.end, now)
		default:
			continue
		}
		if err := e.store.DeleteTimer(t); err != nil {
			return err
		}
		if err := e.setEventTimer(ks, w, to); err != nil {
			return err
		}
		// A running engine's timer scan may have passed to already (a
		// restored window that the smaller lateness closes): the next
		// scan starts there.
		e.rewind(&e.doneEvent, &e.nextEvent, to)
		ks.dirty = true
	}
	return nil
}

// Sealed is the end at or before which every window has expired for good
// (Evolution.Sealed), to be stored with the pipeline's definition.
func (e *Engine) Sealed() int64 { return e.sealed }
