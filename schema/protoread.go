package schema

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/windowd/windowd/codec"
)

// Protobuf payloads are read in place: the reader walks the wire bytes
// with the plan of the message type (protobuf.go) and writes each field's
// JSON straight from them, as the Avro program does, without decoding into
// a dynamicpb message first. A message whose fields come in field-number
// order, each once (a list's or map's occurrences one after another), as
// serializers write them, is read in one pass (appendInOrder); any other
// in two (appendFields): the first finds each field's occurrences, the
// second writes the fields in field-number order. Either way every wire
// type is checked, every string that must be UTF-8 is, and fields the
// pipeline does not read are read and checked but not written.
//
// The reader handles the payloads producers write. Whatever it does not
// handle it hands to the reference decoder (dynamicpb, protobuf.go), whose
// answer is then the answer: payloads that do not decode (for their exact
// error), a singular message field or a map key written twice (the
// reference merges, or keeps the last), two fields of one oneof, a map
// entry with fields other than its key and value once each, a proto2
// required field not set, nesting deeper than maxProtoDepth, message sets.
// So a value's JSON is the reference decoder's, byte for byte, whichever
// reads it (TestProtoReaderDifferential, FuzzSchemaDecode).

// maxProtoDepth bounds the nesting of messages the in-place reader
// follows; deeper values go to the reference decoder, which has the
// protobuf module's own limit.
const maxProtoDepth = 100

// errProtoReference says the in-place reader leaves a payload to the
// reference decoder. It never leaves this package's programs.
var errProtoReference = errors.New("read by the reference decoder")

// protoSlot is what the first pass found of one field of a message.
type protoSlot struct {
	count int32          // occurrences
	first int32          // offset of the first occurrence's tag
	last  int32          // offset of the last occurrence's value
	wire  protowire.Type // the last occurrence's wire type
}

// protoEntry is one entry of a map field: offsets into the bytes of the
// message holding the map.
type protoEntry struct {
	key, val int32  // offsets of the key's and the value's bytes; -1: absent
	keyLen   int32  // a string key's length
	num      uint64 // an integer or bool key, as protoScalar decodes it
}

// protoReader holds the scratch of one program's reads: the slots and map
// entries of the messages being read, as stacks (a nested message pushes
// its own above its parent's).
type protoReader struct {
	slots   []protoSlot
	entries []protoEntry
	depth   int
	// skip: the field being read is not written (keep), so its scalars
	// are checked, not formatted; what is written of it is cut off.
	skip bool
	// The pipeline's timestamp field: tsPath is its fields' indexes from
	// the top message (nil: none); the message at depth tsOn is on the
	// path; ts is set when the Timestamp at its end is read.
	tsPath []int32
	tsOn   int
	ts     Instant
}

// protoReadPlan completes p's plan with what the in-place reader needs.
func protoReadPlan(p *protoMessage) {
	md := p.desc
	if ms, ok := md.(interface{ IsMessageSet() bool }); ok && ms.IsMessageSet() {
		p.messageSet = true
	}
	maxNum := protowire.Number(0)
	if n := len(p.fields); n > 0 {
		maxNum = p.fields[n-1].fd.Number()
	}
	if maxNum <= 1024 {
		p.byNum = make([]int32, maxNum+1)
		for i := range p.byNum {
			p.byNum[i] = -1
		}
	}
	oneofIndex := map[protoreflect.FullName]int{}
	for i := range p.fields {
		f := &p.fields[i]
		fd := f.fd
		if p.byNum != nil {
			p.byNum[fd.Number()] = int32(i)
		}
		f.presence = fd.HasPresence()
		f.wire = protoWireType(fd.Kind())
		if f.isMap {
			f.wire = protowire.BytesType
		}
		f.packable = f.list && (f.wire == protowire.VarintType || f.wire == protowire.Fixed32Type || f.wire == protowire.Fixed64Type)
		f.repeated = f.list || f.isMap
		f.single = !f.repeated && f.val.kind == pkMessage
		f.scalar = !f.repeated && f.val.kind != pkMessage
		f.checkUTF8 = !f.repeated && f.val.utf8
		f.required = fd.Cardinality() == protoreflect.Required
		p.required = p.required || f.required
		f.oneof = -1
		if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() {
			j, ok := oneofIndex[o.FullName()]
			if !ok {
				j = len(p.oneofs)
				oneofIndex[o.FullName()] = j
				p.oneofs = append(p.oneofs, nil)
			}
			if j < 128 {
				f.oneof = int8(j)
			}
			p.oneofs[j] = append(p.oneofs[j], int32(i))
		}
		p.scan = append(p.scan, f.protoScan)
	}
}

