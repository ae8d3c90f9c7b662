package windowing

import (
	"errors"
	"fmt"
	"time"

	"github.com/windowd/windowd/watermark"
)

// Drain finishes the windows of a pipeline's previous window definition
// after a change of window (docs/OPERATIONS.md, Changing a deployed
// pipeline): a record before Cut goes to the windows of Window, the
// previous definition, a record from Cut on to the spec's. Windows of
// both kinds share a key's state: two windows with the same bounds are
// one window, whose records are complete (those before the cut from one
// definition, the rest from the other). A window that only one definition
// has and that spans the cut holds only its side's records: its panes
// name every aggregate partial. Once the frontier passes End (the last
// end of a previous window holding a time before the cut) plus
// allowed_lateness, every previous window has closed and the drain is
// over.
type Drain struct {
	// Window is the previous definition; it is needed while the drain
	// runs (zero Kind: not given, which a running drain refuses).
	Window WindowSpec
	Cut    int64
	End    int64
}

// DrainEnd returns the last end of a window of w holding a time before
// cut (Drain.End).
func DrainEnd(w WindowSpec, cut int64) int64 {
	a := NewAssigner(w)
	end := cut
	for _, sp := range a.Windows(nil, cut-1) {
		end = max(end, sp.End)
	}
	return end
}

// ErrDrain: the engine cannot continue the drain it was given.
var ErrDrain = errors.New("windowing: drain")

// drain is a running Drain.
type drain struct {
	prev             Assigner
	cut, end         int64
	zone, prevZone   *time.Location // of calendar windows: the spec's, the previous definition's
	prevBuf, nextBuf []Span         // scratch of has
}

// has reports whether a has window [start, end).
func (d *drain) has(a *Assigner, buf *[]Span, start, end int64) bool {
	*buf = a.Windows((*buf)[:0], start)
	for _, sp := range *buf {
		if sp.Start == start && sp.End == end {
			return true
		}
	}
	return false
}

// startDrain runs ev's drain unless the frontier already passed it.
func (e *Engine) startDrain(ev *Evolution) error {
	if ev.PriorDrainEnd != 0 && !e.drainDone(ev, ev.PriorDrainEnd) {
		return fmt.Errorf("%w: the previous drain has not finished (its windows close when the frontier passes %s, allowed_lateness included; it is at %s): change the window again after that",
			ErrDrain, FormatTime(addSat(ev.PriorDrainEnd, e.spec.AllowedLateness)), FormatTime(e.f))
	}
	d := ev.Drain
	if d == nil {
		return nil
	}
	if ev.DrainBegins {
		if seen := e.latestSeen(); seen >= d.Cut {
			// Records from the cut on belong to the new windows; those
			// read already are in windows of the previous definition,
			// where the new windows' records would join them.
			return fmt.Errorf("%w: drain.until %s is not after every record already read (this state has read records up to %s): give a cut after them",
				ErrDrain, FormatTime(d.Cut), FormatTime(seen))
		}
	}
	if e.drainDone(ev, d.End) {
		return nil
	}
	if !Drainable(e.spec.Window.Kind) || d.Window.Kind != 0 && !Drainable(d.Window.Kind) {
		return fmt.Errorf("%w: a drain is between tumbling, hopping or calendar windows, not %v and %v", ErrDrain, d.Window.Kind, e.spec.Window.Kind)
	}
	if d.Window.Kind == 0 {
		return fmt.Errorf("%w: a drain runs until the frontier passes %s (allowed_lateness included; it is at %s): keep drain (the previous window and the same until) in the configuration until then",
			ErrDrain, FormatTime(addSat(d.End, e.spec.AllowedLateness)), FormatTime(e.f))
	}
	if ok, _ := CheckDrain(d.Window, e.spec.Window, d.Cut); !ok {
		return fmt.Errorf("%w: a window of the new definition spanning the cut %s starts where a previous window starts but ends elsewhere", ErrDrain, FormatTime(d.Cut))
	}
	e.drain = &drain{prev: NewAssigner(d.Window), cut: d.Cut, end: d.End, zone: e.pane.Zone}
	if c := d.Window.Calendar; c != nil {
		e.drain.prevZone = c.Zone
	}
	// Slices serve one definition's hopping windows.
	e.sliceLen = 0
	e.assigner.setSlice(0)
	return nil
}

