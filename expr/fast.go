package expr

import (
	"math"
	"strconv"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/tidwall/gjson"
)

// The fast path: an expression built only of selections of value's
// members, literals, key, partition, offset, timestamp, has(), the
// comparison, logical, arithmetic and conditional operators is also
// compiled to Go closures that work on unboxed values. It answers only
// when the plain reading of the expression succeeds; anything else (a
// missing member, a type that does not fit, an overflow, a division by
// zero) makes it punt, and the record's expression is evaluated by CEL,
// whose result and error messages are the reference
// (TestFastAgreesWithCEL). So the fast path changes speed, never results.

type kind uint8

const (
	kPunt kind = iota // not answered here: ask CEL
	kNull
	kBool
	kInt
	kDouble
	kString
	kObject // a JSON object's raw text
)

// val is an unboxed value of the fast path.
type val struct {
	k kind
	b bool
	i int64
	f float64
	s string // a string, or an object's raw text
}

type fastFn func(a *Activation) val

// compileFast returns the fast path of e, or nil when e is outside it.
func compileFast(e celast.Expr) fastFn {
	switch e.Kind() {
	case celast.LiteralKind:
		var c val
		switch v := e.AsLiteral().(type) {
		case types.Bool:
			c = val{k: kBool, b: bool(v)}
		case types.Int:
			c = val{k: kInt, i: int64(v)}
		case types.Double:
			c = val{k: kDouble, f: float64(v)}
		case types.String:
			c = val{k: kString, s: string(v)}
		case types.Null:
			c = val{k: kNull}
		default:
			return nil
		}
		return func(*Activation) val { return c }
	case celast.IdentKind:
		switch e.AsIdent() {
		case "key":
			return func(a *Activation) val {
				if a.keyNull {
					return val{k: kNull}
				}
				return val{k: kString, s: bytesString(a.key)}
			}
		case "partition":
			return func(a *Activation) val { return val{k: kInt, i: a.partition} }
		case "offset":
			return func(a *Activation) val { return val{k: kInt, i: a.offset} }
		case "timestamp":
			return func(a *Activation) val { return val{k: kInt, i: a.timestamp} }
		}
		return nil
	case celast.SelectKind:
		return compileSelect(e.AsSelect())
	case celast.CallKind:
		return compileCall(e.AsCall())
	}
	return nil
}

// compileSelect: value.NAME (the decoder's found members first), or
// X.NAME of an object X; with has(), whether the member exists.
func compileSelect(sel celast.SelectExpr) fastFn {
	name := sel.FieldName()
	path := gjson.Escape(name)
	test := sel.IsTestOnly()
	if op := sel.Operand(); op.Kind() == celast.IdentKind && op.AsIdent() == "value" {
		return func(a *Activation) val {
			o := &a.value
			if len(o.raw) == 0 || o.raw[0] != '{' {
				return val{}
			}
			var r *gjson.Result
			var g gjson.Result
			if i := o.foundIndex(name); i >= 0 {
				r = &o.found.Results[i]
			} else {
				g = gjson.Get(o.raw, path)
				r = &g
			}
			return selected(r, test)
		}
	}
	inner := compileFast(sel.Operand())
	if inner == nil {
		return nil
	}
	return func(a *Activation) val {
		o := inner(a)
		if o.k != kObject {
			return val{}
		}
		g := gjson.Get(o.s, path)
		return selected(&g, test)
	}
}

// selected is the value of a selection that found r (has(): whether it
// exists).
func selected(r *gjson.Result, test bool) val {
	switch {
	case test:
		return val{k: kBool, b: r.Exists()}
	case !r.Exists():
		return val{}
	}
	return fromJSON(r)
}

// fromJSON is CEL's JSON mapping of r, unboxed; arrays punt.
func fromJSON(r *gjson.Result) val {
	switch r.Type {
	case gjson.String:
		return val{k: kString, s: r.Str}
	case gjson.Number:
		return val{k: kDouble, f: r.Num}
	case gjson.True:
		return val{k: kBool, b: true}
	case gjson.False:
		return val{k: kBool}
	case gjson.Null:
		return val{k: kNull}
	case gjson.JSON:
		if len(r.Raw) > 0 && r.Raw[0] == '{' {
			return val{k: kObject, s: r.Raw}
		}
	}
	return val{}
}

func compileCall(c celast.CallExpr) fastFn {
	if c.IsMemberFunction() {
		return nil
	}
	args := make([]fastFn, len(c.Args()))
	for i, arg := range c.Args() {
		if args[i] = compileFast(arg); args[i] == nil {
			return nil
		}
	}
	fn := c.FunctionName()
	switch len(args) {
	case 1:
		x := args[0]
		switch fn {
		case operators.LogicalNot:
			return func(a *Activation) val {
				v := x(a)
				if v.k != kBool {
					return val{}
				}
				v.b = !v.b
				return v
			}
		case operators.Negate:
			return func(a *Activation) val {
				v := x(a)
				switch {
				case v.k == kDouble:
					v.f = -v.f
				case v.k == kInt && v.i != math.MinInt64:
					v.i = -v.i
				default:
					return val{}
				}
				return v
			}
		}
	case 2:
		l, r := args[0], args[1]
		switch fn {
		case operators.LogicalAnd, operators.LogicalOr:
			// CEL: false && error is false, in either order; true ||
			// error is true likewise. Anything else that is not two
			// bools punts.
			short := fn == operators.LogicalOr
			return func(a *Activation) val {
				x := l(a)
				if x.k == kBool && x.b == short {
					return x
				}
				y := r(a)
				if y.k == kBool && y.b == short {
					return y
				}
				if x.k != kBool || y.k != kBool {
					return val{}
				}
				return y
			}
		case operators.Equals, operators.NotEquals, operators.Less, operators.LessEquals,
			operators.Greater, operators.GreaterEquals:
			cmp := comparer(fn)
			return func(a *Activation) val { return cmp(l(a), r(a)) }
		case operators.Add, operators.Subtract, operators.Multiply, operators.Divide:
			op := arith(fn)
			return func(a *Activation) val { return op(l(a), r(a)) }
		}
	case 3:
		if fn == operators.Conditional {
			cond, t, f := args[0], args[1], args[2]
			return func(a *Activation) val {
				c := cond(a)
				switch {
				case c.k != kBool:
					return val{}
				case c.b:
					return t(a)
				}
				return f(a)
			}
		}
	}
	return nil
}

