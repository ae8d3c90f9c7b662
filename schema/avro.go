package schema

import (
	"encoding/binary"
	"errors"
	"math"
	"math/big"
	"slices"
	"strconv"
	"time"
	"unsafe"

	"github.com/hamba/avro/v2"

	"github.com/windowd/windowd/codec"
)

// The Avro binary encoding is read here, straight from the payload, by a
// program compiled from the writer's schema (parsed by hamba/avro): a tree
// of functions, one per schema node, each reading its value and writing
// its JSON. Reading in place keeps strings and bytes from being copied, as
// a generic decoder into Go values would (docs/PERFORMANCE.md, Input
// formats).

// maxAvroDepth bounds the nesting of records, arrays, maps and unions in
// one value (recursive schemas): the depth JSON values may have.
const maxAvroDepth = 10_000

// freeItems is how many array or map items taking no bytes (of type null,
// or empty records) one value may hold beyond its length in bytes: without
// a bound, a block count of 2^62 null items would be a loop that never
// ends.
const freeItems = 4096

// avroReader reads one payload.
type avroReader struct {
	buf   []byte
	pos   int
	err   error
	depth int
	items int // array and map items read so far
	ts    *Instant
}

var (
	errShort    = errors.New("value is cut short")
	errVarint   = errors.New("bad variable-length integer")
	errTooDeep  = errors.New("nested more than 10000 levels deep")
	errTooMany  = errors.New("more array or map items than the value has bytes")
	errNegative = errors.New("negative length")
)

func (r *avroReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.pos = len(r.buf) // every later read fails at once
}

// long reads a zigzag varint.
func (r *avroReader) long() int64 {
	v, k := binary.Varint(r.buf[r.pos:])
	if k <= 0 {
		if k == 0 {
			r.fail(errShort)
		} else {
			r.fail(errVarint)
		}
		return 0
	}
	r.pos += k
	return v
}

// next returns the next n bytes, a view of the payload.
func (r *avroReader) next(n int) []byte {
	if n > len(r.buf)-r.pos {
		r.fail(errShort)
		return nil
	}
	b := r.buf[r.pos : r.pos+n]
	r.pos += n
	return b
}

// bytes reads a length-prefixed byte string.
func (r *avroReader) bytes() []byte {
	n := r.long()
	if n < 0 {
		r.fail(errNegative)
		return nil
	}
	if n > int64(len(r.buf)-r.pos) {
		r.fail(errShort)
		return nil
	}
	return r.next(int(n))
}

// avroOp reads one value of its schema node and appends its JSON.
type avroOp func(r *avroReader, b []byte) []byte

// avroProgram is a compiled Avro schema. Unlike a Protobuf program it is
// used by one Decoder only, so its reader is reused.
type avroProgram struct {
	op avroOp
	r  avroReader
}

func (p *avroProgram) appendJSON(dst, payload []byte, ts *Instant) ([]byte, error) {
	p.r = avroReader{buf: payload, ts: ts}
	r := &p.r
	out := p.op(r, dst)
	p.r.buf, p.r.ts = nil, nil
	if r.err != nil {
		return dst, r.err
	}
	if r.pos != len(payload) {
		return dst, errors.New(strconv.Itoa(len(payload)-r.pos) + " bytes left after the value")
	}
	return out, nil
}

// newAvroProgram compiles s. tsPath is the pipeline's timestamp field: a
// timestamp logical type there sets the record's Instant.
// keep says which fields of the top record are written (nil: all); the
// others are read past without writing them.
func newAvroProgram(s avro.Schema, tsPath []string, keep func(string) bool) (program, error) {
	c := &avroCompiler{tsPath: tsPath, keep: keep, named: map[string]*avroOp{}, skipped: map[string]*avroOp{}}
	op, err := c.compile(s, []string{})
	if err != nil {
		return nil, err
	}
	if s.Type() != avro.Record && !(s.Type() == avro.Ref && s.(*avro.RefSchema).Schema().Type() == avro.Record) {
		return nil, errors.New("the schema is a " + string(s.Type()) + ", not a record: windowd reads records (objects)")
	}
	return &avroProgram{op: op}, nil
}

type avroCompiler struct {
	tsPath []string
	keep   func(string) bool // the top record's fields to write; nil: all
	top    bool              // the top record is compiled
	// named: the op of each record compiled so far, by full name (and
	// path, on the timestamp's route), so that a recursive schema refers
	// to its record's op instead of compiling it forever.
	named   map[string]*avroOp
	skipped map[string]*avroOp // the same for skip
}

