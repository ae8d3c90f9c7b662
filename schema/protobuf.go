package schema

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/protoutil"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/windowd/windowd/codec"
)

// protoMainFile is the name the registry's schema text gets when compiled.
// Registry references name .proto paths; none is spelled like this.
const protoMainFile = "<schema>"

// protoStdImports resolves the files protoc ships (google/protobuf/*.proto)
// and nothing else.
var protoStdImports = protocompile.WithStandardImports(protocompile.ResolverFunc(
	func(string) (protocompile.SearchResult, error) {
		return protocompile.SearchResult{}, fs.ErrNotExist
	}))

// compileProtoFile parses the .proto source text main (the registry's schema
// text of one id) with the .proto texts of its references, deps (import name →
// text, as the registry's references name them, transitively), and Google's
// well-known types (google/protobuf/*.proto, from protocompile's standard imports),
// and returns the file's descriptor. The main file gets some fixed name that
// cannot collide with a dep's name.
//
// A standard import's name resolves to protocompile's copy even when deps
// has a text under that name, so the well-known types are always the ones
// this package maps specially. The result is rebuilt with protodesc: its
// descriptors answer lookups by field number in constant time (dynamicpb
// does one per field it decodes) and keep no compiler state alive.
func compileProtoFile(main string, deps map[string]string) (protoreflect.FileDescriptor, error) {
	c := protocompile.Compiler{
		Resolver: protocompile.ResolverFunc(func(name string) (protocompile.SearchResult, error) {
			if name == protoMainFile {
				return protocompile.SearchResult{Source: strings.NewReader(main)}, nil
			}
			if r, err := protoStdImports.FindFileByPath(name); err == nil {
				return r, nil
			}
			if src, ok := deps[name]; ok {
				return protocompile.SearchResult{Source: strings.NewReader(src)}, nil
			}
			return protocompile.SearchResult{}, fs.ErrNotExist
		}),
	}
	files, err := c.Compile(context.Background(), protoMainFile)
	if err != nil {
		return nil, err
	}
	reg := new(protoregistry.Files)
	if err := registerProtoFile(reg, files[0]); err != nil {
		return nil, err
	}
	return reg.FindFileByPath(protoMainFile)
}

// registerProtoFile adds fd and, first, the files it imports to reg, as
// protodesc descriptors (a standard import as its generated descriptor).
func registerProtoFile(reg *protoregistry.Files, fd protoreflect.FileDescriptor) error {
	if _, err := reg.FindFileByPath(fd.Path()); err == nil {
		return nil
	}
	imports := fd.Imports()
	for i := range imports.Len() {
		if err := registerProtoFile(reg, imports.Get(i).FileDescriptor); err != nil {
			return err
		}
	}
	if r, err := protoStdImports.FindFileByPath(fd.Path()); err == nil && r.Desc != nil {
		return reg.RegisterFile(r.Desc)
	}
	nf, err := protodesc.NewFile(protoutil.ProtoFromFileDescriptor(fd), reg)
	if err != nil {
		return err
	}
	return reg.RegisterFile(nf)
}

// protoKind says how a value of one field is written.
type protoKind uint8

const (
	pkInt     protoKind = iota // signed integer types
	pkUint                     // unsigned integer types
	pkFloat                    // float
	pkDouble                   // double
	pkBool                     //
	pkString                   //
	pkBytes                    // standard base64
	pkEnum                     // value name, or number without one
	pkNull                     // google.protobuf.NullValue
	pkMessage                  // object, or a well-known type's JSON
)

// protoWKT is a well-known type with a JSON form of its own.
type protoWKT uint8

const (
	wktNone      protoWKT = iota
	wktTimestamp          // Unix milliseconds
	wktDuration           // milliseconds
	wktWrapper            // the wrapped value
	wktStruct             // object
	wktValue              // the JSON value it holds
	wktListValue          // array
)

