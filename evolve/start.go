package evolve

import (
	"fmt"

	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// Start plans a start of the pipeline defined as cur on a store: stored
// is the definition stored with its state (nil: none), hasState whether it
// holds state at all, logged the partition count of the pipeline's
// changelog, before it grew with the input, when the changelog holds state
// of an earlier run (0 when it holds none; a store without state restores
// it, with the changelog's own definition: Adopt). It returns the plan
// (nil when nothing was stored), the definition to store once the engine
// runs, and the engine's Evolution. A refused plan is returned with its
// error; where names the state in the message.
func Start(stored []byte, hasState bool, logged int32, cur *Definition, where string) (*Plan, *Definition, *windowing.Evolution, error) {
	next := *cur
	var plan *Plan
	var prior *Definition
	switch {
	case stored != nil:
		old, err := Decode(stored)
		if err != nil {
			return nil, nil, nil, err
		}
		plan = Compare(old, cur)
		if plan.Refused() {
			return plan, nil, nil, plan.Error(where)
		}
		next, prior = *plan.Next, old
	case hasState:
		// State written before windowd stored definitions: taken to be
		// the configuration's (docs/OPERATIONS.md: upgrade first, change
		// after), its untagged key state in this layout.
		next.Layouts = map[uint32][]Aggregate{0: cur.Layout()}
		next.History = []uint32{0}
		next.Drain = nil
	case logged == 0:
		next.Drain = nil // fresh state: no window to finish
	case logged < cur.Partitions && !cur.Repartition:
		// No local state, but the changelog's (restored, Adopt) was keyed
		// by fewer input partitions: the input grew while stopped, and
		// the growth rule applies as on a start on the state.
		old := *cur
		old.Partitions = logged
		plan = Compare(&old, cur)
		if plan.Refused() {
			return plan, nil, nil, plan.Error(fmt.Sprintf("%s: none; the changelog of %d partitions", where, logged))
		}
		next = *plan.Next
	}
	// A changelog that holds state keeps the configured drain: the state
	// to restore may be of the drain's window (Adopt compares the
	// changelog's definition).
	ev, err := next.Evolution(prior)
	if err != nil {
		return nil, nil, nil, err
	}
	return plan, &next, ev, nil
}

// Layout is d's aggregate layout as stored in Layouts.
func (d *Definition) Layout() []Aggregate { return withMode(d.Aggregates, d.Accumulation) }

// Evolution returns the engine's options to continue state under d, whose
// previous definition was prior (nil: none, or the same).
func (d *Definition) Evolution(prior *Definition) (*windowing.Evolution, error) {
	ls, err := Layouts(d)
	if err != nil {
		return nil, err
	}
	ev := &windowing.Evolution{Gen: d.LayoutTag(), Layouts: ls, Sealed: watermark.MinTime}
	if d.Sealed != nil {
		ev.Sealed = *d.Sealed
	}
	if prior != nil && prior.Lateness != d.Lateness {
		ev.Rearm, ev.PriorLateness = true, prior.Lateness
	}
	if dr := d.Drain; dr != nil {
		ev.Drain = &windowing.Drain{Cut: dr.Cut, End: dr.End}
		if d.drainWindow != nil && windowText(*d.drainWindow) == dr.From {
			ev.Drain.Window = *d.drainWindow
		}
		if prior != nil && prior.Drain != nil && *prior.Drain != *dr {
			ev.PriorDrainEnd = prior.Drain.End
		}
		ev.DrainBegins = prior != nil && prior.Window != d.Window
	}
	return ev, nil
}

// Seal records the engine's sealed bound (windowing.Engine.Sealed) in d.
func (d *Definition) Seal(end int64) {
	if end != watermark.MinTime && (d.Sealed == nil || end > *d.Sealed) {
		d.Sealed = &end
	}
}

// Adopt continues under d the state a changelog partition holds, stored
// under r: it refuses (with the plan's error) what Start would refuse,
// and otherwise takes in r's layouts and sealed bound, returning the plan
// and the engine's layouts for d.
func (d *Definition) Adopt(r *Definition, where string) (*Plan, map[uint32]*windowing.Layout, error) {
	if r.Partitions > d.Partitions && d.Partitions > 0 && !d.Repartition {
		// Written by an instance that saw the input grow first.
		if err := d.Grow(r.Partitions); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	plan := Compare(r, d)
	if plan.Refused() {
		return plan, nil, plan.Error(where)
	}
	if g := plan.Next.GrewFrom; g > 0 && !d.Repartition && (d.GrewFrom == 0 || g < d.GrewFrom) {
		// r knows an earlier count before the first growth than d, whose
		// start saw the changelog only after a later one.
		d.GrewFrom = g
	}
	if d.Layouts == nil {
		d.Layouts = map[uint32][]Aggregate{}
	}
	for t, l := range r.Layouts {
		d.Layouts[t] = l
	}
	if t := r.LayoutTag(); t != d.LayoutTag() {
		d.Layouts[t] = r.Layout()
		if len(d.History) == 0 {
			// A fresh start restoring a changed pipeline's state: its
			// history is the changelog's.
			d.History = append(append([]uint32(nil), r.History...), t)
		}
	} else if len(d.History) == 0 {
		d.History = append([]uint32(nil), r.History...)
	}
	if r.Sealed != nil {
		d.Seal(*r.Sealed)
	}
	ls, err := Layouts(d)
	return plan, ls, err
}