// latestSeen is the largest event time the state's partitions have read
// (their generators'), MinTime when none.
func (e *Engine) latestSeen() int64 {
	seen := watermark.MinTime
	for _, st := range e.wm.Status() {
		if g, ok := e.wm.Generator(st.Partition); ok && g.Seen > 0 {
			seen = max(seen, g.MaxTS)
		}
	}
	return seen
}

// drainDone reports whether a drain whose old windows end by end has
// finished: they expired at the frontier, under the allowed_lateness of
// this start or under one it ran with before (a larger lateness later
// does not bring back a drain that finished: its windows are sealed,
// Evolution.Sealed, or are sealed by this start's rearm).
func (e *Engine) drainDone(ev *Evolution, end int64) bool {
	return expiredOrSealed(e.f, end, e.spec.AllowedLateness, e.sealed) ||
		ev.Rearm && expired(e.f, end, ev.PriorLateness)
}

// drainAssigner returns the assigner of a record at t.
func (e *Engine) drainAssigner(t int64) *Assigner {
	if d := e.drain; d != nil && t < d.cut {
		return &d.prev
	}
	return &e.assigner
}

// drainPartial reports whether window [start, end) spans the cut and only
// one of the definitions has it.
func (e *Engine) drainPartial(start, end int64) bool {
	d := e.drain
	if d == nil || start >= d.cut || end <= d.cut {
		return false
	}
	return !d.has(&d.prev, &d.prevBuf, start, end) || !d.has(&e.assigner, &d.nextBuf, start, end)
}

// paneZone sets the time zone of p, a pane of window [start, end), while
// a drain runs: the previous definition's for a window only it has.
func (e *Engine) paneZone(p *Pane, start, end int64) {
	d := e.drain
	p.Zone = d.zone
	if d.zone != d.prevZone && start < d.cut && !d.has(&e.assigner, &d.nextBuf, start, end) {
		p.Zone = d.prevZone
	}
}

// endDrain ends the drain once the frontier has passed its windows.
func (e *Engine) endDrain() {
	if d := e.drain; d != nil && expired(e.f, d.end, e.spec.AllowedLateness) {
		e.drain = nil
		e.drained = true
		e.pane.Zone, e.retract.Zone = d.zone, d.zone
	}
}

// allPartial is the partial mask naming all of n aggregates (at most
// maxPartialAggs).
func allPartial(n int) uint64 {
	if n >= maxPartialAggs {
		return ^uint64(0)
	}
	return 1<<uint(n) - 1
}

// Drained reports whether a drain given to this engine has finished.
func (e *Engine) Drained() bool { return e.drained }

// Draining reports whether a drain is running.
func (e *Engine) Draining() bool { return e.drain != nil }

// FormatTime writes the instant ms (Unix milliseconds) as RFC 3339 in UTC,
// as messages about drains give their times.
func FormatTime(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }

// Drainable reports whether windows of kind k can take part in a drain:
// a record's windows follow from its time alone (tumbling, hopping,
// calendar).
func Drainable(k WindowKind) bool { return k == Tumbling || k == Hopping || k == Calendar }

// CheckDrain reports whether cut can separate the windows of prev from
// those of next: no window of next that spans the cut (so holds records
// from it on) starts where a window of prev starts but ends elsewhere (a
// key's windows are told apart by their start). When it cannot, it also
// returns the first later window boundary of next that can (0: none
// among the next 10,000).
func CheckDrain(prev, next WindowSpec, cut int64) (bool, int64) {
	pa, na := NewAssigner(prev), NewAssigner(next)
	var ps, ns []Span
	clash := func(c int64) bool {
		ns = na.Windows(ns[:0], c)
		for _, sp := range ns {
			if sp.Start >= c {
				continue
			}
			ps = pa.Windows(ps[:0], sp.Start)
			for _, o := range ps {
				if o.Start == sp.Start && o.End != sp.End {
					return true
				}
			}
		}
		return false
	}
	if !clash(cut) {
		return true, 0
	}
	c := cut
	for range 10_000 {
		ns = na.Windows(ns[:0], c)
		next := int64(0)
		for _, sp := range ns {
			if sp.End > c && (next == 0 || sp.End < next) {
				next = sp.End
			}
		}
		if next == 0 {
			break
		}
		if c = next; !clash(c) {
			return false, c
		}
	}
	return false, 0
}