// protoValue says how to write one value (a singular field's, a list's
// element, a map's key or value).
type protoValue struct {
	kind protoKind
	enum protoreflect.EnumValueDescriptors // pkEnum
	msg  *protoMessage                     // protoMessage
	// For the in-place reader (protoread.go):
	pk   protoreflect.Kind // how the wire value is decoded
	wire protowire.Type    // the wire type of one value
	num  protowire.Number  // a group's field number (its end tag)
	utf8 bool              // pkString: invalid UTF-8 is an error
	def  []byte            // the JSON of the default value; nil for messages
}

// protoField is a field of a message in the order it is written.
type protoField struct {
	fd        protoreflect.FieldDescriptor
	prefix    string // `,"name":`; without the comma for the first field written
	list      bool
	isMap     bool
	key, val  protoValue // key: maps only; val: the value, element or map value
	protoScan            // for the in-place reader (protoread.go)
}

// protoScan is what the in-place reader reads of every field; the plan
// keeps a copy of each field's apart (protoMessage.scan), to take few
// cache lines.
type protoScan struct {
	wire     protowire.Type // the wire type of one occurrence (BytesType for maps)
	packable bool           // a list whose values may also come packed
	single   bool           // a singular message or group: occurrences would merge
	required bool           // proto2 required
	repeated bool           // a list or a map
	scalar   bool           // singular, not a message: the first pass checks it whole
	// checkUTF8: a singular string that must be UTF-8, checked at each
	// occurrence by the first pass (the reference decodes every one).
	checkUTF8 bool
	presence  bool // written only when set
	oneof     int8 // index in protoMessage.oneofs; -1: none, synthetic, or past 127
	skip      bool // not written: a top-level field the pipeline does not read
}

// protoMessage is the precomputed plan of one message type.
type protoMessage struct {
	desc   protoreflect.MessageDescriptor
	wkt    protoWKT
	fields []protoField // by field number
	// wktTimestamp, wktDuration: seconds and nanos; wktValue: kind.
	f1, f2 protoreflect.FieldDescriptor
	kind   protoreflect.OneofDescriptor
	// For the in-place reader (protoread.go):
	scan       []protoScan // fields' what the first pass needs, compact (by index)
	byNum      []int32     // field number → index in fields, -1: none; nil: search
	oneofs     [][]int32   // each real oneof's fields, by index in fields
	required   bool        // a field is proto2 required
	messageSet bool        // message_set_wire_format: read by the reference only
}

// protoProgram writes the payload of one message type as JSON. It reads
// the payload in place (protoread.go) and leaves what that reader does not
// handle to the reference decoder, dynamicpb. It belongs to one Decoder:
// its reader's scratch is reused.
type protoProgram struct {
	typ  protoreflect.MessageType
	root *protoMessage
	ts   []protoreflect.FieldDescriptor // tsPath's fields, ending at a Timestamp; nil: none
	keep []bool                         // root's fields written (by index); nil: all
	scan []protoScan                    // root.scan, with keep's skips
	r    protoReader
	// referenceReads counts the payloads the reference decoder read
	// (tests check the reader takes the common ones).
	referenceReads int
}

// protoUnmarshal decodes payloads; an empty registry resolves no
// extensions, so their fields stay unknown, like any other.
var protoUnmarshal = proto.UnmarshalOptions{Resolver: new(protoregistry.Types)}

