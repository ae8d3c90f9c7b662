package schema

import (
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// protoEditions has what editions files add: delimited (group-encoded)
// messages, implicit presence, strings without UTF-8 checks, packed and
// expanded lists, closed enums.
const protoEditions = `edition = "2023";
package ed;
enum Closed {
  option features.enum_type = CLOSED;
  ONE = 1;
  TWO = 2;
}
message Inner {
  int32 a = 1;
  string s = 2 [features.utf8_validation = NONE];
}
message E {
  Inner delim = 1 [features.message_encoding = DELIMITED];
  repeated Inner delims = 2 [features.message_encoding = DELIMITED];
  int64 implicit = 3 [features.field_presence = IMPLICIT];
  string loose = 4 [features.utf8_validation = NONE];
  string strict = 5;
  repeated sint32 expanded = 6 [features.repeated_field_encoding = EXPANDED];
  repeated double packed = 7;
  Closed closed = 8;
  repeated Closed closeds = 9;
  map<sfixed32, Inner> by_sf = 10;
  map<fixed64, bytes> by_f = 11;
  map<sint64, double> by_s = 12;
  oneof choice {
    Inner in = 13;
    float f = 14;
    bool b = 15;
  }
  uint32 u = 16 [features.field_presence = IMPLICIT];
}
`

// protoSchemas are the message types the differential tests read: every
// field type, well-known type, presence and encoding the reader handles.
func protoSchemas(t testing.TB) []protoreflect.MessageDescriptor {
	t.Helper()
	shop, err := compileProtoFile(protoShop, map[string]string{"common.proto": protoCommon})
	if err != nil {
		t.Fatal(err)
	}
	var mds []protoreflect.MessageDescriptor
	for _, index := range [][]int{{0}, {1}, {1, 0}, {1, 1}, {2}, {3}} {
		mds = append(mds, protoMessageAt(shop, index))
	}
	for _, text := range []string{protoLegacy, protoEditions, protoTimestampOnly} {
		fd, err := compileProtoFile(text, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range fd.Messages().Len() {
			mds = append(mds, fd.Messages().Get(i))
		}
	}
	return mds
}

// protoRandom fills m with random values: each field set or not, values
// at their extremes often, nested messages to a few levels.
func protoRandom(rng *rand.Rand, m protoreflect.Message, depth int) {
	fds := m.Descriptor().Fields()
	for i := range fds.Len() {
		fd := fds.Get(i)
		if rng.IntN(3) == 0 {
			continue
		}
		if fd.Message() != nil && depth > 3 && !fd.IsMap() {
			continue
		}
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			for range rng.IntN(4) {
				if fd.Message() != nil {
					e := l.NewElement()
					protoRandom(rng, e.Message(), depth+1)
					l.Append(e)
				} else {
					l.Append(protoRandomScalar(rng, fd))
				}
			}
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for range rng.IntN(4) {
				k := protoRandomScalar(rng, fd.MapKey()).MapKey()
				if fd.MapValue().Message() != nil {
					v := mp.NewValue()
					if depth <= 3 {
						protoRandom(rng, v.Message(), depth+1)
					}
					mp.Set(k, v)
				} else {
					mp.Set(k, protoRandomScalar(rng, fd.MapValue()))
				}
			}
		case fd.Message() != nil:
			protoRandom(rng, m.Mutable(fd).Message(), depth+1)
		default:
			m.Set(fd, protoRandomScalar(rng, fd))
		}
	}
	// Timestamps and Durations mostly in range.
	if name := m.Descriptor().FullName(); (name == "google.protobuf.Timestamp" || name == "google.protobuf.Duration") && rng.IntN(8) > 0 {
		sec, nanos := rng.Int64N(1e11)-5e10, rng.Int64N(1e9)
		if name == "google.protobuf.Timestamp" {
			sec = rng.Int64N(253402300799+62135596800) - 62135596800
		} else if sec < 0 {
			nanos = -nanos
		}
		m.Set(fds.ByNumber(1), protoreflect.ValueOfInt64(sec))
		m.Set(fds.ByNumber(2), protoreflect.ValueOfInt32(int32(nanos)))
	}
}

// protoRandomScalar is a random value of scalar field fd.
func protoRandomScalar(rng *rand.Rand, fd protoreflect.FieldDescriptor) protoreflect.Value {
	u := rng.Uint64()
	switch rng.IntN(4) {
	case 0:
		u = 0
	case 1:
		u = math.MaxUint64 - uint64(rng.IntN(3))
	case 2:
		u = uint64(rng.IntN(300))
	}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(u&1 == 1)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(int32(u % 5)))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(u))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(u))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(u))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(u)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32([]float32{0, -1.5, float32(math.NaN()), float32(math.Inf(1)), math.SmallestNonzeroFloat32, float32(u) / 7}[rng.IntN(6)])
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64([]float64{0, -0.1, math.NaN(), math.Inf(-1), 1e300, float64(u) / 7}[rng.IntN(6)])
	case protoreflect.StringKind:
		return protoreflect.ValueOfString([]string{"", "a", "é\"\\\n\x01", "zz", "\u2028<>&", "日本"}[rng.IntN(6)])
	default: // bytes
		return protoreflect.ValueOfBytes([]byte{byte(u), byte(u >> 8), 0xff}[:rng.IntN(4)])
	}
}

