package config

import (
	"github.com/goccy/go-yaml/ast"

	"github.com/windowd/windowd/windowing"
)

// A join of two of a pipeline's inputs (docs/SEMANTICS.md, Joins): join
// in place of aggregates.

var (
	joinKeys  = []string{"type", "left", "right", "between", "kind"}
	joinTypes = []choice[bool]{{"interval", true}, {"window", false}}
	joinKinds = named(windowing.InnerJoin, windowing.LeftJoin, windowing.FullJoin)
)

// join reads a pipeline's join and what it takes of the window,
// allowed_lateness and trigger; the pipeline's inputs are read already.
func (d *decoder) join(m *mapping, p *Pipeline) *windowing.JoinSpec {
	jm := m.sub("join", joinKeys...)
	var s windowing.JoinSpec
	interval, typeOK := req(jm, "type", oneOf(d, joinTypes))
	s.Interval = interval
	s.Kind, _ = opt(jm, "kind", windowing.InnerJoin, oneOf(d, joinKinds))
	switch {
	case p.Inputs == nil && !m.broken:
		d.errorf(jm.at, jm.path, "joins two inputs: give the pipeline inputs (docs/SEMANTICS.md, Joins)")
	case len(p.Inputs) > 2:
		d.errorf(jm.at, jm.path, "joins two inputs, and this pipeline has %d: a third input's records would only hold the frontier", len(p.Inputs))
	}
	sides := []struct {
		key string
		dst *int32
	}{{"left", &s.Left}, {"right", &s.Right}}
	names := map[string]bool{}
	for _, side := range sides {
		name, ok := req(jm, side.key, d.str)
		if !ok || p.Inputs == nil {
			continue
		}
		i := inputNamed(p, name)
		switch {
		case i < 0:
			d.errorf(jm.valueAt(side.key), jm.child(side.key), "no input is named %q (the inputs: %s)", name, inputNames(p))
		case names[name]:
			d.errorf(jm.valueAt(side.key), jm.child(side.key), "joins an input with itself: left and right name two inputs")
		default:
			*side.dst = int32(i)
		}
		names[name] = true
	}
	switch {
	case !typeOK:
	case interval:
		if b, ok := req(jm, "between", d.between); ok {
			s.Lower, s.Upper = b[0], b[1]
		}
		if m.has("window") {
			d.errorf(m.keyAt("window"), m.child("window"), "an interval join takes no window: its records match within join.between")
		}
	default:
		if jm.has("between") {
			d.errorf(jm.keyAt("between"), jm.child("between"), "only valid for an interval join")
		}
		s.Window = d.window(m.sub("window", windowKeys...))
		d.closeWhen, d.discardWhen = nil, nil
		if k := s.Window.Kind; k != 0 && k != windowing.Tumbling && k != windowing.Hopping {
			d.errorf(m.valueAt("window"), m.child("window"), "a window join takes tumbling or hopping windows, not %s", k)
		}
	}
	s.AllowedLateness, _ = opt(m, "allowed_lateness", 0, d.duration(nonNegative))
	if m.has("trigger") {
		tm := m.sub("trigger", triggerKeys...)
		for _, k := range []string{"on_time", "late", "closing"} {
			if tm.has(k) {
				d.errorf(tm.keyAt(k), tm.child(k), "%s does not apply to a join: a match is emitted when both records are in, an unmatched row when the frontier passes its last chance", k)
			}
		}
		em := tm.sub("early", earlyKeys...)
		if em.has("count") {
			d.errorf(em.keyAt("count"), em.child("count"), "a join's early rows come with processing time: early.every")
		} else {
			s.EarlyEvery, _ = req(em, "every", d.duration(positive))
		}
		if s.EarlyEvery > 0 && s.Kind == windowing.InnerJoin {
			d.errorf(em.keyAt("every"), em.child("every"), "early rows are unmatched rows: a left or full join has them, an inner join emits matches only")
		}
	}
	for _, k := range []string{"aggregates", "accumulation", "drain"} {
		if m.has(k) {
			d.errorf(m.keyAt(k), m.child(k), "not valid with join: a join emits its matches and unmatched rows, not panes")
		}
	}
	return &s
}

// between reads [lower, upper], two durations with lower <= upper.
func (d *decoder) between(n ast.Node, path string) ([2]int64, bool) {
	items, ok := d.list(n, path)
	if !ok {
		return [2]int64{}, false
	}
	if len(items) != 2 {
		d.errorf(posOf(n), path, "takes two durations, [lower, upper]: a right record matches a left one when lower <= right.ts - left.ts <= upper")
		return [2]int64{}, false
	}
	var b [2]int64
	for i, it := range items {
		if it.node == nil {
			return b, false
		}
		if b[i], ok = d.duration(anySign)(it.node, index(path, i)); !ok {
			return b, false
		}
	}
	if b[0] > b[1] {
		d.errorf(posOf(n), path, "lower bound above the upper one")
		return b, false
	}
	return b, true
}

// inputNamed returns the index of p's input named name, or -1.
func inputNamed(p *Pipeline, name string) int {
	for i, src := range p.Inputs {
		if src.As == name {
			return i
		}
	}
	return -1
}