// newProtoProgram returns the program for the message type that the
// Confluent message indexes name in fd: index [i] is fd.Messages().Get(i), [i, j]
// is its nested message j, and so on (the caller already turned the wire
// format's [0] shortcut into []int{0}). An index out of range is an error.
// tsPath is the pipeline's timestamp field as path segments (nil: none); when
// the value at that path is a google.protobuf.Timestamp, appendJSON sets *ts.
//
// keep says which top-level fields are written (nil: all); the others are
// still read and checked, so a payload decodes or fails the same way
// whichever fields the pipeline reads.
func newProtoProgram(fd protoreflect.FileDescriptor, index []int, tsPath []string, keep func(string) bool) (program, error) {
	if len(index) == 0 {
		return nil, errors.New("protobuf message indexes are empty")
	}
	msgs := fd.Messages()
	var md protoreflect.MessageDescriptor
	for _, i := range index {
		if i < 0 || i >= msgs.Len() {
			return nil, errors.New("protobuf message index " + strconv.Itoa(i) +
				" out of range: " + strconv.Itoa(msgs.Len()) + " message types")
		}
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	plans := make(map[protoreflect.FullName]*protoMessage)
	p := &protoProgram{
		typ:  dynamicpb.NewMessageType(md),
		root: protoPlan(md, plans),
		ts:   protoTSFields(md, tsPath),
	}
	if p.ts != nil { // the fields' indexes along the way
		m := p.root
		for _, f := range p.ts {
			i := m.index(f.Number())
			p.r.tsPath = append(p.r.tsPath, int32(i))
			m = m.fields[i].val.msg
		}
	}
	p.scan = p.root.scan
	if keep != nil && p.root.wkt == wktNone {
		p.keep = make([]bool, len(p.root.fields))
		p.scan = slices.Clone(p.root.scan)
		for i, f := range p.root.fields {
			p.keep[i] = keep(string(f.fd.Name()))
			p.scan[i].skip = !p.keep[i]
		}
	}
	return p, nil
}

// protoTSFields returns the fields tsPath walks from md when it ends at a
// singular google.protobuf.Timestamp field, or nil.
func protoTSFields(md protoreflect.MessageDescriptor, tsPath []string) []protoreflect.FieldDescriptor {
	if len(tsPath) == 0 {
		return nil
	}
	var fields []protoreflect.FieldDescriptor
	for _, seg := range tsPath {
		if md == nil {
			return nil
		}
		f := md.Fields().ByName(protoreflect.Name(seg))
		if f == nil || f.IsList() || f.IsMap() || f.Message() == nil {
			return nil
		}
		fields = append(fields, f)
		md = f.Message()
	}
	if protoWKTOf(md) != wktTimestamp {
		return nil
	}
	return fields
}

// protoPlan returns the plan of md, making it (and those of the messages
// its fields hold) when plans has none yet.
func protoPlan(md protoreflect.MessageDescriptor, plans map[protoreflect.FullName]*protoMessage) *protoMessage {
	if p := plans[md.FullName()]; p != nil {
		return p
	}
	p := &protoMessage{desc: md, wkt: protoWKTOf(md)}
	plans[md.FullName()] = p // before the fields: types can be recursive
	fds := md.Fields()
	p.fields = make([]protoField, fds.Len())
	for i := range fds.Len() {
		f := fds.Get(i)
		pf := protoField{
			fd:     f,
			prefix: `,"` + string(f.Name()) + `":`,
			list:   f.IsList(),
			isMap:  f.IsMap(),
		}
		if pf.isMap {
			pf.key = protoValueOf(f.MapKey(), plans)
			pf.val = protoValueOf(f.MapValue(), plans)
		} else {
			pf.val = protoValueOf(f, plans)
		}
		p.fields[i] = pf
	}
	slices.SortFunc(p.fields, func(a, b protoField) int { return int(a.fd.Number()) - int(b.fd.Number()) })
	protoReadPlan(p)
	switch p.wkt {
	case wktTimestamp, wktDuration:
		p.f1, p.f2 = fds.ByNumber(1), fds.ByNumber(2)
	case wktValue:
		p.kind = md.Oneofs().ByName("kind")
	}
	return p
}

// protoValueOf returns how values of f (a field, or a map's key or value)
// are written.
func protoValueOf(f protoreflect.FieldDescriptor, plans map[protoreflect.FullName]*protoMessage) protoValue {
	pv := protoValueKind(f, plans)
	pv.pk, pv.wire = f.Kind(), protoWireType(f.Kind())
	if pv.pk == protoreflect.GroupKind {
		pv.num = f.Number()
	}
	pv.utf8 = pv.kind == pkString && protoEnforceUTF8(f)
	if pv.kind != pkMessage && !f.IsList() {
		pv.def, _ = appendProtoValue(nil, f.Default(), &pv)
	}
	return pv
}

// protoValueKind returns how values of f are written as JSON.
func protoValueKind(f protoreflect.FieldDescriptor, plans map[protoreflect.FullName]*protoMessage) protoValue {
	switch f.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoValue{kind: pkInt}
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoValue{kind: pkUint}
	case protoreflect.FloatKind:
		return protoValue{kind: pkFloat}
	case protoreflect.DoubleKind:
		return protoValue{kind: pkDouble}
	case protoreflect.BoolKind:
		return protoValue{kind: pkBool}
	case protoreflect.StringKind:
		return protoValue{kind: pkString}
	case protoreflect.BytesKind:
		return protoValue{kind: pkBytes}
	case protoreflect.EnumKind:
		if f.Enum().FullName() == "google.protobuf.NullValue" {
			return protoValue{kind: pkNull}
		}
		return protoValue{kind: pkEnum, enum: f.Enum().Values()}
	default: // MessageKind, GroupKind
		return protoValue{kind: pkMessage, msg: protoPlan(f.Message(), plans)}
	}
}

