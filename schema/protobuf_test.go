package schema

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// protoCommon is a reference of protoShop that imports a well-known type.
const protoCommon = `syntax = "proto3";
package common;
import "google/protobuf/timestamp.proto";
message Event {
  google.protobuf.Timestamp at = 1;
  string kind = 2;
}
`

const protoShop = `syntax = "proto3";
package shop;

import "common.proto";
import "google/protobuf/any.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/empty.proto";
import "google/protobuf/field_mask.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

enum Color {
  RED = 0;
  GREEN = 1;
  BLUE = 2;
}

// [0]
message Scalars {
  int32 i32 = 1;
  sint32 s32 = 2;
  sfixed32 sf32 = 3;
  uint32 u32 = 4;
  fixed32 f32 = 5;
  int64 i64 = 6;
  sint64 s64 = 7;
  sfixed64 sf64 = 8;
  uint64 u64 = 9;
  fixed64 f64 = 10;
  float fl = 11;
  double db = 12;
  bool b = 13;
  string s = 14;
  bytes by = 15;
  Color color = 16;
}

// [1]
message Order {
  // [1, 0]
  message Line {
    string sku = 1;
    int32 qty = 2;
  }
  // [1, 1]
  message Meta {
    common.Event event = 1;
    string note = 2;
  }
  string id = 3; // declared out of field-number order
  int64 amount = 1;
  optional string coupon = 2;
  Line first = 4;
  repeated Line lines = 5;
  repeated int32 codes = 6;
  map<string, int32> by_name = 7;
  map<int64, string> by_id = 8;
  map<bool, string> flags = 9;
  oneof pay {
    string card = 10;
    int64 cash = 11;
  }
  Meta meta = 12;
  google.protobuf.Timestamp created = 13;
  map<uint32, Color> colors = 14;
  repeated string tags = 15;
}

// [2]
message Known {
  google.protobuf.Timestamp ts = 1;
  google.protobuf.Duration dur = 2;
  google.protobuf.DoubleValue dv = 3;
  google.protobuf.FloatValue fv = 4;
  google.protobuf.Int64Value i64v = 5;
  google.protobuf.UInt64Value u64v = 6;
  google.protobuf.Int32Value i32v = 7;
  google.protobuf.UInt32Value u32v = 8;
  google.protobuf.BoolValue bv = 9;
  google.protobuf.StringValue sv = 10;
  google.protobuf.BytesValue byv = 11;
  google.protobuf.Struct st = 12;
  google.protobuf.Value val = 13;
  google.protobuf.ListValue lv = 14;
  google.protobuf.NullValue nv = 15;
  google.protobuf.Empty empty = 16;
  google.protobuf.Any any = 17;
  google.protobuf.FieldMask mask = 18;
  repeated google.protobuf.Timestamp tss = 19;
  map<string, google.protobuf.Duration> durs = 20;
}

// [3]
message Node {
  int32 v = 1;
  Node next = 2;
}
`

const protoLegacy = `syntax = "proto2";
package legacy;
message Rec {
  enum Kind {
    A = 1;
    B = 2;
  }
  optional int32 a = 1;
  optional string s = 2 [default = "x"];
  required int64 id = 3;
  repeated int32 packed = 4 [packed = true];
  optional Kind kind = 5;
  optional group G = 6 {
    optional int32 x = 7;
  }
  repeated int32 unpacked = 8;
}
`

// A registry schema that is a well-known type itself.
const protoTimestampOnly = `syntax = "proto3";
package google.protobuf;
message Timestamp {
  int64 seconds = 1;
  int32 nanos = 2;
}
message StringValue {
  string value = 1;
}
`