// number reads an int or double as a float64 for comparisons: CEL
// compares ints and doubles by value (an int beyond 2^53 punts, where
// the float64 would not be exact).
func number(v val) (float64, bool) {
	switch v.k {
	case kDouble:
		return v.f, true
	case kInt:
		if v.i > -(1<<53) && v.i < 1<<53 {
			return float64(v.i), true
		}
	}
	return 0, false
}

// comparer is a comparison operator over two numbers, two strings, two
// bools (==, != only) or two nulls (==, != only); other pairs punt. NaN
// punts too.
func comparer(fn string) func(x, y val) val {
	// The operator's test of the comparison c, chosen once: a switch on
	// fn's name per record is a string comparison or more.
	var holds func(c int) bool
	switch fn {
	case operators.Equals:
		holds = func(c int) bool { return c == 0 }
	case operators.NotEquals:
		holds = func(c int) bool { return c != 0 }
	case operators.Less:
		holds = func(c int) bool { return c < 0 }
	case operators.LessEquals:
		holds = func(c int) bool { return c <= 0 }
	case operators.Greater:
		holds = func(c int) bool { return c > 0 }
	default:
		holds = func(c int) bool { return c >= 0 }
	}
	equality := fn == operators.Equals || fn == operators.NotEquals
	return func(x, y val) val {
		var c int
		switch {
		case x.k == kString && y.k == kString:
			switch {
			case x.s < y.s:
				c = -1
			case x.s > y.s:
				c = 1
			}
		case (x.k == kBool && y.k == kBool) || (x.k == kNull && y.k == kNull):
			if !equality {
				return val{}
			}
			if x.b != y.b {
				c = 1
			}
		default:
			fx, ok1 := number(x)
			fy, ok2 := number(y)
			if !ok1 || !ok2 || math.IsNaN(fx) || math.IsNaN(fy) {
				return val{}
			}
			switch {
			case fx < fy:
				c = -1
			case fx > fy:
				c = 1
			}
		}
		return val{k: kBool, b: holds(c)}
	}
}

// arith is an arithmetic operator over two doubles, two ints (without
// overflow or division by zero) or, for +, two strings; other pairs punt.
func arith(fn string) func(x, y val) val {
	return func(x, y val) val {
		switch {
		case x.k == kDouble && y.k == kDouble:
			switch fn {
			case operators.Add:
				return val{k: kDouble, f: x.f + y.f}
			case operators.Subtract:
				return val{k: kDouble, f: x.f - y.f}
			case operators.Multiply:
				return val{k: kDouble, f: x.f * y.f}
			default:
				return val{k: kDouble, f: x.f / y.f}
			}
		case x.k == kInt && y.k == kInt:
			r, ok := intArith(fn, x.i, y.i)
			if !ok {
				return val{}
			}
			return val{k: kInt, i: r}
		case x.k == kString && y.k == kString && fn == operators.Add:
			return val{k: kString, s: x.s + y.s}
		}
		return val{}
	}
}

// text is v as Program.Text gives it; ok is false for a punt.
func (v *val) text() (string, bool) {
	switch v.k {
	case kString:
		return v.s, true
	case kBool:
		return strconv.FormatBool(v.b), true
	case kInt:
		return strconv.FormatInt(v.i, 10), true
	case kDouble:
		if math.IsInf(v.f, 0) || math.IsNaN(v.f) {
			return "", false
		}
		return strconv.FormatFloat(v.f, 'g', -1, 64), true
	case kNull:
		return "null", true
	case kObject:
		return compact(v.s), true
	}
	return "", false
}

// refVal boxes v as CEL would have given it (for tests).
func (v *val) refVal() ref.Val {
	switch v.k {
	case kNull:
		return types.NullValue
	case kBool:
		return types.Bool(v.b)
	case kInt:
		return types.Int(v.i)
	case kDouble:
		return types.Double(v.f)
	case kString:
		return types.String(v.s)
	case kObject:
		return &object{raw: v.s}
	}
	return nil
}

// intArith is CEL's int arithmetic; ok is false where CEL errs (overflow,
// division by zero).
func intArith(fn string, x, y int64) (r int64, ok bool) {
	switch fn {
	case operators.Add:
		r = x + y
		return r, !(x > 0 && y > 0 && r < 0 || x < 0 && y < 0 && r >= 0)
	case operators.Subtract:
		r = x - y
		return r, !(x >= 0 && y < 0 && r < 0 || x < 0 && y > 0 && r >= 0)
	case operators.Multiply:
		if x == 0 || y == 0 {
			return 0, true
		}
		if x == -1 && y == math.MinInt64 || y == -1 && x == math.MinInt64 {
			return 0, false
		}
		r = x * y
		return r, r/y == x
	default:
		if y == 0 || x == math.MinInt64 && y == -1 {
			return 0, false
		}
		return x / y, true
	}
}