// protoWireType is the wire type of a value of kind k (a packed list's
// is BytesType too).
func protoWireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind:
		return protowire.BytesType
	case protoreflect.GroupKind:
		return protowire.StartGroupType
	}
	return protowire.VarintType
}

// protoWKTOf says which well-known type with a JSON form of its own md is,
// checking its fields are the ones the type has.
func protoWKTOf(md protoreflect.MessageDescriptor) protoWKT {
	name := md.FullName()
	if name.Parent() != "google.protobuf" {
		return wktNone
	}
	fds := md.Fields()
	f1 := fds.ByNumber(1)
	switch name.Name() {
	case "Timestamp", "Duration":
		f2 := fds.ByNumber(2)
		if f1 == nil || f2 == nil || f1.Kind() != protoreflect.Int64Kind || f2.Kind() != protoreflect.Int32Kind ||
			f1.IsList() || f2.IsList() {
			return wktNone
		}
		if name.Name() == "Timestamp" {
			return wktTimestamp
		}
		return wktDuration
	case "DoubleValue", "FloatValue", "Int64Value", "UInt64Value", "Int32Value", "UInt32Value",
		"BoolValue", "StringValue", "BytesValue":
		if fds.Len() != 1 || f1 == nil || f1.IsList() || f1.Message() != nil {
			return wktNone
		}
		return wktWrapper
	case "Struct":
		if fds.Len() != 1 || f1 == nil || !f1.IsMap() {
			return wktNone
		}
		return wktStruct
	case "ListValue":
		if fds.Len() != 1 || f1 == nil || !f1.IsList() {
			return wktNone
		}
		return wktListValue
	case "Value":
		if md.Oneofs().ByName("kind") == nil {
			return wktNone
		}
		return wktValue
	}
	return wktNone
}

func (p *protoProgram) appendJSON(dst, payload []byte, ts *Instant) ([]byte, error) {
	start := len(dst)
	p.r.tsOn, p.r.ts = 0, Instant{}
	if p.r.tsPath != nil {
		p.r.tsOn = 1 // the top message is on the timestamp's path
	}
	out, err := p.r.appendMessage(dst, payload, p.root, p.scan)
	if err == nil {
		if p.r.ts.OK {
			*ts = p.r.ts
		}
		return out, nil
	}
	p.referenceReads++
	return p.appendJSONReference(out[:start], payload, ts)
}