// protoMutate changes payload the ways producers and corruption do: the
// fields in another order, unknown fields added, a packed list expanded,
// the payload or a field written twice (a merge), cut short, a byte
// changed, a known field number with another wire type.
func protoMutate(rng *rand.Rand, payload []byte) []byte {
	switch rng.IntN(7) {
	case 0: // fields in reverse order
		var fields [][]byte
		for b := payload; len(b) > 0; {
			num, wire, n := protowire.ConsumeTag(b)
			if n < 0 {
				return payload
			}
			m := protowire.ConsumeFieldValue(num, wire, b[n:])
			if m < 0 {
				return payload
			}
			fields = append(fields, b[:n+m])
			b = b[n+m:]
		}
		slices.Reverse(fields)
		return slices.Concat(fields...)
	case 1: // unknown fields of every wire type
		var u []byte
		u = protowire.AppendVarint(protowire.AppendTag(u, 900, protowire.VarintType), 7)
		u = protowire.AppendBytes(protowire.AppendTag(u, 901, protowire.BytesType), []byte("x"))
		u = protowire.AppendFixed32(protowire.AppendTag(u, 902, protowire.Fixed32Type), 1)
		u = protowire.AppendFixed64(protowire.AppendTag(u, 903, protowire.Fixed64Type), 1)
		u = protowire.AppendTag(u, 904, protowire.StartGroupType)
		u = protowire.AppendTag(u, 904, protowire.EndGroupType)
		at := 0
		if rng.IntN(2) == 0 {
			at = len(payload)
		}
		return slices.Concat(payload[:at], u, payload[at:])
	case 2: // the payload twice: singular fields set again, messages merged, lists and maps longer
		return slices.Concat(payload, payload)
	case 3: // cut short
		if len(payload) == 0 {
			return payload
		}
		return payload[:rng.IntN(len(payload))]
	case 4: // a byte changed
		if len(payload) == 0 {
			return payload
		}
		p := slices.Clone(payload)
		p[rng.IntN(len(p))] ^= byte(1 + rng.IntN(255))
		return p
	case 5: // a known field number with each wire type
		num := protowire.Number(1 + rng.IntN(20))
		p := slices.Clone(payload)
		switch rng.IntN(3) {
		case 0:
			return protowire.AppendVarint(protowire.AppendTag(p, num, protowire.VarintType), uint64(rng.IntN(3)))
		case 1:
			return protowire.AppendFixed32(protowire.AppendTag(p, num, protowire.Fixed32Type), 1)
		default:
			return protowire.AppendBytes(protowire.AppendTag(p, num, protowire.BytesType), []byte{8, 1})
		}
	}
	// The first field again at the end.
	num, wire, n := protowire.ConsumeTag(payload)
	if n < 0 {
		return payload
	}
	m := protowire.ConsumeFieldValue(num, wire, payload[n:])
	if m < 0 {
		return payload
	}
	return slices.Concat(payload, payload[:n+m])
}

