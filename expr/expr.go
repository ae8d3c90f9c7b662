// Package expr compiles and evaluates the CEL expressions of a pipeline
// (docs/SEMANTICS.md, Expressions): filter, key.expr, timestamp.expr and
// aggregate expr. Every expression sees the same variables: value (the
// record's JSON value), key (the Kafka record key as a string, or null),
// headers (map of string to string), partition, offset and timestamp
// (the record's Kafka timestamp, Unix ms) as ints.
//
// Invariants: an expression is compiled and type-checked once, when the
// configuration is loaded; evaluating it has no side effects and never
// panics: a failure (a missing field, a wrong type, a division by zero) is
// an error for the record's dead letter. The value is read lazily from
// the record's raw JSON: only the members an expression selects are found
// and converted, with CEL's JSON mapping (numbers are doubles, objects
// maps, arrays lists). A Program is safe for concurrent use; an
// Activation is not.
package expr

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
	"github.com/tidwall/gjson"

	"github.com/windowd/windowd/codec"
)

// Want is what an expression's result must be.
type Want uint8

// Results.
const (
	Bool      Want = iota // filter: a bool
	Any                   // key.expr, a distinct_approx expr: anything
	Number                // sum, min, max, avg: a number
	Timestamp             // timestamp.expr: a timestamp or an int of Unix ms
)

// Error is a compile-time problem, at a 1-based line and column of the
// expression's source.
type Error struct {
	Line, Col int
	Msg       string
}

func (e Error) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.Msg) }