// appendJSONReference is appendJSON by way of a dynamicpb message: the
// reference the in-place reader is checked against.
func (p *protoProgram) appendJSONReference(dst, payload []byte, ts *Instant) ([]byte, error) {
	m := p.typ.New()
	if err := protoUnmarshalSafe(payload, m); err != nil {
		return dst, err
	}
	dst, err := appendProtoMessage(dst, m, p.root, p.keep)
	if err != nil {
		return dst, err
	}
	if ts != nil && p.ts != nil {
		last := len(p.ts) - 1
		for _, f := range p.ts[:last] {
			if !m.Has(f) {
				return dst, nil
			}
			m = m.Get(f).Message()
		}
		if !m.Has(p.ts[last]) {
			return dst, nil
		}
		t := m.Get(p.ts[last]).Message()
		fds := t.Descriptor().Fields()
		// appendProtoMessage checked the nanos are in [0, 1e9).
		ts.MS = t.Get(fds.ByNumber(1)).Int()*1000 + t.Get(fds.ByNumber(2)).Int()/1e6
		ts.OK = true
	}
	return dst, nil
}

// protoUnmarshalSafe decodes payload into m. The protobuf module panics on
// some payloads (v1.36.12: a map entry whose key comes twice, the second
// time with another wire type, leaves the key unset and then uses it);
// such a panic is an error here, so that the record is dead-lettered and
// the rest flow.
func protoUnmarshalSafe(payload []byte, m protoreflect.Message) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = errors.New("the protobuf decoder failed on the payload: " + fmt.Sprint(v))
		}
	}()
	if err := protoUnmarshal.Unmarshal(payload, m.Interface()); err != nil {
		return protoDecodeError(err)
	}
	return nil
}

// protoDecodeError is err from proto.Unmarshal without its "proto:"
// prefix (whose space the protobuf module varies on purpose).
func protoDecodeError(err error) error {
	s := strings.TrimPrefix(err.Error(), "proto:")
	return errors.New(strings.TrimLeftFunc(s, unicode.IsSpace))
}

// appendProtoMessage appends the JSON of m, of type p. keep says which of
// p's fields are written (nil: all); the others are written and cut off
// again, so that they are checked the same.
func appendProtoMessage(b []byte, m protoreflect.Message, p *protoMessage, keep []bool) ([]byte, error) {
	if u := m.GetUnknown(); len(u) > 0 {
		if err := checkProtoUnknown(u, p); err != nil {
			return b, err
		}
	}
	switch p.wkt {
	case wktTimestamp:
		sec, nanos := m.Get(p.f1).Int(), m.Get(p.f2).Int()
		if sec < -62135596800 || sec > 253402300799 || nanos < 0 || nanos >= 1e9 {
			return b, errors.New("google.protobuf.Timestamp out of range")
		}
		return appendSecondsNanos(b, sec, nanos), nil
	case wktDuration:
		sec, nanos := m.Get(p.f1).Int(), m.Get(p.f2).Int()
		if sec < -315576000000 || sec > 315576000000 || nanos <= -1e9 || nanos >= 1e9 {
			return b, errors.New("google.protobuf.Duration out of range")
		}
		if sec > 0 && nanos < 0 || sec < 0 && nanos > 0 {
			return b, errors.New("google.protobuf.Duration has seconds and nanos of different signs")
		}
		return appendSecondsNanos(b, sec, nanos), nil
	case wktWrapper:
		f := &p.fields[0]
		return appendProtoValue(b, m.Get(f.fd), &f.val)
	case wktStruct:
		f := &p.fields[0]
		return appendProtoMap(b, m.Get(f.fd).Map(), f)
	case wktListValue:
		f := &p.fields[0]
		return appendProtoList(b, m.Get(f.fd).List(), &f.val)
	case wktValue:
		set := m.WhichOneof(p.kind)
		if set == nil {
			return append(b, "null"...), nil
		}
		for i := range p.fields {
			if f := &p.fields[i]; f.fd == set {
				return appendProtoValue(b, m.Get(f.fd), &f.val)
			}
		}
		return append(b, "null"...), nil
	}
	b = append(b, '{')
	first := true
	for i := range p.fields {
		f := &p.fields[i]
		if f.presence && !m.Has(f.fd) {
			continue
		}
		mark := len(b)
		if first {
			b = append(b, f.prefix[1:]...)
		} else {
			b = append(b, f.prefix...)
		}
		var err error
		switch {
		case (f.isMap || f.list) && !m.Has(f.fd): // no need to have dynamicpb make an empty one
			if f.isMap {
				b = append(b, "{}"...)
			} else {
				b = append(b, "[]"...)
			}
		case f.isMap:
			b, err = appendProtoMap(b, m.Get(f.fd).Map(), f)
		case f.list:
			b, err = appendProtoList(b, m.Get(f.fd).List(), &f.val)
		default:
			b, err = appendProtoValue(b, m.Get(f.fd), &f.val)
		}
		if err != nil {
			return b, err
		}
		if keep != nil && !keep[i] {
			b = b[:mark]
		} else {
			first = false
		}
	}
	return append(b, '}'), nil
}

