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

// Assigner computes the fixed (tumbling or hopping) windows of an event time.
// Tumbling is hopping with Hop == Size: one formula serves both.
type Assigner struct {
	size, hop, offset int64 // offset normalised to [0, hop)
}

// NewAssigner returns the assigner of a tumbling or hopping spec.
func NewAssigner(w WindowSpec) Assigner {
	hop := w.Hop
	if w.Kind == Tumbling || hop <= 0 {
		hop = w.Size
	}
	return Assigner{size: w.Size, hop: hop, offset: floorMod(w.Offset, hop)}
}

// Starts appends to dst, in ascending order, the start of every window
// [s, s+size) containing t: all s with t-size < s <= t and s ≡ offset (mod hop).
// Windows whose bounds fall outside the int64 range are left out.
func (a Assigner) Starts(dst []int64, t int64) []int64 {
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
		dst = append(dst, s)
	}
	return dst
}

// Size is the window length.
func (a Assigner) Size() int64 { return a.size }