// env is the CEL environment of every expression, built on first use: a
// binary whose pipelines have no expression never pays for it.
var env = sync.OnceValue(func() *cel.Env {
	e, err := cel.NewEnv(
		cel.Variable("value", cel.DynType),
		cel.Variable("key", cel.DynType),
		cel.Variable("headers", cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable("partition", cel.IntType),
		cel.Variable("offset", cel.IntType),
		cel.Variable("timestamp", cel.IntType),
	)
	if err != nil {
		panic(err) // constant declarations: cannot fail
	}
	return e
})

// MaxCost bounds what one evaluation may cost (CEL's cost units, about
// one per operation or element visited): an expression that would loop
// over a huge value fails with an error, a dead letter, instead of
// holding the pipeline.
const MaxCost = 1_000_000

// Program is a compiled, type-checked expression.
type Program struct {
	src     string
	prg     cel.Program
	members []string // the members of value it selects (value.NAME)
	fast    fastFn   // the fast path (fast.go); nil: CEL only
}

// Members are the names of the value's members the expression selects
// directly (value.NAME...): a decoder that finds them in its one pass over
// the value hands them over with Activation.Found, so that they are not
// looked up again.
func (p *Program) Members() []string { return p.members }

// Source is the expression's text.
func (p *Program) Source() string { return p.src }

// Compile parses and type-checks src for a result of kind want. An
// expression whose type can never be the one wanted (a filter of type
// string) is refused; a dyn one is checked per record.
func Compile(src string, want Want) (*Program, []Error) {
	ast, iss := env().Compile(src)
	if iss.Err() != nil {
		var errs []Error
		for _, e := range iss.Errors() {
			errs = append(errs, Error{Line: e.Location.Line(), Col: e.Location.Column() + 1, Msg: e.Message})
		}
		return nil, errs
	}
	if msg := checkType(ast.OutputType(), want); msg != "" {
		return nil, []Error{{Line: 1, Col: 1, Msg: msg}}
	}
	prg, err := env().Program(ast, cel.EvalOptions(cel.OptOptimize), cel.CostLimit(MaxCost))
	if err != nil {
		return nil, []Error{{Line: 1, Col: 1, Msg: err.Error()}}
	}
	return &Program{src: src, prg: prg, members: members(ast),
		fast: compileFast(celast.NavigateAST(ast.NativeRep()))}, nil
}

// members lists the distinct names NAME of the selections value.NAME in a.
func members(a *cel.Ast) []string {
	var out []string
	celast.PreOrderVisit(celast.NavigateAST(a.NativeRep()), celast.NewExprVisitor(func(e celast.Expr) {
		if e.Kind() != celast.SelectKind {
			return
		}
		sel := e.AsSelect()
		if op := sel.Operand(); op.Kind() == celast.IdentKind && op.AsIdent() == "value" && !slices.Contains(out, sel.FieldName()) {
			out = append(out, sel.FieldName())
		}
	}))
	return out
}

// checkType says why a result of type t can never be what want asks for.
func checkType(t *cel.Type, want Want) string {
	if t.IsExactType(cel.DynType) {
		return ""
	}
	switch want {
	case Bool:
		if !t.IsExactType(cel.BoolType) {
			return "a filter must be a bool, this expression is a " + t.String()
		}
	case Number:
		if !t.IsExactType(cel.IntType) && !t.IsExactType(cel.UintType) && !t.IsExactType(cel.DoubleType) {
			return "this aggregate needs a number, the expression is a " + t.String()
		}
	case Timestamp:
		if !t.IsExactType(cel.TimestampType) && !t.IsExactType(cel.IntType) {
			return "a timestamp expression must be a timestamp or an int of Unix ms, this one is a " + t.String()
		}
	}
	return ""
}

// Eval runs p over the record a holds.
func (p *Program) Eval(a *Activation) (ref.Val, error) {
	out, _, err := p.prg.Eval(a)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Filter runs a boolean expression (a filter: whether the record is kept;
// close_when, discard_when: whether it ends its window).
func (p *Program) Filter(a *Activation) (bool, error) {
	if p.fast != nil {
		if v := p.fast(a); v.k == kBool {
			return v.b, nil
		}
	}
	v, err := p.Eval(a)
	if err != nil {
		return false, err
	}
	b, ok := v.(types.Bool)
	if !ok {
		return false, fmt.Errorf("the expression is a %s, not a bool", v.Type().TypeName())
	}
	return bool(b), nil
}

// Number runs an aggregate's expression that must give a number.
func (p *Program) Number(a *Activation) (float64, error) {
	if p.fast != nil {
		switch v := p.fast(a); {
		case v.k == kDouble && !math.IsInf(v.f, 0) && !math.IsNaN(v.f):
			return v.f, nil
		case v.k == kInt:
			return float64(v.i), nil
		}
	}
	v, err := p.Eval(a)
	if err != nil {
		return 0, err
	}
	var f float64
	switch n := v.(type) {
	case types.Double:
		f = float64(n)
	case types.Int:
		f = float64(n)
	case types.Uint:
		f = float64(n)
	default:
		return 0, fmt.Errorf("the expression is a %s, not a number", v.Type().TypeName())
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, errors.New("the expression is not a finite number")
	}
	return f, nil
}

// Millis runs a timestamp expression: a CEL timestamp, or an int (or an
// integral double, as JSON numbers are) of Unix ms.
func (p *Program) Millis(a *Activation) (int64, error) {
	if p.fast != nil {
		switch v := p.fast(a); {
		case v.k == kInt:
			return v.i, nil
		case v.k == kDouble && v.f == math.Trunc(v.f) && math.Abs(v.f) < 1<<53:
			return int64(v.f), nil
		}
	}
	v, err := p.Eval(a)
	if err != nil {
		return 0, err
	}
	switch t := v.(type) {
	case types.Timestamp:
		return t.UnixMilli(), nil
	case types.Int:
		return int64(t), nil
	case types.Double:
		if f := float64(t); f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return int64(f), nil
		}
		return 0, errors.New("the timestamp expression is not a whole number of Unix ms")
	}
	return 0, fmt.Errorf("the timestamp expression is a %s, not a timestamp or an int of Unix ms", v.Type().TypeName())
}

// Text runs an expression whose result is used as text (a key, a
// distinct value): a string as it is, anything else as JSON text.
func (p *Program) Text(a *Activation) (string, error) {
	if p.fast != nil {
		v := p.fast(a)
		if t, ok := v.text(); ok {
			return t, nil
		}
	}
	v, err := p.Eval(a)
	if err != nil {
		return "", err
	}
	if s, ok := v.(types.String); ok {
		return string(s), nil
	}
	var b strings.Builder
	if err := appendJSON(&b, v); err != nil {
		return "", err
	}
	return b.String(), nil
}

// appendJSON writes v as compact JSON.
func appendJSON(b *strings.Builder, v ref.Val) error {
	switch x := v.(type) {
	case types.String:
		b.Write(codec.AppendJSONString(nil, string(x)))
	case types.Bool:
		b.WriteString(strconv.FormatBool(bool(x)))
	case types.Int:
		b.WriteString(strconv.FormatInt(int64(x), 10))
	case types.Uint:
		b.WriteString(strconv.FormatUint(uint64(x), 10))
	case types.Double:
		f := float64(x)
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return errors.New("the expression is not a finite number")
		}
		b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	case types.Null:
		b.WriteString("null")
	case *object:
		b.WriteString(compact(x.raw))
	case traits.Lister:
		b.WriteByte('[')
		for i, it := 0, x.Iterator(); it.HasNext() == types.True; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := appendJSON(b, it.Next()); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case traits.Mapper:
		var keys []string
		for it := x.Iterator(); it.HasNext() == types.True; {
			k, ok := it.Next().(types.String)
			if !ok {
				return errors.New("a map with keys that are not strings has no JSON text")
			}
			keys = append(keys, string(k))
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(codec.AppendJSONString(nil, k))
			b.WriteByte(':')
			if err := appendJSON(b, x.Get(types.String(k))); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		j, err := json.Marshal(v.Value())
		if err != nil {
			return fmt.Errorf("a %s has no JSON text", v.Type().TypeName())
		}
		b.Write(j)
	}
	return nil
}

// Activation is the variables of one record. Set it per record; it is
// reused without allocating.
type Activation struct {
	value     object
	found     *Found // the value's members a decoder found; nil: none
	valueSet  bool
	key       []byte
	keyNull   bool
	headers   []Header
	partition int64
	offset    int64
	timestamp int64
}

// Found are members of the record's value that a decoder already found:
// Names[i] is Results[i] (not Exists: the value has no such member).
// Activation.Found makes the value's lookups of these names use them.
type Found struct {
	Names   []string
	Results []gjson.Result
	vals    []ref.Val // Results[i] converted, once per record; nil: not yet
}

// Found makes f the value's members found for every record Set later: f's
// results must be the current record's whenever an expression runs.
func (a *Activation) Found(f *Found) { a.found = f }

// Header is one record header.
type Header struct{ Key, Value string }

// Set makes a the variables of a record: its JSON value (already checked
// to be valid JSON), key (nil: null), headers, partition, offset and
// timestamp (Unix ms).
func (a *Activation) Set(value, key []byte, headers []Header, partition int32, offset, timestamp int64) {
	a.value = object{raw: bytesString(value), found: a.found}
	if f := a.found; f != nil {
		if len(f.vals) != len(f.Results) {
			f.vals = make([]ref.Val, len(f.Results))
		} else {
			clear(f.vals)
		}
	}
	a.valueSet = true
	a.key, a.keyNull = key, key == nil
	a.headers = headers
	a.partition, a.offset, a.timestamp = int64(partition), offset, timestamp
}

// ResolveName implements interpreter.Activation.
func (a *Activation) ResolveName(name string) (any, bool) {
	switch name {
	case "value":
		return a.valueVal(), a.valueSet
	case "key":
		if a.keyNull {
			return types.NullValue, true
		}
		return types.String(a.key), true
	case "headers":
		m := make(map[string]string, len(a.headers))
		for _, h := range a.headers {
			m[h.Key] = h.Value
		}
		return m, true
	case "partition":
		return types.Int(a.partition), true
	case "offset":
		return types.Int(a.offset), true
	case "timestamp":
		return types.Int(a.timestamp), true
	}
	return nil, false
}

// valueVal is the record's value as CEL sees it: an object read lazily,
// or the scalar or array the JSON is.
func (a *Activation) valueVal() ref.Val {
	if raw := a.value.raw; len(raw) > 0 && raw[0] == '{' {
		return &a.value
	}
	return fromResult(gjson.Parse(a.value.raw))
}

// Parent implements interpreter.Activation.
func (a *Activation) Parent() interpreter.Activation { return nil }
