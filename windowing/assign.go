package windowing

import "math"

// floorMod returns a mod m in [0, m) for m > 0, correct for negative a.
func floorMod(a, m int64) int64 {
	r := a % m
	if r < 0 {
		r += m
	}
	return r
}

// addSat returns a+b saturated to the int64 range (b >= 0).
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Assigner computes the windows of an event time: fixed (tumbling or
// hopping) windows by arithmetic, calendar windows by their calendar
// (calendar.go). Tumbling is hopping with Hop == Size: one formula serves
// both. An Assigner of calendar windows caches; one Engine owns it.
type Assigner struct {
	size, hop, offset int64 // offset normalised to [0, hop)
	slice             int64 // slice length of a sliced spec (ms); 0: not sliced
	cal               *calendar
	cum               *cumulate
	sliding           bool // the record's own sliding window (sliding.go)
}

// NewAssigner returns the assigner of a tumbling, hopping or calendar spec.
func NewAssigner(w WindowSpec) Assigner {
	switch w.Kind {
	case Calendar:
		return Assigner{cal: newCalendar(*w.Calendar)}
	case Cumulate:
		return Assigner{cum: newCumulate(w)}
	case Sliding:
		return Assigner{size: w.Size, sliding: true}
	}
	hop := w.Hop
	if w.Kind == Tumbling || hop <= 0 {
		hop = w.Size
	}
	return Assigner{size: w.Size, hop: hop, offset: floorMod(w.Offset, hop)}
}

// Windows appends to dst, in ascending start order, every window
// containing t. For fixed windows: [s, s+size) for all s with
// t-size < s <= t and s ≡ offset (mod hop). Windows whose bounds fall
// outside the int64 range (or, for calendar windows, outside years
// 1..9999) are left out.
func (a *Assigner) Windows(dst []Span, t int64) []Span {
	if a.cal != nil {
		return a.cal.windows(dst, t)
	}
	if a.cum != nil {
		return a.cum.windows(dst, t)
	}
	if a.sliding {
		// Of the windows holding t only its own is certain to exist:
		// (t − size, t].
		if t == math.MaxInt64 || t < math.MinInt64+a.size {
			return dst
		}
		return append(dst, Span{t - a.size + 1, t + 1})
	}
	r := floorMod(floorMod(t, a.hop)-a.offset, a.hop)
	if t < math.MinInt64+r {
		return dst
	}
	last := t - r
	// Walk down to the earliest start, then emit ascending.
	first := last
	n := 1
	for {
		if first < math.MinInt64+a.hop {
			break
		}
		s := first - a.hop
		if t-s >= a.size { // s <= t - size
			break
		}
		first = s
		n++
	}
	for i := 0; i < n; i++ {
		s := first + int64(i)*a.hop
		if s > math.MaxInt64-a.size {
			break
		}
		dst = append(dst, Span{s, s + a.size})
	}
	return dst
}

// setSlice makes the assigner slice windows by n: ms for fixed windows,
// units for calendar windows (slices.go).
func (a *Assigner) setSlice(n int64) {
	if a.cal != nil {
		a.cal.slice = n
		return
	}
	a.slice = n
}

// sliceStart returns the start of the slice holding t, which has a window.
func (a *Assigner) sliceStart(t int64) int64 {
	if a.cal != nil {
		return a.cal.sliceStart(t)
	}
	if a.cum != nil {
		return a.cum.sliceStart(t)
	}
	// As Windows does, without overflow: (t - offset) mod G is at most
	// (t - offset) mod H, which Windows found representable.
	return t - floorMod(floorMod(t, a.slice)-floorMod(a.offset, a.slice), a.slice)
}
