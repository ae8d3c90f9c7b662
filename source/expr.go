package source

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/dgryski/go-metro"
	"github.com/tidwall/gjson"

	"github.com/windowd/windowd/codec"
	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/expr"
	"github.com/windowd/windowd/windowing"
)

// ErrFiltered is Decode's answer for a record the pipeline's filter
// rejects: it is counted, not dead-lettered, and it is not an event (it
// moves no watermark; docs/SEMANTICS.md, Expressions).
var ErrFiltered = errors.New("filtered out")

// exprs are a pipeline's expressions and the activation they share; nil
// for a pipeline without any, which keeps the field-only path.
type exprs struct {
	filter *expr.Program
	key    *expr.Program
	ts     *expr.Program
	aggs   []*expr.Program // aligned with the aggregates; nil: a field's
	// closes and discards end a transaction window (Event.Ends).
	closes, discards *expr.Program
	act              expr.Activation
	// The value's members the expressions select, found in the
	// decoder's one pass: found.Names[i] is d.results[memberIdx[i]].
	found     expr.Found
	memberIdx []int
}

// programs are x's expressions.
func (x *exprs) programs() []*expr.Program {
	out := []*expr.Program{x.filter, x.key, x.ts, x.closes, x.discards}
	return append(out, x.aggs...)
}

// findMembers makes the decoder find, in its one pass over the value, the
// members the expressions select (index registers a field path); names
// with a dot are not field paths and are left to the expression's own
// lookup.
func (x *exprs) findMembers(index func(string) int) {
	for _, p := range x.programs() {
		if p == nil {
			continue
		}
		for _, m := range p.Members() {
			if m == "" || strings.ContainsRune(m, '.') || slices.Contains(x.found.Names, m) {
				continue
			}
			x.found.Names = append(x.found.Names, m)
			x.memberIdx = append(x.memberIdx, index(m))
		}
	}
	x.found.Results = make([]gjson.Result, len(x.found.Names))
	x.act.Found(&x.found)
}

func newExprs(p *config.Pipeline) *exprs {
	x := &exprs{filter: p.Filter, key: p.Key.Expr, ts: p.Timestamp.Expr, aggs: p.AggregateExprs, closes: p.CloseWhen, discards: p.DiscardWhen}
	if x.filter == nil && x.key == nil && x.ts == nil && x.aggs == nil && x.closes == nil && x.discards == nil {
		return nil
	}
	return x
}

// UsesRecordTimestamp reports whether event time is the record's
// timestamp (timestamp: {source: record}).
func (d *Decoder) UsesRecordTimestamp() bool { return d.tsIdx < 0 && (d.x == nil || d.x.ts == nil) }

// UsesExpressions reports whether the pipeline has expressions: only then
// does a record's Headers matter.
func (d *Decoder) UsesExpressions() bool { return d.x != nil }

// filter sets the expressions' variables for rec and runs the filter:
// ErrFiltered, a dead-letter reason, or nil. value is the JSON object the
// decoder reads: rec.Value itself, or for an Avro or Protobuf value the
// object it decoded into binBuf (never the wire bytes).
func (d *Decoder) filter(rec *Record) error {
	for i, j := range d.x.memberIdx {
		d.x.found.Results[i] = d.results[j]
	}
	value := rec.Value
	if d.bin != nil {
		value = d.binBuf
	}
	d.x.act.Set(value, rec.Key, rec.Headers, rec.Partition, rec.Offset, rec.Timestamp)
	if d.x.filter == nil {
		return nil
	}
	keep, err := d.x.filter.Filter(&d.x.act)
	if err != nil {
		return fail("filter: " + err.Error())
	}
	if !keep {
		return ErrFiltered
	}
	return nil
}

// ending runs close_when and discard_when: how the record ends its
// transaction window. A discard wins over a close.
func (d *Decoder) ending() (windowing.Ending, error) {
	if p := d.x.discards; p != nil {
		yes, err := p.Filter(&d.x.act)
		if err != nil {
			return 0, fail("discard_when: " + err.Error())
		}
		if yes {
			return windowing.Discards, nil
		}
	}
	if p := d.x.closes; p != nil {
		yes, err := p.Filter(&d.x.act)
		if err != nil {
			return 0, fail("close_when: " + err.Error())
		}
		if yes {
			return windowing.Closes, nil
		}
	}
	return windowing.NotEnding, nil
}

// compositeKey is the compact JSON array of the key fields' values
// (docs/SEMANTICS.md, Records and keys): strings in one canonical escaping
// (the panes', codec.AppendJSONString), so that equal values give
// equal keys however the record wrote them.
func (d *Decoder) compositeKey() (string, error) {
	b := append(d.keyBuf[:0], '[')
	for i, f := range d.keyFields {
		if i > 0 {
			b = append(b, ',')
		}
		r := &d.results[f]
		switch r.Type {
		case gjson.Null:
			if !r.Exists() {
				return "", fail(d.keyFieldErrs[i].missing)
			}
			return "", fail(d.keyFieldErrs[i].null)
		case gjson.String:
			if esc := LoneSurrogate(r); esc != "" {
				return "", fail(d.keyFieldErrs[i].name + " has a lone surrogate escape " + esc + ", which is no character (docs/SEMANTICS.md, Records and keys)")
			}
			b = codec.AppendJSONString(b, r.Str)
		case gjson.JSON:
			b = expr.AppendCompact(b, r.Raw)
		default:
			b = append(b, r.Raw...)
		}
	}
	b = append(b, ']')
	d.keyBuf = b
	return d.intern(b), nil
}

// maxInterned bounds the composite keys a decoder keeps to hand out again.
const maxInterned = 1 << 14

// intern returns b as a string, the same string as the last time b was
// seen while that is among the last maxInterned distinct keys: most keys
// repeat, and a repeated key then costs no allocation.
func (d *Decoder) intern(b []byte) string {
	if s, ok := d.interned[string(b)]; ok {
		return s
	}
	if len(d.interned) >= maxInterned {
		clear(d.interned)
	}
	s := string(b)
	d.interned[s] = s
	return s
}

// exprKey is key.expr's text.
func (d *Decoder) exprKey() (string, error) {
	k, err := d.x.key.Text(&d.x.act)
	if err != nil {
		return "", fail("key expr: " + err.Error())
	}
	return k, nil
}

// exprTime is timestamp.expr's Unix ms.
func (d *Decoder) exprTime() (int64, error) {
	t, err := d.x.ts.Millis(&d.x.act)
	if err != nil {
		return 0, fail("timestamp expr: " + err.Error())
	}
	return t, nil
}

// exprInput is aggregate i's input from its expression.
func (d *Decoder) exprInput(i int, a *aggInput, in *windowing.Input) error {
	p := d.x.aggs[i]
	if a.op.NeedsText() {
		s, err := p.Text(&d.x.act)
		if err != nil {
			return fail(a.exprErr + err.Error())
		}
		if a.op == windowing.TopK {
			in.Text = s
		} else {
			in.Hash = metro.Hash64Str(s, distinctSeed)
		}
		return nil
	}
	f, err := p.Number(&d.x.act)
	if err != nil {
		return fail(a.exprErr + err.Error())
	}
	in.Num = f
	return nil
}

type keyFieldErr struct{ missing, null, name string }

func newKeyFieldErr(field string) keyFieldErr {
	q := "key field " + strconv.Quote(field)
	return keyFieldErr{missing: q + " is missing", null: q + " is null", name: q}
}