// protoEnforceUTF8 says whether a string field's value must be valid
// UTF-8, as the protobuf module decides it (proto3, or an editions file's
// utf8_validation feature).
func protoEnforceUTF8(fd protoreflect.FieldDescriptor) bool {
	if fd.Syntax() == protoreflect.Editions {
		if f, ok := fd.(interface{ EnforceUTF8() bool }); ok {
			return f.EnforceUTF8()
		}
	}
	return fd.Syntax() == protoreflect.Proto3
}

// index is the index in p.fields of field number num, or -1.
func (p *protoMessage) index(num protowire.Number) int {
	if uint(num) < uint(len(p.byNum)) {
		return int(p.byNum[num])
	}
	return p.search(num)
}

// search is index past byNum's end.
func (p *protoMessage) search(num protowire.Number) int {
	if p.byNum != nil {
		return -1
	}
	i, ok := slices.BinarySearchFunc(p.fields, num, func(f protoField, n protowire.Number) int {
		return cmpInt(int64(f.fd.Number()), int64(n))
	})
	if !ok {
		return -1
	}
	return i
}

// appendMessage appends the JSON of data, the bytes of a message of type
// p. scan is p.scan, or (for the top message) a copy that marks the
// fields not written (skip), which are read and checked all the same.
func (r *protoReader) appendMessage(b, data []byte, p *protoMessage, scan []protoScan) ([]byte, error) {
	if p.messageSet || r.depth >= maxProtoDepth || len(data) > math.MaxInt32 {
		return b, errProtoReference
	}
	if (p.wkt == wktTimestamp || p.wkt == wktDuration) && len(p.fields) == 2 {
		return r.appendTime(b, data, p)
	}
	r.depth++
	if p.wkt == wktNone {
		start := len(b)
		out, err := r.appendInOrder(b, data, p, scan)
		if err != errProtoOutOfOrder {
			r.depth--
			return out, err
		}
		b = out[:start]
	}
	base := len(r.slots)
	r.slots = slices.Grow(r.slots, len(p.fields))[:base+len(p.fields)]
	clear(r.slots[base:])
	b, err := r.appendFields(b, data, p, scan, base)
	r.slots = r.slots[:base]
	r.depth--
	return b, err
}

// errProtoOutOfOrder says a message's fields are not in field-number
// order, each once (lists and maps: in one run): appendInOrder leaves it
// to appendFields.
var errProtoOutOfOrder = errors.New("fields out of order")

