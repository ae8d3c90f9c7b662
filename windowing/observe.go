package windowing

import (
	"errors"
	"math"
)

// Observe runs steps (3) to (5) of a record that another engine owns: a
// driver that spreads a pipeline's keys over several engines (replay's
// workers, docs/SEMANTICS.md, Replay) gives every engine every record of
// the input in the same order, Record for the records of its keys and
// Observe for the others'. Each engine's generators then see the same
// observations in the same order as one engine's would, so every engine
// has the same frontier at every record, and a key's windows, panes, pane
// ids and drops are those of one engine. Not for an engine draining an
// earlier definition (its assigner depends on the window state).
func (e *Engine) Observe(p int32, t, now int64) error {
	if e.drain != nil {
		return errors.New("windowing: Observe while draining an earlier definition")
	}
	// A record with no representable window moves no watermark (Record).
	if e.Representable(t) {
		e.wm.Observe(p, t, now)
	}
	if err := e.advance(); err != nil {
		return err
	}
	if len(e.catching) > 0 {
		if _, ok := e.catching[e.shard(p)]; ok {
			if err := e.fireCatching(e.shard(p)); err != nil {
				return err
			}
		}
	}
	return e.maybeEvict()
}

// Representable reports whether a record at event time t has a window the
// engine can represent: exactly when Record would not drop it as
// DropOutOfRange (a pure function of t and the window definition).
func (e *Engine) Representable(t int64) bool {
	w := &e.spec.Window
	switch w.Kind {
	case CountWindow:
		return true
	case Session, Transaction:
		return t <= math.MaxInt64-w.Gap // else [t, t+gap) ends past the int64 range
	case Sliding:
		return t != math.MaxInt64 && t >= math.MinInt64+w.Size // else (t − size, t] is not representable
	}
	e.spans = e.drainAssigner(t).Windows(e.spans[:0], t)
	return len(e.spans) > 0
}
