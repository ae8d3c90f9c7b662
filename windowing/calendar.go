package windowing

import (
	"fmt"
	"math"
	"time"
)

// This file holds calendar windows (docs/SEMANTICS.md, Windows, "Calendar
// windows"): windows whose bounds are local calendar boundaries in a time
// zone. A unit (hour, day, week, month, year) is the interval between two
// consecutive local boundaries; its bounds are instants (UTC ms) like every
// other window's, so a day is 23, 24 or 25 hours long across a DST change.
// Units are numbered from the unit that holds 1970-01-01T00:00 local (unit
// 0); a window of Size units with Hop units between starts begins at every
// unit whose number is a multiple of Hop.
//
// Boundaries:
//   - day, week, month, year: the first instant of the local date that
//     starts the unit (local midnight; when the zone skips midnight, the
//     first instant of that day, as Java's atStartOfDay; when it repeats
//     midnight, the earlier one). Weeks start on WeekStart.
//   - hour: every instant at which the local clock reads a whole hour, and
//     every instant at which the zone's offset changes. So the repeated
//     hour of a DST end is two units, and a zone that shifts by 30 minutes
//     has 30-minute units at its changes.
//
// The calendar is defined for event times from year 1 through 9999; a
// record outside has no window (DropOutOfRange).

// CalendarUnit is the unit of calendar windows.
type CalendarUnit uint8

// Calendar units.
const (
	Hour CalendarUnit = iota + 1
	Day
	Week
	Month
	Year
)

// String returns the configuration name of the unit.
func (u CalendarUnit) String() string {
	switch u {
	case Hour:
		return "hour"
	case Day:
		return "day"
	case Week:
		return "week"
	case Month:
		return "month"
	case Year:
		return "year"
	}
	return fmt.Sprintf("CalendarUnit(%d)", uint8(u))
}

// CalendarSpec describes calendar windows: Size and Hop count Units.
type CalendarSpec struct {
	Unit      CalendarUnit
	Zone      *time.Location // its String() is the IANA name panes carry
	Size, Hop int64
	WeekStart time.Weekday // Week only
}

const (
	msPerHour = int64(time.Hour / time.Millisecond)
	msPerDay  = 24 * msPerHour
	// calendarMin and calendarMax bound the event times calendar windows
	// take: 0001-01-02 and 9999-12-30 UTC, inside years 1..9999 in every
	// zone.
	calendarMin = -62135510400000
	calendarMax = 253402128000000
	// calendarCache is the number of units whose windows a calendar keeps
	// computed (a power of two).
	calendarCache = 64
)

// Span is a window's bounds [Start, End) in ms.
type Span struct{ Start, End int64 }

// calendar assigns calendar windows. It caches the windows of recently
// seen units: most records fall into a unit seen just before. Not safe for
// concurrent use (each Engine has its own).
type calendar struct {
	spec  CalendarSpec
	slice int64      // slice length in units when sliced; 0: not sliced
	hours *hourTable // Hour only
	epoch int64      // the raw number of unit 0 (Hour only)
	cache [calendarCache]calUnit
	last  *calUnit
}

// calUnit is one unit and the windows that contain it.
type calUnit struct {
	lo, hi int64 // the unit's bounds; hi == lo: empty slot
	slice  int64 // start of the slice holding the unit (sliced only)
	spans  []Span
}

func newCalendar(spec CalendarSpec) *calendar {
	c := &calendar{spec: spec}
	if spec.Unit == Hour {
		c.hours = newHourTable(spec.Zone)
		c.epoch = c.hours.unitOf(c.firstInstant(civilDays(1970, 1, 1) * msPerDay))
	}
	return c
}

// windows appends the windows containing t in ascending start order.
func (c *calendar) windows(dst []Span, t int64) []Span {
	u := c.unit(t)
	if u == nil {
		return dst
	}
	return append(dst, u.spans...)
}

// sliceStart returns the start of the slice holding t (t has windows).
func (c *calendar) sliceStart(t int64) int64 { return c.unit(t).slice }