// The in-place reader writes what the reference decoder writes, byte for
// byte, and fails where it fails with its error, for random messages of
// every schema, random payload changes, and random sets of kept fields;
// and reads every payload a producer writes without the reference's help.
func TestProtoReaderDifferential(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	mds := protoSchemas(t)
	n := 3000
	if testing.Short() {
		n = 500
	}
	fast, mutated := 0, 0
	for _, md := range mds {
		var tsPath []string
		if f := md.Fields().ByName("created"); f != nil {
			tsPath = []string{"created"}
		}
		if f := md.Fields().ByName("ts"); f != nil {
			tsPath = []string{"ts"}
		}
		keeps := []func(string) bool{nil, func(name string) bool { return len(name)%2 == 0 }}
		for _, keep := range keeps {
			prog, err := newProtoProgram(md.ParentFile(), protoIndexOf(md), tsPath, keep)
			if err != nil {
				t.Fatal(err)
			}
			p := prog.(*protoProgram)
			var buf []byte
			for i := range n {
				m := dynamicpb.NewMessage(md)
				protoRandom(rng, m, 0)
				payload, err := proto.MarshalOptions{Deterministic: i%2 == 0, AllowPartial: true}.Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				changed := rng.IntN(3) == 0
				if changed {
					payload = protoMutate(rng, payload)
					mutated++
				}
				var ts, refTS Instant
				before := p.referenceReads
				buf, err = p.appendJSON(buf[:0], payload, &ts)
				got := string(buf)
				ref, refErr := p.appendJSONReference(nil, payload, &refTS)
				if (err == nil) != (refErr == nil) || err != nil && err.Error() != refErr.Error() ||
					err == nil && (got != string(ref) || ts != refTS) {
					t.Fatalf("%s, payload %x:\nin place  %s %+v %v\nreference %s %+v %v",
						md.FullName(), payload, got, ts, err, ref, refTS, refErr)
				}
				if !changed && err == nil {
					if p.referenceReads != before {
						t.Fatalf("%s: payload %x as a producer writes it was read by the reference decoder", md.FullName(), payload)
					}
					fast++
				}
			}
		}
	}
	t.Logf("%d payloads decoded in place as written, %d changed", fast, mutated)
	if fast < n*len(mds)/2 || mutated == 0 {
		t.Fatalf("only %d payloads decoded in place, %d changed", fast, mutated)
	}
}

// protoIndexOf is md's message indexes in its file.
func protoIndexOf(md protoreflect.MessageDescriptor) []int {
	var index []int
	for d := protoreflect.Descriptor(md); ; d = d.Parent() {
		if _, ok := d.(protoreflect.FileDescriptor); ok {
			break
		}
		index = append([]int{d.Index()}, index...)
	}
	return index
}

