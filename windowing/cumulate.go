package windowing

import (
	"math"
	"sort"
)

// This file holds cumulating windows (docs/SEMANTICS.md, Windows,
// "Cumulating windows"): every period (a fixed-size window aligned like a
// tumbling one, or a calendar unit) has the windows [S, S+step),
// [S, S+2·step), …, [S, E): one start, ends a step apart, the last at the
// period's end E. A record at t is in every window of its period that ends
// after t.
//
// In a calendar period the ends are where the local clock first reads
// midnight + k·step (whole hours of a day; whole days of a week, month or
// year), as calendar boundaries are (calendar.go, firstInstant): a skipped
// hour of a DST start has no end of its own (its end is the next one's),
// the repeated hour of a DST end lies in the window that ends when the
// clock first reads the hour after it, and a step that does not divide the
// period (days of a month) makes the last window end at the period's end.
//
// Sliced (slices.go) the slices are the steps: a record updates one slice
// and a window's pane merges the slices from S to its end.

// cumulate assigns cumulating windows. Not safe for concurrent use.
type cumulate struct {
	size, step, offset int64     // fixed periods (ms); offset in [0, size)
	period             *calendar // calendar periods: one unit each; nil for fixed
	cache              [4]cumPeriod
	next               int // the cache slot to fill next
}

// cumPeriod is one calendar period and its window ends (ascending, the
// last the period's end).
type cumPeriod struct {
	lo, hi int64 // hi == lo: empty slot
	ends   []int64
}

func newCumulate(w WindowSpec) *cumulate {
	if w.Calendar != nil {
		spec := *w.Calendar
		spec.Size, spec.Hop = 1, 1
		return &cumulate{step: w.Step, period: newCalendar(spec)}
	}
	return &cumulate{size: w.Size, step: w.Step, offset: floorMod(w.Offset, w.Size)}
}

// fixedStart returns the start of t's fixed period, or false when it is
// below the int64 range.
func (c *cumulate) fixedStart(t int64) (int64, bool) {
	r := floorMod(floorMod(t, c.size)-c.offset, c.size)
	if t < math.MinInt64+r {
		return 0, false
	}
	return t - r, true
}

// windows appends the windows containing t in ascending end order (they
// share one start).
func (c *cumulate) windows(dst []Span, t int64) []Span {
	if c.period == nil {
		lo, ok := c.fixedStart(t)
		if !ok {
			return dst
		}
		for k := (t-lo)/c.step + 1; k <= c.size/c.step; k++ {
			if lo > math.MaxInt64-k*c.step {
				break
			}
			dst = append(dst, Span{lo, lo + k*c.step})
		}
		return dst
	}
	p := c.periodOf(t)
	if p == nil {
		return dst
	}
	for _, e := range p.ends[sort.Search(len(p.ends), func(i int) bool { return p.ends[i] > t }):] {
		dst = append(dst, Span{p.lo, e})
	}
	return dst
}

// sliceStart returns the start of the step holding t (t has windows).
func (c *cumulate) sliceStart(t int64) int64 {
	if c.period == nil {
		lo, _ := c.fixedStart(t)
		return lo + (t-lo)/c.step*c.step
	}
	p := c.periodOf(t)
	i := sort.Search(len(p.ends), func(i int) bool { return p.ends[i] > t })
	if i == 0 {
		return p.lo
	}
	return p.ends[i-1]
}

// periodOf returns the calendar period holding t with its ends, or nil
// when t is outside the calendar's range.
func (c *cumulate) periodOf(t int64) *cumPeriod {
	for i := range c.cache {
		if p := &c.cache[i]; p.lo <= t && t < p.hi {
			return p
		}
	}
	u := c.period.unit(t)
	if u == nil || len(u.spans) == 0 {
		return nil
	}
	p := &c.cache[c.next]
	c.next = (c.next + 1) % len(c.cache)
	lo, hi := u.spans[0].Start, u.spans[0].End
	*p = cumPeriod{lo: lo, hi: hi, ends: p.ends[:0]}
	// The local day the period starts on: its first instant reads that
	// day's midnight, or a later time of it when the zone skips midnight.
	day := floorDiv(lo+offsetAt(lo, c.period.spec.Zone), msPerDay)
	for k := int64(1); ; k++ {
		e := c.period.firstInstant(day*msPerDay + k*c.step)
		if e >= hi {
			break
		}
		if n := len(p.ends); e > lo && (n == 0 || e > p.ends[n-1]) {
			p.ends = append(p.ends, e)
		}
	}
	p.ends = append(p.ends, hi)
	return p
}