// unit returns the cached unit holding t, computing it on a miss; nil when
// t is out of the calendar's range.
func (c *calendar) unit(t int64) *calUnit {
	if u := c.last; u != nil && u.lo <= t && t < u.hi {
		return u
	}
	slot := &c.cache[uint64(floorDiv(t, msPerHour))&(calendarCache-1)]
	if c.spec.Unit != Hour {
		slot = &c.cache[uint64(floorDiv(t, msPerDay))&(calendarCache-1)]
	}
	if slot.lo <= t && t < slot.hi {
		c.last = slot
		return slot
	}
	if t < calendarMin || t >= calendarMax {
		return nil
	}
	n := c.unitOf(t)
	lo, hi := c.start(n), c.start(n+1)
	*slot = calUnit{lo: lo, hi: hi, spans: slot.spans[:0]}
	size, hop := c.spec.Size, c.spec.Hop
	// Windows [k, k+size) with k a multiple of hop and k <= n < k+size.
	for k := floorDiv(n-size, hop)*hop + hop; k <= n; k += hop {
		slot.spans = append(slot.spans, Span{c.start(k), c.start(k + size)})
	}
	if c.slice > 0 {
		slot.slice = c.start(floorDiv(n, c.slice) * c.slice)
	}
	c.last = slot
	return slot
}

// unitOf returns the number of the unit holding t.
func (c *calendar) unitOf(t int64) int64 {
	if c.spec.Unit == Hour {
		return c.hours.unitOf(t) - c.epoch
	}
	y, m, d := time.UnixMilli(t).In(c.spec.Zone).Date()
	var n int64
	switch c.spec.Unit {
	case Day:
		n = civilDays(y, m, d)
	case Week:
		n = floorDiv(civilDays(y, m, d)-c.weekShift(), 7)
	case Month:
		n = int64(y-1970)*12 + int64(m-1)
	case Year:
		n = int64(y - 1970)
	}
	// The local date of an instant can run backwards (a zone that repeats
	// midnight): settle on the unit whose bounds hold t.
	for c.start(n+1) <= t {
		n++
	}
	for c.start(n) > t {
		n--
	}
	return n
}

// weekShift is the day number (from 1970-01-01, a Thursday) of the first
// week start on or after it.
func (c *calendar) weekShift() int64 {
	return int64((c.spec.WeekStart - time.Thursday + 7) % 7)
}

// start returns the first instant of unit n.
func (c *calendar) start(n int64) int64 {
	var days int64
	switch c.spec.Unit {
	case Hour:
		return c.hours.start(n + c.epoch)
	case Day:
		days = n
	case Week:
		days = n*7 + c.weekShift()
	case Month:
		y, m := floorDiv(n, 12), floorMod(n, 12)
		days = civilDays(int(1970+y), time.Month(m+1), 1)
	case Year:
		days = civilDays(int(1970+n), time.January, 1)
	}
	return c.firstInstant(days * msPerDay)
}

// firstInstant returns the first instant at which the local clock of the
// zone reads wall (ms since 1970-01-01T00:00 of the local calendar), or, in
// a gap the clock skips, the instant the gap ends; of two instants reading
// wall (an overlap), the earlier.
func (c *calendar) firstInstant(wall int64) int64 {
	// Offsets lie within ±26 h: the zones in effect from wall-26h to
	// wall+26h hold every candidate.
	loc := c.spec.Zone
	best := int64(math.MaxInt64)
	z := time.UnixMilli(wall - 26*msPerHour).In(loc)
	prev := offsetOf(z)
	for {
		o := offsetOf(z)
		if i := wall - o; offsetAt(i, loc) == o {
			best = min(best, i) // the clock reads wall at i
		}
		if at := z.UnixMilli(); at-1+prev < wall && at+o > wall {
			best = min(best, at) // the clock skips wall here
		}
		prev = o
		z = nextZone(z)
		if z.IsZero() || z.UnixMilli() > wall+26*msPerHour {
			return best
		}
	}
}

// offsetOf returns the zone offset of t in ms.
func offsetOf(t time.Time) int64 {
	_, off := t.Zone()
	return int64(off) * 1000
}

// offsetAt returns the offset of loc at instant ms.
func offsetAt(ms int64, loc *time.Location) int64 { return offsetOf(time.UnixMilli(ms).In(loc)) }