func compileShop(t *testing.T) protoreflect.FileDescriptor {
	t.Helper()
	fd, err := compileProtoFile(protoShop, map[string]string{"common.proto": protoCommon})
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

// protoMessageAt is the message type index names in fd.
func protoMessageAt(fd protoreflect.FileDescriptor, index []int) protoreflect.MessageDescriptor {
	msgs := fd.Messages()
	var md protoreflect.MessageDescriptor
	for _, i := range index {
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	return md
}

// protoPayload is the message of type md that the text format text
// describes, encoded.
func protoPayload(t *testing.T, md protoreflect.MessageDescriptor, text string) []byte {
	t.Helper()
	m := dynamicpb.NewMessage(md)
	if err := prototext.Unmarshal([]byte(text), m); err != nil {
		t.Fatalf("text %q: %v", text, err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runProto reads payload with a new program of fd's message at index. It
// also reads it with the reference decoder and fails the test when the two
// differ, and when the payload decodes but took the reference decoder's way.
func runProto(t *testing.T, fd protoreflect.FileDescriptor, index []int, tsPath []string, payload []byte) (string, Instant, error) {
	t.Helper()
	prog, err := newProtoProgram(fd, index, tsPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := prog.(*protoProgram)
	var ts, refTS Instant
	out, err := p.appendJSON([]byte("prefix"), payload, &ts)
	if !strings.HasPrefix(string(out), "prefix") {
		t.Fatalf("dst's bytes were overwritten: %q", out)
	}
	ref, refErr := p.appendJSONReference([]byte("prefix"), payload, &refTS)
	if string(ref) != string(out) || ts != refTS || (err == nil) != (refErr == nil) {
		t.Fatalf("in place %s %+v %v\nreference %s %+v %v", out, ts, err, ref, refTS, refErr)
	}
	if err == nil && p.referenceReads > 0 {
		t.Errorf("payload %x decodes but was read by the reference decoder", payload)
	}
	return string(out[len("prefix"):]), ts, err
}

func TestProtoJSON(t *testing.T) {
	shop := compileShop(t)
	legacy, err := compileProtoFile(protoLegacy, nil)
	if err != nil {
		t.Fatal(err)
	}
	wkt, err := compileProtoFile(protoTimestampOnly, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		fd    protoreflect.FileDescriptor
		index []int
		text  string // text format of the payload
		want  string
	}{
		{"scalars default", shop, []int{0}, ``,
			`{"i32":0,"s32":0,"sf32":0,"u32":0,"f32":0,"i64":0,"s64":0,"sf64":0,"u64":0,"f64":0,` +
				`"fl":0,"db":0,"b":false,"s":"","by":"","color":"RED"}`},
		{"scalars negative", shop, []int{0},
			`i32: -1 s32: -2 sf32: -3 u32: 4 f32: 5 i64: -6 s64: -7 sf64: -8 u64: 9 f64: 10 ` +
				`fl: -1.5 db: -0.1 b: true s: "a\"b\n\\é\x01" by: "\x00\xffhi" color: BLUE`,
			`{"i32":-1,"s32":-2,"sf32":-3,"u32":4,"f32":5,"i64":-6,"s64":-7,"sf64":-8,"u64":9,"f64":10,` +
				`"fl":-1.5,"db":-0.1,"b":true,"s":"a\"b\n\\é\u0001","by":"AP9oaQ==","color":"BLUE"}`},
		{"scalars 32-bit extremes", shop, []int{0},
			`i32: -2147483648 s32: 2147483647 sf32: -2147483648 u32: 4294967295 f32: 4294967295 fl: 1.1 db: 1e300`,
			`{"i32":-2147483648,"s32":2147483647,"sf32":-2147483648,"u32":4294967295,"f32":4294967295,` +
				`"i64":0,"s64":0,"sf64":0,"u64":0,"f64":0,"fl":1.1,"db":1e+300,"b":false,"s":"","by":"","color":"RED"}`},
		{"scalars 64-bit extremes", shop, []int{0},
			`i64: -9223372036854775808 s64: 9223372036854775807 sf64: -9223372036854775808 ` +
				`u64: 18446744073709551615 f64: 18446744073709551615 color: 7`,
			`{"i32":0,"s32":0,"sf32":0,"u32":0,"f32":0,"i64":-9223372036854775808,"s64":9223372036854775807,` +
				`"sf64":-9223372036854775808,"u64":18446744073709551615,"f64":18446744073709551615,` +
				`"fl":0,"db":0,"b":false,"s":"","by":"","color":7}`},
		{"scalars nan inf", shop, []int{0}, `fl: nan db: -inf`,
			`{"i32":0,"s32":0,"sf32":0,"u32":0,"f32":0,"i64":0,"s64":0,"sf64":0,"u64":0,"f64":0,` +
				`"fl":null,"db":null,"b":false,"s":"","by":"","color":"RED"}`},
		{"scalars inf double smallest float", shop, []int{0}, `fl: 1e-45 db: inf`,
			`{"i32":0,"s32":0,"sf32":0,"u32":0,"f32":0,"i64":0,"s64":0,"sf64":0,"u64":0,"f64":0,` +
				`"fl":1e-45,"db":null,"b":false,"s":"","by":"","color":"RED"}`},
		{"order empty", shop, []int{1}, ``,
			`{"amount":0,"id":"","lines":[],"codes":[],"by_name":{},"by_id":{},"flags":{},"colors":{},"tags":[]}`},
		{"order full", shop, []int{1},
			`amount: -5 coupon: "SAVE" id: "o1" first { sku: "a" qty: 2 } lines { sku: "b" } lines { qty: 3 } ` +
				`codes: [3, -1] by_name { key: "z" value: 1 } by_name { key: "a" value: 2 } by_name { key: "B" value: 3 } ` +
				`by_name { key: "é" value: 4 } by_name { key: "" value: 5 } ` +
				`by_id { key: 10 value: "ten" } by_id { key: -2 value: "m2" } by_id { key: 9 value: "nine" } ` +
				`flags { key: true value: "t" } flags { key: false value: "f" } cash: 7 ` +
				`colors { key: 2 value: BLUE } colors { key: 1 value: 5 } colors { key: 4294967295 value: RED } ` +
				`tags: ["x", "y"]`,
			`{"amount":-5,"coupon":"SAVE","id":"o1","first":{"sku":"a","qty":2},"lines":[{"sku":"b","qty":0},{"sku":"","qty":3}],` +
				`"codes":[3,-1],"by_name":{"":5,"B":3,"a":2,"z":1,"é":4},"by_id":{"-2":"m2","9":"nine","10":"ten"},` +
				`"flags":{"false":"f","true":"t"},"cash":7,"colors":{"1":5,"2":"BLUE","4294967295":"RED"},"tags":["x","y"]}`},
		{"order optional set to default, oneof string, empty message set", shop, []int{1},
			`coupon: "" card: "4111" first {} meta { note: "n" }`,
			`{"amount":0,"coupon":"","id":"","first":{"sku":"","qty":0},"lines":[],"codes":[],"by_name":{},"by_id":{},` +
				`"flags":{},"card":"4111","meta":{"note":"n"},"colors":{},"tags":[]}`},
		{"order oneof set to default", shop, []int{1}, `cash: 0`,
			`{"amount":0,"id":"","lines":[],"codes":[],"by_name":{},"by_id":{},"flags":{},"cash":0,"colors":{},"tags":[]}`},
		{"nested message by index", shop, []int{1, 1},
			`event { at { seconds: 1 nanos: 500000 } kind: "k" } note: "n"`,
			`{"event":{"at":1000.5,"kind":"k"},"note":"n"}`},
		{"nested message by index, dep's message unset", shop, []int{1, 1}, ``,
			`{"note":""}`},
		{"recursive message", shop, []int{3}, `v: 1 next { v: 2 next { } }`,
			`{"v":1,"next":{"v":2,"next":{"v":0}}}`},
		{"well-known types unset", shop, []int{2}, ``,
			`{"nv":null,"tss":[],"durs":{}}`},
		{"timestamp and duration", shop, []int{2},
			`ts { seconds: 1700000000 nanos: 123456789 } dur { seconds: -1 nanos: -500000000 } ` +
				`tss { seconds: -1 nanos: 999999 } tss { } tss { seconds: 1 nanos: 1 } ` +
				`durs { key: "a" value { nanos: -1500 } } durs { key: "b" value { seconds: 2 } }`,
			`{"ts":1700000000123.456789,"dur":-1500,"nv":null,"tss":[-999.000001,0,1000.000001],` +
				`"durs":{"a":-0.0015,"b":2000}}`},
		{"timestamp and duration extremes", shop, []int{2},
			`ts { seconds: 253402300799 nanos: 999999999 } dur { seconds: -315576000000 nanos: -999999999 } ` +
				`tss { seconds: -62135596800 } tss { seconds: -62135596800 nanos: 1 } ` +
				`durs { key: "max" value { seconds: 315576000000 nanos: 999999999 } }`,
			`{"ts":253402300799999.999999,"dur":-315576000000999.999999,"nv":null,` +
				`"tss":[-62135596800000,-62135596799999.999999],"durs":{"max":315576000000999.999999}}`},
		{"wrappers", shop, []int{2},
			`dv { value: 1.5 } fv { value: nan } i64v { value: -9223372036854775808 } u64v { value: 18446744073709551615 } ` +
				`i32v { } u32v { value: 7 } bv { value: true } sv { value: "s" } byv { value: "\x01" }`,
			`{"dv":1.5,"fv":null,"i64v":-9223372036854775808,"u64v":18446744073709551615,"i32v":0,"u32v":7,` +
				`"bv":true,"sv":"s","byv":"AQ==","nv":null,"tss":[],"durs":{}}`},
		{"struct value list null", shop, []int{2},
			`st { fields { key: "z" value { string_value: "x" } } fields { key: "a" value { number_value: 1.25 } } ` +
				`fields { key: "n" value { null_value: NULL_VALUE } } fields { key: "o" value { struct_value { fields { key: "y" value { bool_value: false } } ` +
				`fields { key: "x" value { string_value: "" } } } } } ` +
				`fields { key: "l" value { list_value { values { bool_value: true } values { } values { number_value: inf } } } } } ` +
				`val { struct_value { fields { key: "k" value { list_value { } } } } } ` +
				`lv { values { string_value: "s" } values { list_value { values { number_value: -0.5 } } } } ` +
				`nv: NULL_VALUE`,
			`{"st":{"a":1.25,"l":[true,null,null],"n":null,"o":{"x":"","y":false},"z":"x"},"val":{"k":[]},"lv":["s",[-0.5]],` +
				`"nv":null,"tss":[],"durs":{}}`},
		{"value unset kind, null value numbered", shop, []int{2}, `val { } nv: 3 st { }`,
			`{"st":{},"val":null,"nv":null,"tss":[],"durs":{}}`},
		{"empty any field mask", shop, []int{2},
			`empty { } any { type_url: "type.googleapis.com/shop.Node" value: "\x08\x01" } mask { paths: ["a.b", "c"] }`,
			`{"nv":null,"empty":{},"any":{"type_url":"type.googleapis.com/shop.Node","value":"CAE="},` +
				`"mask":{"paths":["a.b","c"]},"tss":[],"durs":{}}`},
		{"proto2 unset", legacy, []int{0}, `id: 1`, `{"id":1,"packed":[],"unpacked":[]}`},
		{"proto2 set", legacy, []int{0},
			`a: 0 s: "x" id: -1 packed: [1, -2] kind: B G { x: 3 } unpacked: [4, 5]`,
			`{"a":0,"s":"x","id":-1,"packed":[1,-2],"kind":"B","g":{"x":3},"unpacked":[4,5]}`},
		{"top-level timestamp", wkt, []int{0}, `seconds: -1 nanos: 1`, `-999.999999`},
		{"top-level wrapper", wkt, []int{1}, `value: "v"`, `"v"`},
		{"top-level wrapper unset", wkt, []int{1}, ``, `""`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			payload := protoPayload(t, protoMessageAt(c.fd, c.index), c.text)
			got, ts, err := runProto(t, c.fd, c.index, nil, payload)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
			if !json.Valid([]byte(got)) {
				t.Errorf("not valid JSON: %s", got)
			}
			if ts != (Instant{}) {
				t.Errorf("ts set without a path: %+v", ts)
			}
		})
	}
}

// protoRaw is a payload built field by field.
type protoRaw []byte

func (b protoRaw) varint(num protowire.Number, v uint64) protoRaw {
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func (b protoRaw) bytes(num protowire.Number, v []byte) protoRaw {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

func (b protoRaw) fixed32(num protowire.Number, v uint32) protoRaw {
	return protowire.AppendFixed32(protowire.AppendTag(b, num, protowire.Fixed32Type), v)
}

// Payloads built by hand: what decodes, what does not, and the errors.
func TestProtoPayloads(t *testing.T) {
	shop := compileShop(t)
	legacy, err := compileProtoFile(protoLegacy, nil)
	if err != nil {
		t.Fatal(err)
	}
	var r protoRaw
	cases := []struct {
		name    string
		fd      protoreflect.FileDescriptor
		index   []int
		payload []byte
		want    string // JSON, or the error
		err     bool
	}{
		{"unknown fields ignored", shop, []int{1},
			r.varint(99, 1).bytes(1000, []byte("x")).varint(1, 3).fixed32(7777, 1),
			`{"amount":3,"id":"","lines":[],"codes":[],"by_name":{},"by_id":{},"flags":{},"colors":{},"tags":[]}`, false},
		{"repeated scalar packed and unpacked", shop, []int{1},
			r.varint(6, 1).bytes(6, protowire.AppendVarint(protowire.AppendVarint(nil, 2), 3)).varint(6, 4),
			`{"amount":0,"id":"","lines":[],"codes":[1,2,3,4],"by_name":{},"by_id":{},"flags":{},"colors":{},"tags":[]}`, false},
		{"last of repeated singular field wins", shop, []int{1, 0},
			r.varint(2, 1).bytes(1, []byte("a")).varint(2, 9), `{"sku":"a","qty":9}`, false},
		{"proto2 closed enum unknown value", legacy, []int{0},
			r.varint(3, 1).varint(5, 9), `{"id":1,"packed":[],"kind":9,"unpacked":[]}`, false},
		{"proto2 packed decoded unpacked", legacy, []int{0},
			r.varint(3, 1).varint(4, 1).varint(4, 2).bytes(8, []byte{3, 4}),
			`{"id":1,"packed":[1,2],"unpacked":[3,4]}`, false},
		{"empty payload proto2 required", legacy, []int{0}, nil,
			"required field legacy.Rec.id not set", true},
		{"truncated varint", shop, []int{1}, []byte{0x08, 0x80},
			"cannot parse invalid wire-format data", true},
		{"truncated bytes", shop, []int{1}, []byte{0x1a, 0x05, 'a'},
			"cannot parse invalid wire-format data", true},
		{"truncated tag", shop, []int{1}, []byte{0x80},
			"cannot parse invalid wire-format data", true},
		{"field number zero", shop, []int{1}, []byte{0x00, 0x01},
			"cannot parse invalid wire-format data", true},
		{"invalid utf-8 in proto3 string", shop, []int{1}, r.bytes(3, []byte{0xff}),
			"field shop.Order.id contains invalid UTF-8", true},
		{"invalid utf-8 in a proto3 string, then valid", shop, []int{1}, r.bytes(3, []byte{0xff}).bytes(3, []byte("ok")),
			"field shop.Order.id contains invalid UTF-8", true},
		{"wrong wire type", shop, []int{1}, r.bytes(1, []byte("12")),
			"field shop.Order.amount has wire type 2, not 0", true},
		{"wrong wire type in a nested message", shop, []int{1}, r.bytes(4, r.fixed32(2, 1)),
			"field shop.Order.Line.qty has wire type 5, not 0", true},
		{"wrong wire type for a message", shop, []int{1}, r.varint(4, 1),
			"field shop.Order.first has wire type 0, not 2", true},
		{"wrong wire type for a map", shop, []int{1}, r.varint(7, 1),
			"field shop.Order.by_name has wire type 0, not 2", true},
		{"wrong wire type for a repeated string", shop, []int{1}, r.fixed32(15, 1),
			"field shop.Order.tags has wire type 5, not 2", true},
		{"map key twice, then with another wire type (panics in the protobuf module)", shop, []int{1},
			r.bytes(7, r.bytes(1, []byte("k")).varint(1, 1).varint(2, 1)),
			"the protobuf decoder failed on the payload: type mismatch: cannot convert nil to map key", true},
		{"timestamp seconds too large", shop, []int{2}, r.bytes(1, r.varint(1, 253402300800)),
			"google.protobuf.Timestamp out of range", true},
		{"timestamp seconds too small", shop, []int{2}, r.bytes(1, r.varint(1, 1<<64-62135596801)),
			"google.protobuf.Timestamp out of range", true},
		{"timestamp seconds overflow ms", shop, []int{2}, r.bytes(1, r.varint(1, 1<<63)),
			"google.protobuf.Timestamp out of range", true},
		{"timestamp negative nanos", shop, []int{2}, r.bytes(1, r.varint(2, 1<<64-1)),
			"google.protobuf.Timestamp out of range", true},
		{"timestamp nanos too large", shop, []int{2}, r.bytes(1, r.varint(2, 1e9)),
			"google.protobuf.Timestamp out of range", true},
		{"timestamp in a list out of range", shop, []int{2}, r.bytes(19, r.varint(2, 1e9)),
			"google.protobuf.Timestamp out of range", true},
		{"duration too long", shop, []int{2}, r.bytes(2, r.varint(1, 315576000001)),
			"google.protobuf.Duration out of range", true},
		{"duration nanos too large", shop, []int{2}, r.bytes(2, r.varint(2, 1e9)),
			"google.protobuf.Duration out of range", true},
		{"duration mixed signs", shop, []int{2}, r.bytes(2, r.varint(1, 1).varint(2, 1<<64-1)),
			"google.protobuf.Duration has seconds and nanos of different signs", true},
		{"duration in a map out of range", shop, []int{2},
			r.bytes(20, r.bytes(1, []byte("k")).bytes(2, r.varint(2, 1<<64-1e9))),
			"google.protobuf.Duration out of range", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, _, err := runProto(t, c.fd, c.index, nil, c.payload)
			if c.err {
				if err == nil || err.Error() != c.want {
					t.Fatalf("err %v, want %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
			if !json.Valid([]byte(got)) {
				t.Errorf("not valid JSON: %s", got)
			}
		})
	}
}

func TestProtoTimestampField(t *testing.T) {
	shop := compileShop(t)
	order := protoMessageAt(shop, []int{1})
	cases := []struct {
		name   string
		tsPath []string
		text   string
		want   Instant
	}{
		{"nested through a dependency", []string{"meta", "event", "at"},
			`meta { event { at { seconds: 1700000000 nanos: 999999999 } } }`, Instant{MS: 1700000000999, OK: true}},
		{"top-level field", []string{"created"}, `created { seconds: 1 nanos: 2000000 }`, Instant{MS: 1002, OK: true}},
		{"pre-1970 with nanos floors", []string{"created"}, `created { seconds: -1 nanos: 999999 }`,
			Instant{MS: -1000, OK: true}},
		{"pre-1970 whole millisecond", []string{"created"}, `created { seconds: -2 nanos: 1000000 }`,
			Instant{MS: -1999, OK: true}},
		{"epoch, set but empty", []string{"created"}, `created { }`, Instant{MS: 0, OK: true}},
		{"field unset", []string{"created"}, `amount: 1`, Instant{}},
		{"outer message unset", []string{"meta", "event", "at"}, `created { seconds: 1 }`, Instant{}},
		{"inner message unset", []string{"meta", "event", "at"}, `meta { event { kind: "k" } }`, Instant{}},
		{"not a timestamp", []string{"amount"}, `amount: 5`, Instant{}},
		{"a message but not a timestamp", []string{"meta", "event"}, `meta { event { at { seconds: 1 } } }`, Instant{}},
		{"path past the timestamp", []string{"created", "seconds"}, `created { seconds: 1 }`, Instant{}},
		{"no such field", []string{"meta", "nope"}, `meta { note: "x" }`, Instant{}},
		{"through a repeated field", []string{"lines", "sku"}, `lines { sku: "x" }`, Instant{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ts, err := runProto(t, shop, []int{1}, c.tsPath, protoPayload(t, order, c.text))
			if err != nil {
				t.Fatal(err)
			}
			if ts != c.want {
				t.Errorf("ts %+v, want %+v (JSON %s)", ts, c.want, got)
			}
		})
	}
}

func TestProtoProgramIndex(t *testing.T) {
	shop := compileShop(t)
	// Order's nested types are Line, Meta and its four map entries.
	for _, index := range [][]int{{4}, {-1}, {1, 6}, {0, 0}, {1, 1, 0}, nil} {
		if _, err := newProtoProgram(shop, index, nil, nil); err == nil {
			t.Errorf("index %v: no error", index)
		}
	}
	_, err := newProtoProgram(shop, []int{1, 6}, nil, nil)
	if want := "protobuf message index 6 out of range: 6 message types"; err == nil || err.Error() != want {
		t.Errorf("err %v, want %q", err, want)
	}
	p, err := newProtoProgram(shop, []int{1, 0}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.(*protoProgram).typ.Descriptor().FullName(); got != "shop.Order.Line" {
		t.Errorf("index [1, 0] is %s", got)
	}
}

func TestCompileProtoFile(t *testing.T) {
	cases := []struct {
		name string
		main string
		deps map[string]string
		err  string // a substring of the error; "": none
	}{
		{"syntax error", "syntax = \"proto3\";\nmessage M {\n  int32 x = ;\n}\n", nil,
			`<schema>:3:13: syntax error: unexpected ';'`},
		{"syntax error in a dep", "syntax = \"proto3\";\nimport \"d.proto\";\n",
			map[string]string{"d.proto": "syntax = \"proto3\";\nmessage {"}, `d.proto:2:9: syntax error`},
		{"unknown type", "syntax = \"proto3\";\nmessage M {\n  Nope x = 1;\n}\n", nil,
			`<schema>:3:3: field M.x: unknown type Nope`},
		{"missing import", "syntax = \"proto3\";\nimport \"gone.proto\";\n", nil, `gone.proto`},
		{"well-known type not imported", "syntax = \"proto3\";\nmessage M {\n  google.protobuf.Timestamp t = 1;\n}\n",
			nil, `unknown type google.protobuf.Timestamp`},
		{"transitive deps", "syntax = \"proto3\";\nimport \"a.proto\";\nmessage M {\n  b.B x = 1;\n}\n",
			map[string]string{
				"a.proto": "syntax = \"proto3\";\nimport public \"b/b.proto\";\n",
				"b/b.proto": "syntax = \"proto3\";\npackage b;\nimport \"google/protobuf/empty.proto\";\n" +
					"message B {\n  google.protobuf.Empty e = 1;\n}\n",
			}, ""},
		{"a dep's copy of a standard import is not used", "syntax = \"proto3\";\nimport \"google/protobuf/timestamp.proto\";\n" +
			"message M {\n  google.protobuf.Timestamp t = 1;\n}\n",
			map[string]string{"google/protobuf/timestamp.proto": "not a proto file"}, ""},
		{"editions", "edition = \"2023\";\nmessage M {\n  int32 x = 1;\n}\n", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fd, err := compileProtoFile(c.main, c.deps)
			if c.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if fd.Path() != protoMainFile || fd.Messages().Len() != 1 {
					t.Errorf("file %s with %d messages", fd.Path(), fd.Messages().Len())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("err %v, want one with %q", err, c.err)
			}
		})
	}
}

// An editions file's fields have presence unless a feature says otherwise.
func TestProtoEditionsPresence(t *testing.T) {
	fd, err := compileProtoFile("edition = \"2023\";\nmessage M {\n  int32 x = 1;\n"+
		"  int32 y = 2 [features.field_presence = IMPLICIT];\n}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := runProto(t, fd, []int{0}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"y":0}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// Programs of one schema (one Decoder each) run at once: they share the
// compiled descriptors, nothing else.
func TestProtoConcurrent(t *testing.T) {
	shop := compileShop(t)
	order := protoMessageAt(shop, []int{1})
	payloads := make([][]byte, 8)
	wants := make([]string, len(payloads))
	ref, err := newProtoProgram(shop, []int{1}, []string{"created"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range payloads {
		payloads[i] = protoPayload(t, order, `amount: `+string(rune('0'+i))+
			` by_id { key: 2 value: "b" } by_id { key: 1 value: "a" } created { seconds: 1 } lines { qty: 1 }`)
		out, err := ref.(*protoProgram).appendJSONReference(nil, payloads[i], new(Instant))
		if err != nil {
			t.Fatal(err)
		}
		wants[i] = string(out)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			p, err := newProtoProgram(shop, []int{1}, []string{"created"}, nil)
			if err != nil {
				t.Error(err)
				return
			}
			var buf []byte
			for n := range 500 {
				i := (g + n) % len(payloads)
				var ts Instant
				var err error
				buf, err = p.appendJSON(buf[:0], payloads[i], &ts)
				if err != nil || string(buf) != wants[i] || ts != (Instant{MS: 1000, OK: true}) {
					t.Errorf("goroutine %d: %s, %v, %+v", g, buf, err, ts)
					return
				}
			}
		})
	}
	wg.Wait()
}

// appendSecondsNanos writes what appendMillisDecimal does for the values
// whose nanoseconds fit an int64.
func TestAppendSecondsNanos(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		sec := rng.Int64N(18e9+1) - 9e9
		var nanos int64
		switch rng.IntN(4) {
		case 0: // whole milliseconds
			nanos = rng.Int64N(1000) * 1e6
		case 1: // small
			nanos = rng.Int64N(1000)
		default:
			nanos = rng.Int64N(1e9)
		}
		if rng.IntN(2) == 0 { // both signs, as Durations and Timestamps have
			nanos = -nanos
		}
		got := string(appendSecondsNanos(nil, sec, nanos))
		want := string(appendMillisDecimal(nil, sec*1e9+nanos, 6))
		if got != want {
			t.Fatalf("%d s %d ns: %s, want %s", sec, nanos, got, want)
		}
	}
}

// benchOrderText is an Order with nested messages, maps and repeated
// fields.
const benchOrderText = `amount: 1234 coupon: "SAVE" id: "order-1" first { sku: "a" qty: 2 } lines { sku: "b" qty: 1 } ` +
	`codes: [3, 1] by_name { key: "z" value: 1 } by_name { key: "a" value: 2 } cash: 7 ` +
	`meta { event { at { seconds: 1700000000 nanos: 5000000 } kind: "k" } } created { seconds: 1700000000 }`

// BenchmarkProtoOrder reads benchOrderText's payload in place and, as
// reference, with dynamicpb.
func BenchmarkProtoOrder(b *testing.B) {
	shop, err := compileProtoFile(protoShop, map[string]string{"common.proto": protoCommon})
	if err != nil {
		b.Fatal(err)
	}
	m := dynamicpb.NewMessage(protoMessageAt(shop, []int{1}))
	if err := prototext.Unmarshal([]byte(benchOrderText), m); err != nil {
		b.Fatal(err)
	}
	payload, err := proto.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	p, err := newProtoProgram(shop, []int{1}, []string{"meta", "event", "at"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		read func([]byte, []byte, *Instant) ([]byte, error)
	}{{"in-place", p.appendJSON}, {"dynamicpb", p.(*protoProgram).appendJSONReference}} {
		b.Run(c.name, func(b *testing.B) {
			var buf []byte
			var ts Instant
			b.ReportAllocs()
			b.SetBytes(int64(len(payload)))
			for b.Loop() {
				if buf, err = c.read(buf[:0], payload, &ts); err != nil || !ts.OK {
					b.Fatal(err)
				}
			}
		})
	}
}
