package watermark

import "github.com/windowd/windowd/codec"

// Upstreams is what one partition q of a repartition topic knows of the
// upstream partitions that feed it (docs/SEMANTICS.md, Repartitioning): the
// last marker of each. Its Watermark is q's watermark: the minimum over the
// upstream partitions that are not idle, the largest of them when all are
// idle, and minus infinity until every upstream partition has sent a marker.
//
// Invariant: an upstream partition's own watermark (base) never decreases
// here, even when a marker carries a lower one (a new owner of the
// upstream partition starts its generator again). What the quiet advance
// raised it to lasts only while its markers say so: a marker of its own
// watermark (it is active again, or has a new owner) brings it back to
// that.
type Upstreams struct {
	marks []upstreamMark
	known int // upstream partitions with at least one marker
}

type upstreamMark struct {
	seen      bool
	idle      bool
	watermark int64
	// base: what the upstream partition's own watermark gave, below
	// watermark when the quiet advance raised its marker (never lowered,
	// not persisted: a decoded mark's base is its watermark).
	base int64
}

// NewUpstreams returns the view of n upstream partitions with no marker yet.
func NewUpstreams(n int) *Upstreams {
	return &Upstreams{marks: make([]upstreamMark, n)}
}

// Len is the number of upstream partitions.
func (u *Upstreams) Len() int { return len(u.marks) }

// Observe applies a marker of upstream partition p and reports whether it
// was in range (p < Len).
func (u *Upstreams) Observe(p int32, wm int64, idle bool) bool {
	return u.ObserveQuiet(p, wm, wm, idle)
}

// ObserveQuiet is Observe of a marker whose watermark wm the quiet advance
// raised above base, the upstream partition's own watermark (Spec.QuietAdvance).
func (u *Upstreams) ObserveQuiet(p int32, wm, base int64, idle bool) bool {
	if p < 0 || int(p) >= len(u.marks) {
		return false
	}
	m := &u.marks[p]
	switch {
	case !m.seen:
		m.seen = true
		m.watermark, m.base = wm, base
		u.known++
	case wm > base: // raised by the quiet advance upstream
		m.watermark, m.base = max(m.watermark, wm), max(m.base, base)
	default:
		// Its own watermark: a quiet raise ends here. Counted at the
		// raised value while active, it let the frontier pass the
		// partition's records to come.
		m.base = max(m.base, base)
		m.watermark = max(m.base, wm)
	}
	m.idle = idle
	return true
}

// Take gives upstream partition p, which has no marker yet, the last
// marker of from's upstream partition q (a table renumbered: Table.Remap).
func (u *Upstreams) Take(p int32, from *Upstreams, q int32) {
	m := from.marks[q]
	if m.seen && !u.marks[p].seen {
		u.known++
	}
	u.marks[p] = m
}

// Upstream returns p's last marker: its watermark (never lowered), idle flag
// and whether any marker of p arrived.
func (u *Upstreams) Upstream(p int32) (wm int64, idle, seen bool) {
	if p < 0 || int(p) >= len(u.marks) {
		return MinTime, false, false
	}
	m := u.marks[p]
	return m.watermark, m.idle, m.seen
}

// Watermark is the downstream partition's watermark.
func (u *Upstreams) Watermark() int64 {
	return u.combine(func(m *upstreamMark) int64 { return m.watermark })
}

// Base is what Watermark would be without the quiet advance upstream: the
// same rule over the upstream partitions' own watermarks.
func (u *Upstreams) Base() int64 {
	return u.combine(func(m *upstreamMark) int64 { return m.base })
}

// combine is the minimum of wm over the active upstream partitions, the
// largest when all are idle, and minus infinity until every upstream
// partition has sent a marker.
func (u *Upstreams) combine(wm func(*upstreamMark) int64) int64 {
	if len(u.marks) == 0 || u.known < len(u.marks) {
		return MinTime
	}
	lo, hi, active := MaxTime, MinTime, 0
	for i := range u.marks {
		m := &u.marks[i]
		w := wm(m)
		hi = max(hi, w)
		if m.idle {
			continue
		}
		active++
		lo = min(lo, w)
	}
	if active == 0 {
		return hi
	}
	return lo
}

// Encode writes the markers' encoding.
func (u *Upstreams) Encode(w *codec.Writer) {
	w.Uvarint(uint64(len(u.marks)))
	for _, m := range u.marks {
		flags := byte(0)
		if m.seen {
			flags |= 1
		}
		if m.idle {
			flags |= 2
		}
		w.Byte(flags).Varint(m.watermark)
	}
}

// DecodeUpstreams reads what Encode wrote; nil when r holds no valid
// encoding (r.Err tells why).
func DecodeUpstreams(r *codec.Reader) *Upstreams {
	u := NewUpstreams(r.Count())
	for i := range u.marks {
		flags, wm := r.Byte(), r.Varint()
		if flags > 3 {
			r.Fail()
			return nil
		}
		u.marks[i] = upstreamMark{seen: flags&1 != 0, idle: flags&2 != 0, watermark: wm, base: wm}
		if flags&1 != 0 {
			u.known++
		}
	}
	if r.Err() != nil {
		return nil
	}
	return u
}