// appendInOrder is appendFields in one pass, for the usual payload whose
// fields come in field-number order (as serializers write them), a list's
// or map's occurrences one after the other: each field is written as it
// is read, and absent ones in between as their defaults.
func (r *protoReader) appendInOrder(b, data []byte, p *protoMessage, scan []protoScan) ([]byte, error) {
	pathField := -1 // the field on the timestamp's path
	if r.tsOn == r.depth && r.depth <= len(r.tsPath) {
		pathField = int(r.tsPath[r.depth-1])
	}
	if len(p.oneofs) > 64 {
		return b, errProtoOutOfOrder // more than oneofs has bits
	}
	var oneofs uint64 // the oneofs with a field set
	var high uint64   // the high bits of the strings that must be UTF-8
	b = append(b, '{')
	first := true
	next := 0 // the fields before it are written
	for off := 0; off <= len(data); {
		i := len(scan) // at the end: write the absent fields left
		var num protowire.Number
		var wire protowire.Type
		var start, m int
		if off < len(data) {
			// protoTag and protoFieldLen, with their usual cases inline.
			if c := data[off]; c >= 8 && c < 0x80 {
				num, wire, start = protowire.Number(c>>3), protowire.Type(c&7), off+1
			} else {
				var n int
				num, wire, n = protowire.ConsumeTag(data[off:])
				if n < 0 || num > protowire.MaxValidNumber {
					return b, errProtoReference
				}
				start = off + n
			}
			switch {
			case wire == protowire.BytesType && start < len(data) && data[start] < 0x80:
				if m = 1 + int(data[start]); m > len(data)-start {
					return b, errProtoReference
				}
			case wire == protowire.Fixed64Type && len(data)-start >= 8:
				m = 8
			default:
				if m = protoFieldLen(num, wire, data[start:]); m < 0 {
					return b, errProtoReference
				}
			}
			if i = p.index(num); i < 0 {
				off = start + m // unknown
				continue
			}
			if i < next {
				return b, errProtoOutOfOrder
			}
		}
		for j := next; j < i; j++ { // absent fields
			sc := &scan[j]
			if sc.presence || sc.skip {
				if sc.required {
					return b, errProtoOutOfOrder // appendFields says whether it comes later
				}
				continue
			}
			f := &p.fields[j]
			if first {
				b = append(b, f.prefix[1:]...)
				first = false
			} else {
				b = append(b, f.prefix...)
			}
			switch {
			case f.isMap:
				b = append(b, "{}"...)
			case f.list:
				b = append(b, "[]"...)
			default:
				b = append(b, f.val.def...)
			}
		}
		if i == len(scan) {
			break
		}
		sc := &scan[i]
		if wire != sc.wire && (!sc.packable || wire != protowire.BytesType) {
			return b, errProtoReference
		}
		if sc.oneof >= 0 {
			if oneofs&(1<<sc.oneof) != 0 {
				return b, errProtoReference // the last one set wins
			}
			oneofs |= 1 << sc.oneof
		}
		// s: this field's occurrences, one after the other.
		s := protoSlot{count: 1, first: int32(off), last: int32(start), wire: wire}
		off = start + m
		if sc.repeated {
			for off < len(data) {
				num2, wire2, n := protoTag(data[off:])
				if n < 0 || num2 != num {
					break
				}
				if wire2 != sc.wire && (!sc.packable || wire2 != protowire.BytesType) {
					return b, errProtoReference
				}
				m2 := protoFieldLen(num2, wire2, data[off+n:])
				if m2 < 0 {
					return b, errProtoReference
				}
				s.count++
				off += n + m2
			}
		} else if sc.checkUTF8 {
			high |= protoHighBits(protoBytesOf(data[start : start+m]))
		}
		next = i + 1
		skip := sc.skip
		if skip && sc.scalar {
			continue // checked
		}
		var err error
		if b, err = r.appendMember(b, data, &p.fields[i], s, first, skip, i == pathField); err != nil {
			return b, err
		}
		first = first && skip
	}
	if high != 0 {
		// Not all ASCII: appendFields checks each string (strings must
		// be UTF-8 there; checking them one by one here costs more than
		// the rare second pass).
		return b, errProtoOutOfOrder
	}
	return append(b, '}'), nil
}

// appendFields is appendMessage's work, with the message's slots at base.
func (r *protoReader) appendFields(b, data []byte, p *protoMessage, scan []protoScan, base int) ([]byte, error) {
	// First pass: where each field is.
	for off := 0; off < len(data); {
		num, wire, n := protoTag(data[off:])
		if n < 0 || num > protowire.MaxValidNumber {
			return b, errProtoReference
		}
		start := off + n
		m := protoFieldLen(num, wire, data[start:])
		if m < 0 {
			return b, errProtoReference
		}
		if i := p.index(num); i >= 0 {
			f := &scan[i]
			if wire != f.wire && (!f.packable || wire != protowire.BytesType) {
				return b, errProtoReference // the reference's error
			}
			s := &r.slots[base+i]
			if s.count > 0 && f.single {
				return b, errProtoReference // merged
			}
			if f.checkUTF8 && !protoValidUTF8(protoBytesOf(data[start:start+m])) {
				return b, errProtoReference // every occurrence is checked, not only the last
			}
			if s.count == 0 {
				s.first = int32(off)
			}
			s.count++
			s.last, s.wire = int32(start), wire
		}
		off = start + m
	}
	slots := r.slots[base : base+len(p.fields)]
	if p.required {
		for i := range p.fields {
			if p.fields[i].required && slots[i].count == 0 {
				return b, errProtoReference
			}
		}
	}
	for _, members := range p.oneofs {
		set := 0
		for _, i := range members {
			if slots[i].count > 0 {
				set++
			}
		}
		if set > 1 {
			return b, errProtoReference // the last one set wins
		}
	}

	// Second pass: write them.
	switch p.wkt {
	case wktTimestamp, wktDuration: // with fields of its own besides seconds and nanos
		return b, errProtoReference
	case wktWrapper, wktStruct, wktListValue: // the value of their one field
		return r.appendField(b, data, &p.fields[0], r.slots[base])
	case wktValue:
		for i := range p.fields {
			if s := r.slots[base+i]; s.count > 0 && scan[i].oneof >= 0 {
				return r.appendField(b, data, &p.fields[i], s)
			}
		}
		return append(b, "null"...), nil
	}
	pathField := -1 // the field on the timestamp's path
	if r.tsOn == r.depth && r.depth <= len(r.tsPath) {
		pathField = int(r.tsPath[r.depth-1])
	}
	b = append(b, '{')
	first := true
	for i := range scan {
		s, sc := r.slots[base+i], &scan[i] // s: a copy, nested messages grow r.slots
		if s.count == 0 && sc.presence {
			continue
		}
		skip := sc.skip
		if skip && sc.scalar {
			continue // the first pass checked all there is to check
		}
		var err error
		if b, err = r.appendMember(b, data, &p.fields[i], s, first, skip, i == pathField); err != nil {
			return b, err
		}
		first = first && skip
	}
	return append(b, '}'), nil
}