// compile returns the op of s at path (the field names from the top
// record; nil off the route to the timestamp field, where paths do not
// matter).
func (c *avroCompiler) compile(s avro.Schema, path []string) (avroOp, error) {
	if path != nil && (len(path) > len(c.tsPath) || !slices.Equal(path, c.tsPath[:len(path)])) {
		path = nil
	}
	onTS := path != nil && len(path) == len(c.tsPath) && len(path) > 0
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		if op := c.logical(s, ls.Logical(), onTS); op != nil {
			return op, nil
		}
	}
	switch s := s.(type) {
	case *avro.NullSchema:
		return func(r *avroReader, b []byte) []byte { return append(b, "null"...) }, nil
	case *avro.PrimitiveSchema:
		return primitive(s.Type()), nil
	case *avro.RecordSchema:
		return c.record(s, path)
	case *avro.RefSchema:
		return c.compile(s.Schema(), path)
	case *avro.EnumSchema:
		symbols := make([][]byte, len(s.Symbols()))
		for i, sym := range s.Symbols() {
			symbols[i] = codec.AppendJSONString(nil, sym)
		}
		return func(r *avroReader, b []byte) []byte {
			i := r.long()
			if i < 0 || i >= int64(len(symbols)) {
				r.fail(errors.New("enum index " + strconv.FormatInt(i, 10) + " out of range"))
				return b
			}
			return append(b, symbols[i]...)
		}, nil
	case *avro.ArraySchema:
		item, err := c.compile(s.Items(), nil)
		if err != nil {
			return nil, err
		}
		return blocks('[', ']', func(r *avroReader, b []byte) []byte { return item(r, b) }), nil
	case *avro.MapSchema:
		value, err := c.compile(s.Values(), nil)
		if err != nil {
			return nil, err
		}
		return blocks('{', '}', func(r *avroReader, b []byte) []byte {
			b = appendJSONBytes(b, r.bytes())
			b = append(b, ':')
			return value(r, b)
		}), nil
	case *avro.UnionSchema:
		branches := make([]avroOp, len(s.Types()))
		for i, t := range s.Types() {
			op, err := c.compile(t, path)
			if err != nil {
				return nil, err
			}
			branches[i] = op
		}
		return func(r *avroReader, b []byte) []byte {
			i := r.long()
			if i < 0 || i >= int64(len(branches)) {
				r.fail(errors.New("union branch " + strconv.FormatInt(i, 10) + " out of range"))
				return b
			}
			return branches[i](r, b)
		}, nil
	case *avro.FixedSchema:
		n := s.Size()
		return func(r *avroReader, b []byte) []byte { return appendBase64(b, r.next(n)) }, nil
	}
	return nil, errors.New("unsupported schema type " + string(s.Type()))
}

// record compiles a record: its fields in order, as an object.
func (c *avroCompiler) record(s *avro.RecordSchema, path []string) (avroOp, error) {
	key := s.FullName()
	if path != nil {
		key += "\x00" + string(appendPath(nil, path))
	}
	if op, ok := c.named[key]; ok {
		return func(r *avroReader, b []byte) []byte { return (*op)(r, b) }, nil
	}
	self := new(avroOp)
	c.named[key] = self
	keep := c.keep
	if c.top {
		keep = nil // only the top record's fields are chosen
	}
	c.top = true
	fields := s.Fields()
	names := make([][]byte, len(fields))
	ops := make([]avroOp, len(fields))
	written := 0
	for i, f := range fields {
		if keep != nil && !keep(f.Name()) {
			op, err := c.skip(f.Type())
			if err != nil {
				return nil, err
			}
			ops[i] = op
			continue
		}
		name := codec.AppendJSONString(nil, f.Name())
		if written > 0 {
			name = append([]byte{','}, name...)
		}
		written++
		names[i] = append(name, ':')
		var sub []string
		if path != nil {
			sub = append(slices.Clip(path), f.Name())
		}
		op, err := c.compile(f.Type(), sub)
		if err != nil {
			return nil, err
		}
		ops[i] = op
	}
	*self = fieldsOp(ops, names, true)
	return *self, nil
}

// fieldsOp reads a record's fields with ops, writing each after its
// "name": (nil for a skipped field), in braces when object is set.
func fieldsOp(ops []avroOp, names [][]byte, object bool) avroOp {
	return func(r *avroReader, b []byte) []byte {
		if r.depth++; r.depth > maxAvroDepth {
			r.fail(errTooDeep)
			return b
		}
		if object {
			b = append(b, '{')
		}
		for i, op := range ops {
			b = append(b, names[i]...)
			b = op(r, b)
		}
		r.depth--
		if object {
			b = append(b, '}')
		}
		return b
	}
}

