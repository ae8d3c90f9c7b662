package windowing

import (
	"fmt"
	"math"

	"github.com/axiomhq/hyperloglog"
)

// ValueKind says which field of a Value holds the aggregate's result.
type ValueKind uint8

// Value kinds.
const (
	NullValue ValueKind = iota
	IntValue
	NumValue
	// RawValue is JSON text written as it is (Value.Raw): the object of
	// quantiles, the list of top_k.
	RawValue
)

// Value is one aggregate result in a pane.
type Value struct {
	Kind ValueKind
	Int  int64
	Num  float64
	Raw  string // RawValue: compact JSON
}

// accum is the partial aggregate of one aggregate in one window. Every op
// is constant-size (distinct_approx: a HyperLogLog sketch, sparse while
// small; quantiles and top_k: sketches bounded by max_buckets and
// capacity, sparse while small) and merges with one call.
type accum struct {
	n   int64   // count; number of values for sum, min, max, avg, quantiles, top_k
	f   float64 // sum, min, max, or the sum for avg
	hll *hyperloglog.Sketch
	sk  *sketch // quantiles, top_k
}

// sketch is the state of a quantiles or top_k aggregate: one of the two is
// used, as the op says. One pointer in accum for both keeps accum small for
// the other ops.
type sketch struct {
	q   quantileSketch
	top topK
}

func (a *accum) add(spec *AggSpec, in *Input) {
	if in.Skip || spec.Op == Ratio {
		return
	}
	switch spec.Op {
	case Count:
	case Sum, Avg:
		a.f += in.Num
	case Min:
		if a.n == 0 || in.Num < a.f {
			a.f = in.Num
		}
	case Max:
		if a.n == 0 || in.Num > a.f {
			a.f = in.Num
		}
	case DistinctApprox:
		if a.hll == nil {
			a.hll = newSketch(spec)
		}
		a.hll.InsertHash(in.Hash)
	case Quantiles:
		if a.sk == nil {
			a.sk = &sketch{}
		}
		a.sk.q.add(spec, in.Num)
	case TopK:
		if a.sk == nil {
			a.sk = &sketch{}
		}
		a.sk.top.add(spec, in.Text)
	}
	a.n++
}

// merge folds b into a.
func (a *accum) merge(spec *AggSpec, b *accum) error {
	switch spec.Op {
	case Sum, Avg:
		a.f += b.f
	case Min:
		if b.n > 0 && (a.n == 0 || b.f < a.f) {
			a.f = b.f
		}
	case Max:
		if b.n > 0 && (a.n == 0 || b.f > a.f) {
			a.f = b.f
		}
	case DistinctApprox:
		if b.hll != nil {
			if a.hll == nil {
				a.hll = b.hll.Clone()
			} else if err := a.hll.Merge(b.hll); err != nil {
				return fmt.Errorf("merge %s: %w", spec.Name, err)
			}
		}
	case Quantiles:
		if b.sk != nil {
			if a.sk == nil {
				a.sk = &sketch{}
				b.sk.q.cloneInto(&a.sk.q)
			} else {
				a.sk.q.merge(spec, &b.sk.q)
			}
		}
	case TopK:
		if b.sk != nil {
			if a.sk == nil {
				a.sk = &sketch{top: b.sk.top.clone()}
			} else {
				a.sk.top.merge(spec, &b.sk.top)
			}
		}
	}
	a.n += b.n
	return nil
}

func (a *accum) result(spec *AggSpec) Value {
	switch spec.Op {
	case Count:
		return Value{Kind: IntValue, Int: a.n}
	case Sum:
		return Value{Kind: NumValue, Num: ShortestWithin(a.f, a.n)}
	case Min, Max:
		if a.n == 0 {
			return Value{}
		}
		return Value{Kind: NumValue, Num: a.f}
	case Avg:
		if a.n == 0 {
			return Value{}
		}
		return Value{Kind: NumValue, Num: ShortestWithin(a.f/float64(a.n), a.n+1)}
	case DistinctApprox:
		if a.hll == nil {
			return Value{Kind: IntValue}
		}
		return Value{Kind: IntValue, Int: int64(a.hll.Estimate())}
	case Quantiles:
		var q *quantileSketch
		if a.sk != nil {
			q = &a.sk.q
		}
		var buf [256]byte
		return Value{Kind: RawValue, Raw: string(appendQuantiles(buf[:0], spec, q, a.n))}
	case TopK:
		var t *topK
		if a.sk != nil {
			t = &a.sk.top
		}
		var buf [512]byte
		return Value{Kind: RawValue, Raw: string(appendTopK(buf[:0], spec, t))}
	}
	return Value{}
}

// records is the number of records the aggregates acc took: each record
// adds a value to every aggregate but a ratio (which takes none) and, with
// several inputs, those of other inputs (Input.Skip), so it is the largest
// count, exact with one input (a lower bound with several).
func records(acc []accum, specs []AggSpec) int64 {
	n := int64(0)
	for i := range specs {
		if specs[i].Op != Ratio {
			n = max(n, acc[i].n)
		}
	}
	return n
}

// ratio is a ratio aggregate's value: of / to, null when either is null
// or to is 0 (docs/SEMANTICS.md, Aggregates).
func ratio(of, to Value) Value {
	num := func(v Value) (float64, bool) {
		switch v.Kind {
		case IntValue:
			return float64(v.Int), true
		case NumValue:
			return v.Num, true
		}
		return 0, false
	}
	a, ok := num(of)
	b, ok2 := num(to)
	r := a / b
	if !ok || !ok2 || b == 0 || math.IsInf(r, 0) || math.IsNaN(r) {
		return Value{}
	}
	return Value{Kind: NumValue, Num: r}
}

// pow10 are the powers of ten ShortestWithin tries: decimals of at most
// six fraction digits (amounts, prices, measurements), not the rounded
// repeating decimals of averages.
var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6}

// ShortestWithin returns the double nearest to the decimal of fewest
// fraction digits (at most six) within terms·2⁻⁵³·|f| of f: the error bound of a sum of
// terms decimal inputs read as doubles and added (docs/SEMANTICS.md,
// Aggregates). A sum of decimal inputs (2306.04 summed as
// 2306.040000000001) then prints as the decimal; a value with no such
// decimal is returned as it is. The decimal m/10^k is
// computed from m < 2^53 and 10^k exact, so the division is its correctly
// rounded double.
func ShortestWithin(f float64, terms int64) float64 {
	if terms <= 1 || f == 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return f
	}
	abs := math.Abs(f)
	tol := float64(terms) * 0x1p-53 * abs
	for _, scale := range pow10 {
		m := math.Round(abs * scale)
		if m >= 1<<53 {
			break
		}
		if d := m / scale; math.Abs(d-abs) <= tol {
			return math.Copysign(d, f)
		}
	}
	return f
}

func newSketch(spec *AggSpec) *hyperloglog.Sketch {
	p := spec.Precision
	if p == 0 {
		p = DefaultPrecision
	}
	sk, err := hyperloglog.NewSketch(p, true)
	if err != nil {
		// The config package validates the precision range; fall back to the default.
		sk, _ = hyperloglog.NewSketch(DefaultPrecision, true)
	}
	return sk
}
