package expr

import (
	"reflect"
	"unsafe"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/tidwall/gjson"
)

// object is a JSON object read lazily from its raw text: selecting a
// member finds it in the text and converts only that member. It is a CEL
// map(string, dyn), as CEL's JSON mapping makes an object.
type object struct {
	raw   string
	found *Found // the top-level value's members found by the decoder; nil otherwise
}

var _ traits.Mapper = (*object)(nil)

// fromResult converts one JSON value with CEL's JSON mapping: numbers are
// doubles, objects lazy maps, arrays lists.
func fromResult(r gjson.Result) ref.Val {
	switch r.Type {
	case gjson.String:
		return types.String(r.Str)
	case gjson.Number:
		return types.Double(r.Num)
	case gjson.True:
		return types.True
	case gjson.False:
		return types.False
	case gjson.JSON:
		if len(r.Raw) > 0 && r.Raw[0] == '{' {
			return &object{raw: r.Raw}
		}
		return types.DefaultTypeAdapter.NativeToValue(r.Value())
	}
	return types.NullValue
}

// materialize is the whole object as a CEL map.
func (o *object) materialize() ref.Val {
	return types.DefaultTypeAdapter.NativeToValue(gjson.Parse(o.raw).Value())
}

// ConvertToNative implements ref.Val.
func (o *object) ConvertToNative(t reflect.Type) (any, error) {
	return o.materialize().ConvertToNative(t)
}

// ConvertToType implements ref.Val.
func (o *object) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case types.MapType:
		return o
	case types.TypeType:
		return types.MapType
	}
	return types.NewErr("type conversion error from map to '%s'", t)
}

// Equal implements ref.Val.
func (o *object) Equal(other ref.Val) ref.Val {
	if p, ok := other.(*object); ok {
		other = p.materialize()
	}
	return o.materialize().Equal(other)
}

// Type implements ref.Val.
func (o *object) Type() ref.Type { return types.MapType }

// Value implements ref.Val.
func (o *object) Value() any { return gjson.Parse(o.raw).Value() }

// Find implements traits.Mapper: the member named key, if any.
func (o *object) Find(key ref.Val) (ref.Val, bool) {
	s, ok := key.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(key), false
	}
	if i := o.foundIndex(string(s)); i >= 0 {
		f := o.found
		if v := f.vals[i]; v != nil {
			return v, true
		}
		if !f.Results[i].Exists() {
			return nil, false
		}
		v := fromResult(f.Results[i])
		f.vals[i] = v
		return v, true
	}
	r := gjson.Get(o.raw, gjson.Escape(string(s)))
	if !r.Exists() {
		return nil, false
	}
	return fromResult(r), true
}

// foundIndex is the index of name in o.found, or -1.
func (o *object) foundIndex(name string) int {
	if o.found == nil {
		return -1
	}
	for i, n := range o.found.Names {
		if n == name {
			return i
		}
	}
	return -1
}

// Get implements traits.Indexer.
func (o *object) Get(key ref.Val) ref.Val {
	v, ok := o.Find(key)
	if !ok {
		return types.ValOrErr(v, "no such key: %v", key)
	}
	return v
}

// Contains implements traits.Container.
func (o *object) Contains(key ref.Val) ref.Val {
	v, ok := o.Find(key)
	if !ok && v != nil {
		return v
	}
	return types.Bool(ok)
}

// Iterator implements traits.Iterable: the member names.
func (o *object) Iterator() traits.Iterator {
	var keys []string
	gjson.Parse(o.raw).ForEach(func(k, _ gjson.Result) bool {
		keys = append(keys, k.Str)
		return true
	})
	return types.NewStringList(types.DefaultTypeAdapter, keys).Iterator()
}

// Size implements traits.Sizer.
func (o *object) Size() ref.Val {
	n := 0
	gjson.Parse(o.raw).ForEach(func(_, _ gjson.Result) bool { n++; return true })
	return types.Int(n)
}

// compact is raw JSON without insignificant whitespace (AppendCompact).
func compact(raw string) string { return string(AppendCompact(nil, raw)) }

// AppendCompact appends a JSON object or array without insignificant
// whitespace, its strings as they are written.
func AppendCompact(b []byte, raw string) []byte {
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case inString:
			b = append(b, c)
			if c == '\\' && i+1 < len(raw) {
				i++
				b = append(b, raw[i])
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
			b = append(b, c)
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		default:
			b = append(b, c)
		}
	}
	return b
}

// bytesString views b as a string without copying; b must not change
// while the string is used (a record's value during its evaluation).
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