// appendMember appends field f of data, whose occurrences s has, as an
// object member (the first one without a comma); a member not written
// (skip) is read, checked and cut off again. onPath: the field is on the
// timestamp's path.
func (r *protoReader) appendMember(b, data []byte, f *protoField, s protoSlot, first, skip, onPath bool) ([]byte, error) {
	mark := len(b)
	if first {
		b = append(b, f.prefix[1:]...)
	} else {
		b = append(b, f.prefix...)
	}
	outer := r.skip // a field of a field not written is not written either
	r.skip = outer || skip
	if onPath {
		r.tsOn++
	}
	b, err := r.appendField(b, data, f, s)
	if onPath {
		r.tsOn--
	}
	r.skip = outer
	if skip {
		b = b[:mark]
	}
	return b, err
}

// protoFieldLen is the length of the value of field num at the start of
// v, written with wire type wire; negative when v does not hold one.
func protoFieldLen(num protowire.Number, wire protowire.Type, v []byte) int {
	switch wire {
	case protowire.VarintType:
		for i := 0; i < len(v) && i < 10; i++ {
			if v[i] < 0x80 {
				if i == 9 && v[i] > 1 {
					return -1 // beyond 64 bits
				}
				return i + 1
			}
		}
		return -1
	case protowire.Fixed32Type:
		if len(v) < 4 {
			return -1
		}
		return 4
	case protowire.Fixed64Type:
		if len(v) < 8 {
			return -1
		}
		return 8
	case protowire.BytesType:
		if len(v) > 0 && v[0] < 0x80 { // a length under 128
			if int(v[0]) >= len(v) {
				return -1
			}
			return 1 + int(v[0])
		}
		_, n := protowire.ConsumeBytes(v)
		return n
	}
	return protowire.ConsumeFieldValue(num, wire, v)
}

// protoTag is protowire.ConsumeTag, with the one-byte tags of field
// numbers up to 15 read inline.
func protoTag(b []byte) (protowire.Number, protowire.Type, int) {
	if len(b) > 0 && b[0] < 0x80 && b[0] >= 8 {
		return protowire.Number(b[0] >> 3), protowire.Type(b[0] & 7), 1
	}
	return protowire.ConsumeTag(b)
}