// skip returns an op that reads a value of s and writes nothing: a field
// no lookup needs costs no formatting.
func (c *avroCompiler) skip(s avro.Schema) (avroOp, error) {
	switch s := s.(type) {
	case *avro.NullSchema:
		return func(_ *avroReader, b []byte) []byte { return b }, nil
	case *avro.PrimitiveSchema:
		switch s.Type() {
		case avro.Boolean:
			return func(r *avroReader, b []byte) []byte { r.next(1); return b }, nil
		case avro.Int, avro.Long:
			return func(r *avroReader, b []byte) []byte { r.long(); return b }, nil
		case avro.Float:
			return func(r *avroReader, b []byte) []byte { r.next(4); return b }, nil
		case avro.Double:
			return func(r *avroReader, b []byte) []byte { r.next(8); return b }, nil
		default: // bytes, string
			return func(r *avroReader, b []byte) []byte { r.bytes(); return b }, nil
		}
	case *avro.FixedSchema:
		n := s.Size()
		return func(r *avroReader, b []byte) []byte { r.next(n); return b }, nil
	case *avro.EnumSchema:
		return func(r *avroReader, b []byte) []byte { r.long(); return b }, nil
	case *avro.RefSchema:
		return c.skip(s.Schema())
	case *avro.RecordSchema:
		if op, ok := c.skipped[s.FullName()]; ok {
			return func(r *avroReader, b []byte) []byte { return (*op)(r, b) }, nil
		}
		self := new(avroOp)
		c.skipped[s.FullName()] = self
		ops := make([]avroOp, len(s.Fields()))
		for i, f := range s.Fields() {
			op, err := c.skip(f.Type())
			if err != nil {
				return nil, err
			}
			ops[i] = op
		}
		*self = fieldsOp(ops, make([][]byte, len(ops)), false)
		return *self, nil
	}
	// Unions, arrays and maps: written, then cut off again.
	op, err := c.compile(s, nil)
	if err != nil {
		return nil, err
	}
	return func(r *avroReader, b []byte) []byte { n := len(b); return op(r, b)[:n] }, nil
}

func appendPath(b []byte, path []string) []byte {
	for i, p := range path {
		if i > 0 {
			b = append(b, '.')
		}
		b = append(b, p...)
	}
	return b
}

// blocks reads an array's or a map's blocks: a count (negative: then its
// size in bytes), that many items, until a count of 0.
func blocks(open, close byte, item avroOp) avroOp {
	return func(r *avroReader, b []byte) []byte {
		if r.depth++; r.depth > maxAvroDepth {
			r.fail(errTooDeep)
			return b
		}
		b = append(b, open)
		first := true
		for r.err == nil {
			n := r.long()
			if n == 0 {
				break
			}
			if n < 0 {
				if n == math.MinInt64 {
					r.fail(errVarint)
					break
				}
				n = -n
				r.long() // the block's size in bytes: not needed
			}
			if r.items += int(min(n, math.MaxInt32)); r.items > len(r.buf)+freeItems {
				r.fail(errTooMany)
				break
			}
			for ; n > 0 && r.err == nil; n-- {
				if !first {
					b = append(b, ',')
				}
				first = false
				b = item(r, b)
			}
		}
		r.depth--
		return append(b, close)
	}
}

// primitive returns the op of a primitive type.
func primitive(t avro.Type) avroOp {
	switch t {
	case avro.Boolean:
		return func(r *avroReader, b []byte) []byte {
			v := r.next(1)
			switch {
			case v == nil:
				return b
			case v[0] == 0:
				return append(b, "false"...)
			case v[0] == 1:
				return append(b, "true"...)
			}
			r.fail(errors.New("boolean byte " + strconv.Itoa(int(v[0]))))
			return b
		}
	case avro.Int:
		return func(r *avroReader, b []byte) []byte {
			v := r.long()
			if v < math.MinInt32 || v > math.MaxInt32 {
				r.fail(errors.New("int out of range"))
			}
			return strconv.AppendInt(b, v, 10)
		}
	case avro.Long:
		return func(r *avroReader, b []byte) []byte { return strconv.AppendInt(b, r.long(), 10) }
	case avro.Float:
		return func(r *avroReader, b []byte) []byte {
			v := r.next(4)
			if v == nil {
				return b
			}
			return appendFloat(b, float64(math.Float32frombits(binary.LittleEndian.Uint32(v))), 32)
		}
	case avro.Double:
		return func(r *avroReader, b []byte) []byte {
			v := r.next(8)
			if v == nil {
				return b
			}
			return appendFloat(b, math.Float64frombits(binary.LittleEndian.Uint64(v)), 64)
		}
	case avro.Bytes:
		return func(r *avroReader, b []byte) []byte { return appendBase64(b, r.bytes()) }
	default: // avro.String
		return func(r *avroReader, b []byte) []byte { return appendJSONBytes(b, r.bytes()) }
	}
}