// checkProtoUnknown returns an error when the unknown fields u of a
// message of type p hold a field of p with a wire type it cannot have: the
// protobuf module keeps such a field as an unknown one and leaves the field
// its default value, which would hide a writer's schema that does not
// match. Fields p does not have are ignored, as is a field of p with a
// wire type it can have (a closed enum's unknown value, for generated
// messages; dynamicpb keeps those as the field's value).
func checkProtoUnknown(u []byte, p *protoMessage) error {
	fds := p.desc.Fields()
	for len(u) > 0 {
		num, typ, n := protowire.ConsumeTag(u)
		if n < 0 {
			return errors.New("cannot parse invalid wire-format data")
		}
		u = u[n:]
		n = protowire.ConsumeFieldValue(num, typ, u)
		if n < 0 {
			return errors.New("cannot parse invalid wire-format data")
		}
		u = u[n:]
		f := fds.ByNumber(num)
		if f == nil {
			continue
		}
		want := protoWireType(f.Kind()) // a map's is its entry message's
		packed := f.IsList() && typ == protowire.BytesType &&
			(want == protowire.VarintType || want == protowire.Fixed32Type || want == protowire.Fixed64Type)
		if typ != want && !packed {
			return errors.New("field " + string(f.FullName()) + " has wire type " +
				strconv.Itoa(int(typ)) + ", not " + strconv.Itoa(int(want)))
		}
	}
	return nil
}

// appendProtoValue appends the JSON of v, a value written as pv says.
func appendProtoValue(b []byte, v protoreflect.Value, pv *protoValue) ([]byte, error) {
	switch pv.kind {
	case pkInt:
		return strconv.AppendInt(b, v.Int(), 10), nil
	case pkUint:
		return strconv.AppendUint(b, v.Uint(), 10), nil
	case pkFloat:
		return appendFloat(b, v.Float(), 32), nil
	case pkDouble:
		return appendFloat(b, v.Float(), 64), nil
	case pkBool:
		if v.Bool() {
			return append(b, "true"...), nil
		}
		return append(b, "false"...), nil
	case pkString:
		return codec.AppendJSONString(b, v.String()), nil
	case pkBytes:
		return appendBase64(b, v.Bytes()), nil
	case pkEnum:
		n := v.Enum()
		if ev := pv.enum.ByNumber(n); ev != nil {
			b = append(b, '"')
			b = append(b, ev.Name()...) // an identifier: nothing to escape
			return append(b, '"'), nil
		}
		return strconv.AppendInt(b, int64(n), 10), nil
	case pkNull:
		return append(b, "null"...), nil
	default:
		return appendProtoMessage(b, v.Message(), pv.msg, nil)
	}
}

// appendProtoList appends l as a JSON array.
func appendProtoList(b []byte, l protoreflect.List, pv *protoValue) ([]byte, error) {
	b = append(b, '[')
	for i := range l.Len() {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendProtoValue(b, l.Get(i), pv); err != nil {
			return b, err
		}
	}
	return append(b, ']'), nil
}