// Payloads the reader leaves to the reference decoder, and why.
func TestProtoReaderHandsOver(t *testing.T) {
	shop := compileShop(t)
	legacy, err := compileProtoFile(protoLegacy, nil)
	if err != nil {
		t.Fatal(err)
	}
	var r protoRaw
	line := r.bytes(1, []byte("a"))
	deep := []byte{}
	for range maxProtoDepth + 5 {
		deep = r.varint(1, 1).bytes(2, deep)
	}
	cases := []struct {
		name    string
		fd      protoreflect.FileDescriptor
		index   []int
		payload []byte
		want    string
	}{
		{"a singular message written twice merges", shop, []int{1}, r.bytes(4, line).bytes(4, r.varint(2, 3)),
			`{"amount":0,"id":"","first":{"sku":"a","qty":3},"lines":[],"codes":[],"by_name":{},"by_id":{},"flags":{},"colors":{},"tags":[]}`},
		{"two fields of a oneof: the last wins", shop, []int{1}, r.bytes(10, []byte("c")).varint(11, 5),
			`{"amount":0,"id":"","lines":[],"codes":[],"by_name":{},"by_id":{},"flags":{},"cash":5,"colors":{},"tags":[]}`},
		{"a map key twice: the last wins", shop, []int{1},
			r.bytes(7, r.bytes(1, []byte("k")).varint(2, 1)).bytes(7, r.bytes(1, []byte("k")).varint(2, 2)),
			`{"amount":0,"id":"","lines":[],"codes":[],"by_name":{"k":2},"by_id":{},"flags":{},"colors":{},"tags":[]}`},
		{"a map entry with an unknown field", shop, []int{1},
			r.bytes(7, r.bytes(1, []byte("k")).varint(3, 9).varint(2, 1)),
			`{"amount":0,"id":"","lines":[],"codes":[],"by_name":{"k":1},"by_id":{},"flags":{},"colors":{},"tags":[]}`},
		{"deeper than the reader follows", shop, []int{3}, deep, ""},
		{"a required field not set", legacy, []int{0}, r.varint(1, 1), "required field legacy.Rec.id not set"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prog, err := newProtoProgram(c.fd, c.index, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			p := prog.(*protoProgram)
			out, err := p.appendJSON(nil, c.payload, new(Instant))
			if p.referenceReads != 1 {
				t.Errorf("reference reads %d, want 1", p.referenceReads)
			}
			switch {
			case c.want == "":
				if err != nil {
					t.Fatal(err)
				}
			case err != nil:
				if err.Error() != c.want {
					t.Errorf("err %v, want %s", err, c.want)
				}
			case string(out) != c.want:
				t.Errorf("got  %s\nwant %s", out, c.want)
			}
		})
	}
}

// Reading a payload in place allocates nothing.
func TestProtoReaderAllocs(t *testing.T) {
	shop := compileShop(t)
	payload := protoPayload(t, protoMessageAt(shop, []int{1}), benchOrderText)
	prog, err := newProtoProgram(shop, []int{1}, []string{"meta", "event", "at"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf []byte
	var ts Instant
	allocs := testing.AllocsPerRun(100, func() {
		buf, err = prog.appendJSON(buf[:0], payload, &ts)
	})
	if err != nil || !ts.OK || prog.(*protoProgram).referenceReads != 0 {
		t.Fatalf("%v %+v %d", err, ts, prog.(*protoProgram).referenceReads)
	}
	if allocs != 0 {
		t.Errorf("%v allocations per payload", allocs)
	}
}

// BenchmarkProtoEvent reads a bench/gen record, writing only the fields
// bench/tumbling-10s-country.yaml reads.
func BenchmarkProtoEvent(b *testing.B) {
	text, err := os.ReadFile("../bench/event.proto")
	if err != nil {
		b.Fatal(err)
	}
	fd, err := compileProtoFile(string(text), nil)
	if err != nil {
		b.Fatal(err)
	}
	md := fd.Messages().Get(0)
	m := dynamicpb.NewMessage(md)
	if err := prototext.Unmarshal([]byte(`user: "u4321" ts { seconds: 1700000000 nanos: 123000000 } x: 312.07 country: "de" `+
		`page: "/products/1234" agent: "Mozilla/5.0 (X11; Linux x86_64)" session: "9e3779b97f4a7c15"`), m); err != nil {
		b.Fatal(err)
	}
	payload, err := proto.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	keep := func(name string) bool { return name == "country" || name == "ts" || name == "x" }
	p, err := newProtoProgram(fd, []int{0}, []string{"ts"}, keep)
	if err != nil {
		b.Fatal(err)
	}
	var buf []byte
	var ts Instant
	b.ReportAllocs()
	for b.Loop() {
		if buf, err = p.appendJSON(buf[:0], payload, &ts); err != nil || !ts.OK {
			b.Fatal(err)
		}
	}
}
