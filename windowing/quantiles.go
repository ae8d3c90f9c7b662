package windowing

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/windowd/windowd/codec"
)

// This file holds the quantiles aggregate (docs/SEMANTICS.md, Aggregates):
// a DDSketch-style sketch of logarithmic buckets with integer counts.
//
// A value x > 0 falls into bucket k = ⌈log_γ x⌉, γ = (1+α)/(1−α), which
// holds (γ^(k−1), γ^k]; the bucket's estimate 2γ^k/(1+γ) is within α·x of
// every value in it. A negative value falls into the mirrored bucket of
// −x, zero into a bucket of its own. Buckets are kept sparse, sorted by
// the order of the values they hold (bucket.ord), so a sketch of a few
// values holds a few buckets.
//
// Invariant (what makes the sketch deterministic): for the multiset of
// values added, the sketch holds the MaxBuckets highest non-empty buckets
// (in value order), each with its exact count, except that the lowest kept
// bucket also counts every value of the buckets below it (collapsed). An
// add and a merge (the sorted union with counts added, then collapsing)
// both keep it, so the state, and with it every estimate, depends only on
// the multiset, not on arrival order, merge order or grouping: merges are
// exact, and hopping windows may be sliced.

// MinRelativeAccuracy is the smallest relative_accuracy of quantiles: with
// a smaller one, 2048 buckets span less than a factor of 1.5.
const MinRelativeAccuracy = 0.0001

// ordOffset shifts bucket keys to positive ordinals: with α >=
// MinRelativeAccuracy every key of a finite non-zero double is within
// ±2^22.
const ordOffset = 1 << 24

// logMapping maps values to bucket keys and keys back to estimates.
type logMapping struct {
	mult     float64 // 1/ln γ
	lnGamma  float64 // ln γ
	lnFactor float64 // ln(2/(1+γ)): the estimate of key k is γ^k·2/(1+γ)
	alpha    float64 // the configured α
}

// newLogMapping returns the mapping of relative accuracy alpha. Its
// buckets are those of an α smaller by 1%: what that leaves of the error
// budget pays for printing estimates with few digits (short) and for the
// rounding of logarithms near a bucket boundary.
func newLogMapping(alpha float64) logMapping {
	if alpha <= 0 || alpha >= 0.5 {
		alpha = DefaultRelativeAccuracy
	}
	a := alpha * (1 - 0.01)
	lnGamma := math.Log1p(2 * a / (1 - a))
	gamma := (1 + a) / (1 - a)
	return logMapping{mult: 1 / lnGamma, lnGamma: lnGamma, lnFactor: math.Log(2 / (1 + gamma)), alpha: alpha}
}

// short returns v rounded to the fewest decimal places s with 10^−s <=
// |v|·α·0.004: the rounding moves v by at most |v|·α·0.002 <= 0.003·α·|x|
// (|v| <= 1.5·|x| for α < 0.5), which with the buckets' 0.99·α keeps the
// estimate within α·|x| and prints it with about −log10(α)+4 significant
// digits (30.2671 rather than 30.267068120548988 at α = 0.01). Outside
// 10^±15 places v is left as it is.
func (m *logMapping) short(v float64) float64 {
	if v == 0 {
		return 0
	}
	s := math.Ceil(-math.Log10(math.Abs(v) * m.alpha * 0.004))
	switch {
	case s > 15 || s < -15:
		return v
	case s >= 0:
		p := math.Pow(10, s)
		return math.Round(v*p) / p
	default:
		p := math.Pow(10, -s)
		return math.Round(v/p) * p
	}
}

// ord returns the ordinal of x's bucket: 0 for zero, positive for
// positive values, negative for negative ones, in the order of the values.
func (m *logMapping) ord(x float64) int32 {
	switch {
	case x > 0:
		return int32(math.Ceil(math.Log(x)*m.mult)) + ordOffset
	case x < 0:
		return -(int32(math.Ceil(math.Log(-x)*m.mult)) + ordOffset)
	}
	return 0
}

// value returns the estimate of bucket ordinal o.
func (m *logMapping) value(o int32) float64 {
	switch {
	case o > 0:
		return m.magnitude(o - ordOffset)
	case o < 0:
		return -m.magnitude(-o - ordOffset)
	}
	return 0
}

func (m *logMapping) magnitude(k int32) float64 {
	v := math.Exp(float64(k)*m.lnGamma + m.lnFactor)
	if v > math.MaxFloat64 {
		return math.MaxFloat64
	}
	return v
}

// prepareAggregates returns a copy of specs in which every quantiles
// aggregate has its mapping computed once (the caller's specs are not
// changed: they may be shared).
func prepareAggregates(specs []AggSpec) []AggSpec {
	out := append([]AggSpec(nil), specs...)
	for i := range out {
		if out[i].Op == Quantiles {
			m := newLogMapping(out[i].RelativeAccuracy)
			out[i].qmap = &m
		}
	}
	return out
}

// logMap returns the mapping of a quantiles aggregate.
func (s *AggSpec) logMap() logMapping {
	if s.qmap != nil {
		return *s.qmap
	}
	return newLogMapping(s.RelativeAccuracy)
}

func (s *AggSpec) maxBuckets() int {
	if s.MaxBuckets <= 0 {
		return DefaultMaxBuckets
	}
	return s.MaxBuckets
}

// bucket is one non-empty bucket: its ordinal and how many values it holds.
type bucket struct {
	ord int32
	n   uint64
}

// quantileSketch is the sketch of the file comment.
type quantileSketch struct {
	b []bucket // sorted by ord, every n > 0
	// first holds b while it has at most two buckets: a window of one
	// value then costs one allocation (the sketch) for its quantiles.
	first [2]bucket
}