// appendProtoMap appends m, the value of map field f, as a JSON object
// with its keys in order: strings by their bytes, integers by value,
// false before true.
func appendProtoMap(b []byte, m protoreflect.Map, f *protoField) ([]byte, error) {
	if m.Len() == 0 {
		return append(b, "{}"...), nil
	}
	mk := protoMapKeysPool.Get().(*protoMapKeys)
	defer mk.release()
	m.Range(mk.add)
	keys := mk.keys
	switch f.key.kind {
	case pkString:
		slices.SortFunc(keys, func(x, y protoreflect.MapKey) int { return strings.Compare(x.String(), y.String()) })
	case pkInt:
		slices.SortFunc(keys, func(x, y protoreflect.MapKey) int { return cmpInt(x.Int(), y.Int()) })
	case pkUint:
		slices.SortFunc(keys, func(x, y protoreflect.MapKey) int { return cmpInt(x.Uint(), y.Uint()) })
	case pkBool:
		slices.SortFunc(keys, func(x, y protoreflect.MapKey) int { return cmpBool(x.Bool(), y.Bool()) })
	}
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		switch f.key.kind {
		case pkString:
			b = codec.AppendJSONString(b, k.String())
		case pkInt:
			b = append(b, '"')
			b = strconv.AppendInt(b, k.Int(), 10)
			b = append(b, '"')
		case pkUint:
			b = append(b, '"')
			b = strconv.AppendUint(b, k.Uint(), 10)
			b = append(b, '"')
		case pkBool:
			if k.Bool() {
				b = append(b, `"true"`...)
			} else {
				b = append(b, `"false"`...)
			}
		}
		b = append(b, ':')
		var err error
		if b, err = appendProtoValue(b, m.Get(k), &f.val); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// protoMapKeys collects a map's keys; add is made once, so that ranging
// over a map allocates nothing.
type protoMapKeys struct {
	keys []protoreflect.MapKey
	add  func(protoreflect.MapKey, protoreflect.Value) bool
}

var protoMapKeysPool = sync.Pool{New: func() any {
	mk := new(protoMapKeys)
	mk.add = func(k protoreflect.MapKey, _ protoreflect.Value) bool {
		mk.keys = append(mk.keys, k)
		return true
	}
	return mk
}}

// release returns mk to the pool, keeping no keys alive.
func (mk *protoMapKeys) release() {
	clear(mk.keys)
	mk.keys = mk.keys[:0]
	protoMapKeysPool.Put(mk)
}

func cmpInt[T int64 | uint64](x, y T) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func cmpBool(x, y bool) int {
	switch {
	case x == y:
		return 0
	case y:
		return -1
	}
	return 1
}

// appendSecondsNanos appends sec seconds plus nanos nanoseconds as an
// exact JSON number of milliseconds: the integer part, and the fraction
// without trailing zeros. |sec| ≤ 10^12 and |nanos| < 10^9; the value in
// nanoseconds may not fit an int64, so the milliseconds and the
// sub-millisecond nanoseconds are kept apart.
func appendSecondsNanos(b []byte, sec, nanos int64) []byte {
	ms, r := sec*1000+nanos/1e6, nanos%1e6
	// Give ms and r the same sign: the value is ms + r/1e6 either way.
	switch {
	case ms > 0 && r < 0:
		ms, r = ms-1, r+1e6
	case ms < 0 && r > 0:
		ms, r = ms+1, r-1e6
	}
	if ms < 0 || r < 0 {
		b = append(b, '-')
		ms, r = -ms, -r
	}
	b = strconv.AppendInt(b, ms, 10)
	if r == 0 {
		return b
	}
	var frac [6]byte
	for i := 5; i >= 0; i-- {
		frac[i] = byte('0' + r%10)
		r /= 10
	}
	n := 6
	for frac[n-1] == '0' {
		n--
	}
	b = append(b, '.')
	return append(b, frac[:n]...)
}