// appendJSONBytes appends the string v as a JSON string.
func appendJSONBytes(b, v []byte) []byte {
	return codec.AppendJSONString(b, unsafe.String(unsafe.SliceData(v), len(v)))
}

// logical returns the op of a logical type (nil: read the underlying type
// as it is). onTS: the value is the pipeline's timestamp field.
func (c *avroCompiler) logical(s avro.Schema, l avro.LogicalSchema, onTS bool) avroOp {
	switch l.Type() {
	case avro.TimestampMillis:
		return func(r *avroReader, b []byte) []byte {
			v := r.long()
			if onTS && r.err == nil {
				*r.ts = Instant{MS: v, OK: true}
			}
			return strconv.AppendInt(b, v, 10)
		}
	case avro.TimestampMicros:
		return func(r *avroReader, b []byte) []byte {
			v := r.long()
			if onTS && r.err == nil {
				*r.ts = Instant{MS: floorDiv(v, 1000), OK: true}
			}
			return appendMillisDecimal(b, v, 3)
		}
	case avro.LocalTimestampMicros, avro.TimeMicros:
		return func(r *avroReader, b []byte) []byte { return appendMillisDecimal(b, r.long(), 3) }
	case avro.Date:
		return func(r *avroReader, b []byte) []byte {
			days := r.long()
			if days < -719162 || days > 2932896 { // years 1 to 9999
				r.fail(errors.New("date out of range (years 1 to 9999)"))
				return b
			}
			b = append(b, '"')
			b = time.Unix(days*86400, 0).UTC().AppendFormat(b, time.DateOnly)
			return append(b, '"')
		}
	case avro.Decimal:
		scale := l.(*avro.DecimalLogicalSchema).Scale()
		if f, ok := s.(*avro.FixedSchema); ok {
			n := f.Size()
			return func(r *avroReader, b []byte) []byte { return appendDecimal(b, r.next(n), scale) }
		}
		return func(r *avroReader, b []byte) []byte { return appendDecimal(b, r.bytes(), scale) }
	case avro.Duration:
		return func(r *avroReader, b []byte) []byte {
			v := r.next(12)
			if v == nil {
				return b
			}
			b = append(b, `{"months":`...)
			b = strconv.AppendUint(b, uint64(binary.LittleEndian.Uint32(v)), 10)
			b = append(b, `,"days":`...)
			b = strconv.AppendUint(b, uint64(binary.LittleEndian.Uint32(v[4:])), 10)
			b = append(b, `,"milliseconds":`...)
			b = strconv.AppendUint(b, uint64(binary.LittleEndian.Uint32(v[8:])), 10)
			return append(b, '}')
		}
	}
	return nil // uuid, time-millis, local-timestamp-millis: the string or number itself
}

// appendDecimal appends the big-endian two's-complement unscaled value v
// with scale digits after the point as an exact JSON number.
func appendDecimal(b, v []byte, scale int) []byte {
	var digits []byte
	neg := len(v) > 0 && v[0]&0x80 != 0
	if len(v) <= 8 {
		var u int64
		for _, x := range v {
			u = u<<8 | int64(x)
		}
		if neg && len(v) < 8 {
			u -= 1 << (8 * len(v))
		}
		if neg {
			digits = strconv.AppendUint(nil, uint64(-u), 10) // -MinInt64 wraps to its magnitude
		} else {
			digits = strconv.AppendInt(nil, u, 10)
		}
	} else {
		n := new(big.Int).SetBytes(v)
		if neg {
			n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(v))))
			n.Neg(n)
		}
		digits = n.Append(nil, 10)
	}
	if neg {
		b = append(b, '-')
	}
	if scale <= 0 {
		b = append(b, digits...)
		if len(digits) > 1 || digits[0] != '0' {
			for range -scale {
				b = append(b, '0')
			}
		}
		return b
	}
	if len(digits) <= scale {
		b = append(b, "0."...)
		for range scale - len(digits) {
			b = append(b, '0')
		}
		return append(b, digits...)
	}
	b = append(b, digits[:len(digits)-scale]...)
	b = append(b, '.')
	return append(b, digits[len(digits)-scale:]...)
}
