package config

import (
	"math/big"

	"github.com/goccy/go-yaml/ast"

	"github.com/windowd/windowd/windowing"
)

// This file reads the options of the sketch aggregates, quantiles and
// top_k (docs/SEMANTICS.md, Aggregates).

// Bounds of the sketch options beyond those of docs/SEMANTICS.md: a bucket
// or a counter costs memory and state in every window.
const (
	maxMaxBuckets = 1 << 16
	maxK          = 10000
	maxCapacity   = 1000000
)

// sketchOptions reads a's options that belong to quantiles or top_k into
// a, refusing each where a.Op does not take it.
func (d *decoder) sketchOptions(m *mapping, a *windowing.AggSpec) {
	only := func(key string, op windowing.AggOp) bool {
		if a.Op == op {
			return true
		}
		if m.has(key) {
			d.errorf(m.keyAt(key), m.child(key), "%s is only valid for %s", key, op)
		}
		return false
	}
	if only("quantiles", windowing.Quantiles) {
		a.Quantiles, _ = req(m, "quantiles", d.quantileList)
	}
	if only("relative_accuracy", windowing.Quantiles) {
		a.RelativeAccuracy, _ = opt(m, "relative_accuracy", windowing.DefaultRelativeAccuracy, d.relativeAccuracy)
	}
	if only("max_buckets", windowing.Quantiles) {
		mb, _ := opt(m, "max_buckets", windowing.DefaultMaxBuckets, d.intIn(1, maxMaxBuckets))
		a.MaxBuckets = int(mb)
	}
	if only("k", windowing.TopK) {
		k, ok := req(m, "k", d.intIn(1, maxK))
		a.K = int(k)
		c, cok := opt(m, "capacity", int64(windowing.DefaultCapacity(a.K)), d.intIn(1, maxCapacity))
		if ok && cok && c < k {
			d.errorf(m.valueAt("capacity"), m.child("capacity"), "must be at least k (%d)", k)
		}
		a.Capacity = int(c)
	} else {
		only("capacity", windowing.TopK)
	}
}

// number accepts an integer or a finite floating-point number, and returns
// its text as written.
func (d *decoder) number(n ast.Node, path string) (float64, string, bool) {
	switch x := n.(type) {
	case *ast.FloatNode:
		return x.Value, tokenText(n), true
	case *ast.IntegerNode:
		if v, ok := d.integer(n, path); ok {
			return float64(v), tokenText(n), true
		}
		return 0, "", false
	}
	d.expected(n, path, "a number")
	return 0, "", false
}

// quantile accepts a number in [0, 1], kept as the exact fraction of the
// decimal written.
func (d *decoder) quantile(n ast.Node, path string) (windowing.Quantile, bool) {
	f, txt, ok := d.number(n, path)
	if !ok {
		return windowing.Quantile{}, false
	}
	r, ok := new(big.Rat).SetString(txt)
	if !ok {
		r = new(big.Rat).SetFloat64(f)
	}
	if r == nil || r.Sign() < 0 || r.Cmp(big.NewRat(1, 1)) > 0 {
		d.errorf(posOf(n), path, "must be between 0 and 1")
		return windowing.Quantile{}, false
	}
	if !r.Denom().IsUint64() {
		d.errorf(posOf(n), path, "%s has too many digits", txt)
		return windowing.Quantile{}, false
	}
	return windowing.Quantile{Text: txt, Num: r.Num().Uint64(), Den: r.Denom().Uint64()}, true
}

// quantileList is a non-empty list of distinct quantiles.
func (d *decoder) quantileList(n ast.Node, path string) ([]windowing.Quantile, bool) {
	items, ok := d.nonEmptyList(n, path)
	if !ok {
		return nil, false
	}
	var out []windowing.Quantile
	type first struct {
		text string
		line int
	}
	seen := map[[2]uint64]first{}
	all := true
	for i, it := range items {
		if it.node == nil {
			all = false
			continue
		}
		q, ok := d.quantile(it.node, index(path, i))
		if !ok {
			all = false
			continue
		}
		// 0.5 and 0.50 are one quantile: compare reduced fractions.
		at := posOf(it.node)
		if f, dup := seen[[2]uint64{q.Num, q.Den}]; dup {
			d.errorf(at, index(path, i), "duplicate quantile %s (%s at line %d)", q.Text, f.text, f.line)
			all = false
			continue
		}
		seen[[2]uint64{q.Num, q.Den}] = first{q.Text, at.line}
		out = append(out, q)
	}
	return out, all
}

// relativeAccuracy accepts α with MinRelativeAccuracy <= α < 0.5.
func (d *decoder) relativeAccuracy(n ast.Node, path string) (float64, bool) {
	f, _, ok := d.number(n, path)
	if !ok {
		return 0, false
	}
	if !(f >= windowing.MinRelativeAccuracy && f < 0.5) {
		d.errorf(posOf(n), path, "must be at least %g and less than 0.5", windowing.MinRelativeAccuracy)
		return 0, false
	}
	return f, true
}