// appendTime appends the JSON of data, a google.protobuf.Timestamp or
// Duration (p): its milliseconds. Fields other than seconds and nanos
// are left to appendFields; this only reads past unknown ones.
func (r *protoReader) appendTime(b, data []byte, p *protoMessage) ([]byte, error) {
	var sec, nanos int64
	for off := 0; off < len(data); {
		num, wire, n := protoTag(data[off:])
		if n < 0 || num > protowire.MaxValidNumber {
			return b, errProtoReference
		}
		start := off + n
		if num == 1 || num == 2 {
			if wire != protowire.VarintType {
				return b, errProtoReference
			}
			v, m := protowire.ConsumeVarint(data[start:])
			if m < 0 {
				return b, errProtoReference
			}
			if num == 1 {
				sec = int64(v)
			} else {
				nanos = int64(int32(v))
			}
			off = start + m
			continue
		}
		m := protoFieldLen(num, wire, data[start:])
		if m < 0 {
			return b, errProtoReference
		}
		if p.index(num) >= 0 {
			return b, errProtoReference // a field appendFields reads
		}
		off = start + m
	}
	if p.wkt == wktTimestamp {
		if sec < -62135596800 || sec > 253402300799 || nanos < 0 || nanos >= 1e9 {
			return b, errProtoReference
		}
		// r.depth is the parent's: this message is one level below it.
		if r.tsOn == r.depth+1 && r.depth == len(r.tsPath) {
			r.ts = Instant{MS: sec*1000 + nanos/1e6, OK: true}
		}
	} else if sec < -315576000000 || sec > 315576000000 || nanos <= -1e9 || nanos >= 1e9 ||
		sec > 0 && nanos < 0 || sec < 0 && nanos > 0 {
		return b, errProtoReference
	}
	return appendSecondsNanos(b, sec, nanos), nil
}

// appendField appends the JSON of field f of data, whose occurrences s
// has.
func (r *protoReader) appendField(b, data []byte, f *protoField, s protoSlot) ([]byte, error) {
	switch {
	case f.isMap:
		return r.appendMap(b, data, f, s)
	case f.list:
		return r.appendList(b, data, f, s)
	case s.count == 0:
		return append(b, f.val.def...), nil
	case f.checkUTF8: // checked by the first pass
		if r.skip {
			return b, nil
		}
		v, _ := protowire.ConsumeBytes(data[s.last:])
		return codec.AppendJSONString(b, unsafe.String(unsafe.SliceData(v), len(v))), nil
	}
	b, _, err := r.appendValue(b, data[s.last:], s.wire, &f.val)
	return b, err
}

// protoValidUTF8 is utf8.Valid, quicker on the short ASCII strings
// records mostly hold.
func protoValidUTF8(b []byte) bool {
	return protoHighBits(b) == 0 || utf8.Valid(b)
}

// protoHighBits is not 0 when a byte of b is not ASCII.
func protoHighBits(b []byte) uint64 {
	var high uint64
	for ; len(b) >= 8; b = b[8:] {
		high |= binary.LittleEndian.Uint64(b)
	}
	for _, c := range b {
		high |= uint64(c)
	}
	return high & 0x8080808080808080
}

// protoBytesOf is the bytes of v, a length-delimited value (a length,
// then them) that the caller has checked.
func protoBytesOf(v []byte) []byte {
	if v[0] < 0x80 {
		return v[1:]
	}
	_, n := protowire.ConsumeVarint(v)
	return v[n:]
}

// protoOccurrences walks the occurrences of one field of a message's
// bytes, which the first pass has checked.
type protoOccurrences struct {
	data []byte
	num  protowire.Number
	off  int   // the next tag
	left int32 // occurrences not yet returned
}

func newProtoOccurrences(data []byte, f *protoField, s protoSlot) protoOccurrences {
	return protoOccurrences{data: data, num: f.fd.Number(), off: int(s.first), left: s.count}
}

// next returns the offset of the next occurrence's value and its wire
// type, or ok false after the last one.
func (o *protoOccurrences) next() (start int, wire protowire.Type, ok bool) {
	for o.left > 0 {
		num, wire, n := protoTag(o.data[o.off:])
		start := o.off + n
		o.off = start + protowire.ConsumeFieldValue(num, wire, o.data[start:])
		if num == o.num {
			o.left--
			return start, wire, true
		}
	}
	return 0, 0, false
}