// nextZone returns the start of the zone after the one holding t (in t's
// location), or the zero Time when none follows. A returned start may not
// change the offset.
func nextZone(t time.Time) time.Time {
	_, end := t.ZoneBounds()
	if end.IsZero() || end.After(t) {
		return end
	}
	// Past a zone's last listed transition Go computes zones from its rule
	// a year at a time, and at a year's end ZoneBounds can return that
	// same instant as the end (seen with Go 1.26): ask a day later.
	start, end := t.Add(24 * time.Hour).ZoneBounds()
	if start.After(t) {
		return start
	}
	return end
}

// civilDays returns the day number of a date from 1970-01-01.
func civilDays(y int, m time.Month, d int) int64 {
	return floorDiv(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix(), 86400)
}

// floorDiv returns a/m rounded down, for m > 0.
func floorDiv(a, m int64) int64 {
	q := a / m
	if a%m != 0 && a < 0 {
		q--
	}
	return q
}

// hourTable numbers the hour units of a zone (see the file comment): the
// zone's offset changes from year 0 to 10000, with the number of units
// before each. Raw unit numbers count from year 0.
type hourTable struct {
	runs []hourRun
}

// hourRun is a stretch of one offset from start to the next run's start.
type hourRun struct {
	start int64 // ms; a boundary unless it is the first run's
	off   int64 // ms
	units int64 // units starting before start
}

const (
	hourTableFrom = -62167219200000 // 0000-01-01 UTC
	hourTableTo   = 253402300800000 // 10000-01-01 UTC
)

func newHourTable(loc *time.Location) *hourTable {
	h := &hourTable{}
	for t := time.UnixMilli(hourTableFrom).In(loc); !t.IsZero() && t.UnixMilli() < hourTableTo; t = nextZone(t) {
		o, s := offsetOf(t), t.UnixMilli()
		if n := len(h.runs); n == 0 || h.runs[n-1].off != o {
			r := hourRun{start: s, off: o}
			if n > 0 {
				r.units = h.runs[n-1].units + h.inRun(n-1, s)
			}
			h.runs = append(h.runs, r)
		}
	}
	return h
}

// wholeHours counts the instants x in [a, b) at which x+off is a whole hour.
func wholeHours(a, b, off int64) int64 {
	if b <= a {
		return 0
	}
	return floorDiv(b-1+off, msPerHour) - floorDiv(a-1+off, msPerHour)
}

// inRun counts the boundaries of run i in [start, x).
func (h *hourTable) inRun(i int, x int64) int64 {
	r := h.runs[i]
	if i == 0 {
		return wholeHours(r.start, x, r.off)
	}
	if x <= r.start {
		return 0
	}
	return 1 + wholeHours(r.start+1, x, r.off)
}

// run returns the index of the run holding t.
func (h *hourTable) run(t int64) int {
	lo, hi := 0, len(h.runs)
	for hi-lo > 1 {
		m := int(uint(lo+hi) >> 1)
		if h.runs[m].start <= t {
			lo = m
		} else {
			hi = m
		}
	}
	return lo
}

// unitOf returns the raw number of the unit holding t: the boundaries up
// to and including t, less one.
func (h *hourTable) unitOf(t int64) int64 {
	i := h.run(t)
	return h.runs[i].units + h.inRun(i, t+1) - 1
}

// start returns the first instant of raw unit n.
func (h *hourTable) start(n int64) int64 {
	lo, hi := 0, len(h.runs)
	for hi-lo > 1 {
		m := int(uint(lo+hi) >> 1)
		if h.runs[m].units <= n {
			lo = m
		} else {
			hi = m
		}
	}
	r := h.runs[lo]
	k := n - r.units
	first := r.start // the run's first boundary
	if lo == 0 {
		first += floorMod(-(r.start + r.off), msPerHour)
		return first + k*msPerHour
	}
	if k == 0 {
		return first
	}
	// The k-th whole hour after the run's start.
	next := r.start + 1 + floorMod(-(r.start+1+r.off), msPerHour)
	return next + (k-1)*msPerHour
}