// search returns the index of the first bucket with ord >= o.
func (q *quantileSketch) search(o int32) int {
	lo, hi := 0, len(q.b)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if q.b[m].ord < o {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func (q *quantileSketch) add(spec *AggSpec, x float64) {
	m := spec.logMap()
	o := m.ord(x)
	i := q.search(o)
	if i < len(q.b) && q.b[i].ord == o {
		q.b[i].n++
		return
	}
	if q.b == nil {
		q.b = q.first[:0]
	}
	q.b = append(q.b, bucket{})
	copy(q.b[i+1:], q.b[i:])
	q.b[i] = bucket{ord: o, n: 1}
	q.collapse(spec.maxBuckets())
}

// collapse folds the lowest buckets into the lowest of the max highest.
func (q *quantileSketch) collapse(max int) {
	excess := len(q.b) - max
	if excess <= 0 {
		return
	}
	for _, b := range q.b[:excess] {
		q.b[excess].n += b.n
	}
	q.b = append(q.b[:0], q.b[excess:]...)
}

// merge adds r's buckets to q's.
func (q *quantileSketch) merge(spec *AggSpec, r *quantileSketch) {
	if len(r.b) == 0 {
		return
	}
	if len(q.b) == 0 {
		r.cloneInto(q)
		return
	}
	out := make([]bucket, 0, len(q.b)+len(r.b))
	i, j := 0, 0
	for i < len(q.b) && j < len(r.b) {
		switch a, b := q.b[i], r.b[j]; {
		case a.ord < b.ord:
			out = append(out, a)
			i++
		case a.ord > b.ord:
			out = append(out, b)
			j++
		default:
			out = append(out, bucket{ord: a.ord, n: a.n + b.n})
			i++
			j++
		}
	}
	out = append(out, q.b[i:]...)
	out = append(out, r.b[j:]...)
	q.b = out
	q.collapse(spec.maxBuckets())
}

// cloneInto sets d to a copy of q (d is a zero sketch that will not move:
// its b may point into its own first).
func (q *quantileSketch) cloneInto(d *quantileSketch) {
	if len(q.b) <= len(d.first) {
		d.b = append(d.first[:0], q.b...)
		return
	}
	d.b = append([]bucket(nil), q.b...)
}

// rank returns ⌊num·(n−1)/den⌋, exactly.
func rank(num, den uint64, n int64) uint64 {
	if n <= 1 || den == 0 {
		return 0
	}
	hi, lo := bits.Mul64(num, uint64(n-1))
	if hi >= den { // num > den: not a quantile; the last rank
		return uint64(n - 1)
	}
	r, _ := bits.Div64(hi, lo, den)
	return r
}

// at returns the estimate of the value of 0-based rank r in sorted order.
func (q *quantileSketch) at(m *logMapping, r uint64) float64 {
	var cum uint64
	for _, b := range q.b {
		cum += b.n
		if cum > r {
			return m.value(b.ord)
		}
	}
	if len(q.b) > 0 {
		return m.value(q.b[len(q.b)-1].ord)
	}
	return 0
}

// appendQuantiles appends the pane value of a quantiles aggregate of n
// values: an object from each quantile's text to its estimate, every
// estimate null when n is 0.
func appendQuantiles(b []byte, spec *AggSpec, q *quantileSketch, n int64) []byte {
	m := spec.logMap()
	b = append(b, '{')
	for i, qu := range spec.Quantiles {
		if i > 0 {
			b = append(b, ',')
		}
		b = codec.AppendJSONString(b, qu.Text)
		b = append(b, ':')
		if n == 0 || q == nil {
			b = append(b, "null"...)
			continue
		}
		b = AppendValue(b, Value{Kind: NumValue, Num: m.short(q.at(&m, rank(qu.Num, qu.Den, n)))})
	}
	return append(b, '}')
}

// appendBinary appends the sketch's binary form: the number of buckets,
// then each bucket's ordinal as the difference from the previous one (the
// first from ordOffset, the bucket of 1) and its count, all varints.
func (q *quantileSketch) appendBinary(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(q.b)))
	prev := int64(ordOffset)
	for _, bk := range q.b {
		b = binary.AppendVarint(b, int64(bk.ord)-prev)
		b = binary.AppendUvarint(b, bk.n)
		prev = int64(bk.ord)
	}
	return b
}

// quantiles reads into q (a zero sketch that will not move) what
// quantileSketch.appendBinary wrote for an aggregate of n values; the
// counts must add up to n. It reports whether there was a bucket.
func (d *decoder) quantiles(spec *AggSpec, n int64, q *quantileSketch) (bool, error) {
	nb := d.uvarint()
	if nb == 0 || d.err() != nil {
		return false, d.err()
	}
	if nb > uint64(d.left()) {
		return false, errCorruptState
	}
	q.b = q.first[:0]
	if nb > uint64(len(q.first)) {
		q.b = make([]bucket, 0, nb)
	}
	prev := int64(ordOffset)
	var total uint64
	for i := uint64(0); i < nb && d.err() == nil; i++ {
		o := prev + d.varint()
		c := d.uvarint()
		if (i > 0 && o <= prev) || o < math.MinInt32 || o > math.MaxInt32 || c == 0 {
			return false, fmt.Errorf("decode %s: %w", spec.Name, errCorruptState)
		}
		q.b = append(q.b, bucket{ord: int32(o), n: c})
		total += c
		prev = o
	}
	if d.err() == nil && total != uint64(n) {
		return false, fmt.Errorf("decode %s: %w", spec.Name, errCorruptState)
	}
	// A smaller max_buckets than the state was written with collapses it
	// as adding its values would have.
	q.collapse(spec.maxBuckets())
	return true, d.err()
}