// appendList appends the JSON array of list field f of data.
func (r *protoReader) appendList(b, data []byte, f *protoField, s protoSlot) ([]byte, error) {
	b = append(b, '[')
	n := 0
	for o := newProtoOccurrences(data, f, s); ; {
		start, wire, ok := o.next()
		if !ok {
			break
		}
		if wire == protowire.BytesType && f.packable {
			packed, _ := protowire.ConsumeBytes(data[start:])
			for len(packed) > 0 {
				if n > 0 {
					b = append(b, ',')
				}
				var k int
				var err error
				if b, k, err = r.appendValue(b, packed, f.val.wire, &f.val); err != nil {
					return b, err
				}
				packed = packed[k:]
				n++
			}
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		var err error
		if b, _, err = r.appendValue(b, data[start:], wire, &f.val); err != nil {
			return b, err
		}
		n++
	}
	return append(b, ']'), nil
}

// appendMap appends the JSON object of map field f of data: its entries
// sorted by key (strings by their bytes, integers by value, false before
// true).
func (r *protoReader) appendMap(b, data []byte, f *protoField, s protoSlot) ([]byte, error) {
	if s.count == 0 {
		return append(b, "{}"...), nil
	}
	base := len(r.entries)
	defer func() { r.entries = r.entries[:base] }()
	for o := newProtoOccurrences(data, f, s); ; {
		start, _, ok := o.next()
		if !ok {
			break
		}
		entry, n := protowire.ConsumeBytes(data[start:])
		e, ok := r.mapEntry(entry, f, int32(start+n-len(entry)))
		if !ok {
			return b, errProtoReference
		}
		r.entries = append(r.entries, e)
	}
	entries := r.entries[base:]
	switch f.key.kind {
	case pkString:
		slices.SortFunc(entries, func(x, y protoEntry) int {
			return bytes.Compare(protoKeyBytes(data, x), protoKeyBytes(data, y))
		})
	case pkInt:
		slices.SortFunc(entries, func(x, y protoEntry) int { return cmpInt(int64(x.num), int64(y.num)) })
	default: // unsigned, bool
		slices.SortFunc(entries, func(x, y protoEntry) int { return cmpInt(x.num, y.num) })
	}
	for i := 1; i < len(entries); i++ {
		x, y := entries[i-1], entries[i]
		if x.num == y.num && (f.key.kind != pkString || bytes.Equal(protoKeyBytes(data, x), protoKeyBytes(data, y))) {
			return b, errProtoReference // the last one wins
		}
	}
	b = append(b, '{')
	for i := range len(entries) {
		e := r.entries[base+i] // r.entries may grow under nested maps
		if i > 0 {
			b = append(b, ',')
		}
		switch f.key.kind {
		case pkString:
			k := protoKeyBytes(data, e)
			b = codec.AppendJSONString(b, unsafe.String(unsafe.SliceData(k), len(k)))
		case pkInt:
			b = append(b, '"')
			b = strconv.AppendInt(b, int64(e.num), 10)
			b = append(b, '"')
		case pkUint:
			b = append(b, '"')
			b = strconv.AppendUint(b, e.num, 10)
			b = append(b, '"')
		default:
			if e.num != 0 {
				b = append(b, `"true"`...)
			} else {
				b = append(b, `"false"`...)
			}
		}
		b = append(b, ':')
		var err error
		switch {
		case e.val >= 0:
			b, _, err = r.appendValue(b, data[e.val:], f.val.wire, &f.val)
		case f.val.kind == pkMessage:
			b, err = r.appendMessage(b, nil, f.val.msg, f.val.msg.scan)
		default:
			b = append(b, f.val.def...)
		}
		if err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// protoKeyBytes is e's string key.
func protoKeyBytes(data []byte, e protoEntry) []byte {
	if e.key < 0 {
		return nil
	}
	return data[e.key : e.key+e.keyLen]
}

// mapEntry reads entry, a map entry of field f at offset at of the
// message's bytes: its key (decoded, or its string's place) and where its
// value is. ok is false for what the reference decoder reads differently:
// a field written twice or with another wire type, a field other than the
// key and the value, a string key that is not UTF-8 where that is an error.
func (r *protoReader) mapEntry(entry []byte, f *protoField, at int32) (e protoEntry, ok bool) {
	e.key, e.val = -1, -1
	for off := 0; off < len(entry); {
		num, wire, n := protowire.ConsumeTag(entry[off:])
		if n < 0 {
			return e, false
		}
		start := off + n
		m := protowire.ConsumeFieldValue(num, wire, entry[start:])
		if m < 0 {
			return e, false
		}
		switch {
		case num == 1 && wire == f.key.wire && e.key < 0:
			e.key = at + int32(start)
			if f.key.kind == pkString {
				k, kn := protowire.ConsumeBytes(entry[start:])
				if f.key.utf8 && !utf8.Valid(k) {
					return e, false
				}
				e.key, e.keyLen = at+int32(start+kn-len(k)), int32(len(k))
				break
			}
			v, n := protoScalar(entry[start:], f.key.pk)
			if n < 0 {
				return e, false
			}
			e.num = v
		case num == 2 && wire == f.val.wire && e.val < 0:
			e.val = at + int32(start)
		default:
			return e, false
		}
		off = start + m
	}
	return e, true
}

// protoScalar decodes an integer or bool value of kind k from the start of
// v, as its 64 bits (signed kinds sign-extended), and returns the bytes it
// took (negative: v does not hold one).
func protoScalar(v []byte, k protoreflect.Kind) (uint64, int) {
	switch k {
	case protoreflect.Fixed32Kind:
		x, n := protowire.ConsumeFixed32(v)
		return uint64(x), n
	case protoreflect.Sfixed32Kind:
		x, n := protowire.ConsumeFixed32(v)
		return uint64(int64(int32(x))), n
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		return protowire.ConsumeFixed64(v)
	}
	x, n := protowire.ConsumeVarint(v)
	switch k {
	case protoreflect.Int32Kind, protoreflect.EnumKind:
		x = uint64(int64(int32(x)))
	case protoreflect.Sint32Kind:
		x = uint64(int64(int32(protowire.DecodeZigZag(x & math.MaxUint32))))
	case protoreflect.Uint32Kind:
		x = uint64(uint32(x))
	case protoreflect.Sint64Kind:
		x = uint64(protowire.DecodeZigZag(x))
	case protoreflect.BoolKind:
		if x != 0 {
			x = 1
		}
	}
	return x, n // int64, uint64 as they are
}

// appendValue appends the JSON of one value of type pv at the start of v,
// written with wire type wire, and returns the bytes it took.
func (r *protoReader) appendValue(b, v []byte, wire protowire.Type, pv *protoValue) ([]byte, int, error) {
	switch pv.kind {
	case pkMessage:
		var body []byte
		var n int
		if wire == protowire.StartGroupType {
			body, n = protowire.ConsumeGroup(pv.num, v)
		} else {
			body, n = protowire.ConsumeBytes(v)
		}
		if n < 0 {
			return b, 0, errProtoReference
		}
		b, err := r.appendMessage(b, body, pv.msg, pv.msg.scan)
		return b, n, err
	case pkString, pkBytes:
		s, n := protowire.ConsumeBytes(v)
		if n < 0 {
			return b, 0, errProtoReference
		}
		if pv.utf8 && pv.kind == pkString && !utf8.Valid(s) {
			return b, 0, errProtoReference
		}
		if r.skip {
			return b, n, nil
		}
		if pv.kind == pkBytes {
			return appendBase64(b, s), n, nil
		}
		return codec.AppendJSONString(b, unsafe.String(unsafe.SliceData(s), len(s))), n, nil
	case pkFloat:
		x, n := protowire.ConsumeFixed32(v)
		if n < 0 {
			return b, 0, errProtoReference
		}
		if r.skip {
			return b, n, nil
		}
		return appendFloat(b, float64(math.Float32frombits(x)), 32), n, nil
	case pkDouble:
		x, n := protowire.ConsumeFixed64(v)
		if n < 0 {
			return b, 0, errProtoReference
		}
		if r.skip {
			return b, n, nil
		}
		return appendFloat(b, math.Float64frombits(x), 64), n, nil
	}
	x, n := protoScalar(v, pv.pk)
	if n < 0 {
		return b, 0, errProtoReference
	}
	if r.skip {
		return b, n, nil
	}
	switch pv.kind {
	case pkInt:
		return strconv.AppendInt(b, int64(x), 10), n, nil
	case pkUint:
		return strconv.AppendUint(b, x, 10), n, nil
	case pkBool:
		if x != 0 {
			return append(b, "true"...), n, nil
		}
		return append(b, "false"...), n, nil
	case pkNull:
		return append(b, "null"...), n, nil
	}
	// pkEnum
	e := protoreflect.EnumNumber(int64(x))
	if ev := pv.enum.ByNumber(e); ev != nil {
		b = append(b, '"')
		b = append(b, ev.Name()...)
		return append(b, '"'), n, nil
	}
	return strconv.AppendInt(b, int64(e), 10), n, nil
}
