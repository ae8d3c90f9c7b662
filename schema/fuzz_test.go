package schema

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/windowd/windowd/config"
)

// FuzzSchemaDecode: any bytes after a wire header naming a registered Avro
// schema (every type and logical type) or Protobuf schema (scalars, maps,
// well-known types, a reference; message indexes from the bytes too) never
// panic and never take long: they decode to one valid JSON object, or to a
// *BadRecord with a reason (docs/SEMANTICS.md, Input formats). Protobuf
// values read in place (all fields, and only some) decode exactly as the
// reference decoder (dynamicpb) decodes them: the same JSON, the same
// timestamp, the same error.
func FuzzSchemaDecode(f *testing.F) {
	fake := srfake.New()
	defer fake.Close()
	avroID, _, err := fake.RegisterSchema("a", sr.Schema{Schema: allTypes})
	if err != nil {
		f.Fatal(err)
	}
	if _, _, err := fake.RegisterSchema("common", sr.Schema{Schema: protoCommon, Type: sr.TypeProtobuf}); err != nil {
		f.Fatal(err)
	}
	protoID, _, err := fake.RegisterSchema("p", sr.Schema{Schema: protoShop, Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "common.proto", Subject: "common", Version: 1}}})
	if err != nil {
		f.Fatal(err)
	}
	reg, err := New(Options{URL: fake.URL()})
	if err != nil {
		f.Fatal(err)
	}
	decoders := map[bool]*Decoder{false: NewDecoder(reg, config.Avro, "ts", nil), true: NewDecoder(reg, config.Protobuf, "created", nil)}
	// Some members only: Order's and Known's fields with even-length names.
	some := NewDecoder(reg, config.Protobuf, "", []string{"id", "first", "codes", "by_id", "flags", "cash", "meta", "ts",
		"dv", "fv", "u64v", "i32v", "u32v", "st", "lv", "nv", "mask", "durs", "next"})
	f.Add(false, []byte{10, 'a', 'b'})
	f.Add(true, []byte{0, 8, 1})
	f.Add(true, []byte{2, 2, 0x0a, 0})
	shop, err := compileProtoFile(protoShop, map[string]string{"common.proto": protoCommon})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []struct {
		index []byte // the message indexes as the wire format has them
		msg   []int
		text  string
	}{
		{[]byte{0}, []int{0}, `i32: -1 s32: -2 sf32: -3 u32: 4 f32: 5 i64: -6 s64: -7 sf64: -8 u64: 9 f64: 10 fl: -1.5 db: -0.1 b: true s: "é" by: "\x00" color: BLUE`},
		{[]byte{2, 2}, []int{1}, benchOrderText + ` by_id { key: 10 value: "ten" } flags { key: true value: "t" } colors { key: 2 value: BLUE } tags: ["x"]`},
		{[]byte{2, 4}, []int{2}, `ts { seconds: 1 nanos: 2 } dur { seconds: -1 } dv { value: 1.5 } sv { value: "s" } st { fields { key: "a" value { list_value { values { bool_value: true } } } } } nv: NULL_VALUE tss { } durs { key: "k" value { nanos: 5 } }`},
		{[]byte{2, 6}, []int{3}, `v: 1 next { v: 2 next { } }`},
	} {
		md := protoMessageAt(shop, seed.msg)
		m := dynamicpb.NewMessage(md)
		if err := prototext.Unmarshal([]byte(seed.text), m); err != nil {
			f.Fatal(err)
		}
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(true, append(slices.Clone(seed.index), b...))
	}
	f.Fuzz(func(t *testing.T, protobuf bool, payload []byte) {
		id := avroID
		if protobuf {
			id = protoID
		}
		v := append([]byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}, payload...)
		start := time.Now()
		out, ts, err := decoders[protobuf].AppendJSON(nil, v)
		if d := time.Since(start); d > time.Second+time.Duration(len(payload))*10*time.Microsecond {
			t.Fatalf("%d bytes took %v", len(payload), d)
		}
		if protobuf {
			protoAgrees(t, decoders[true], v, out, ts, err)
			someOut, someTS, someErr := some.AppendJSON(nil, v)
			protoAgrees(t, some, v, someOut, someTS, someErr)
		}
		if err != nil {
			var br *BadRecord
			if !errors.As(err, &br) || br.Reason == "" {
				t.Fatalf("error %v (%T), want a BadRecord with a reason", err, err)
			}
			return
		}
		if !json.Valid(out) || out[0] != '{' {
			t.Fatalf("not a JSON object: %q", out)
		}
	})
}

// protoAgrees fails t unless the Protobuf wire-format value v decodes
// with d's program as with the reference decoder: out, ts and err are
// d's answer.
func protoAgrees(t *testing.T, d *Decoder, v, out []byte, ts Instant, err error) {
	t.Helper()
	var br *BadRecord
	if len(v) < 5 || errors.As(err, &br) && strings.Contains(br.Reason, "message indexes") {
		return // no payload to read
	}
	index, payload, ierr := messageIndexes(nil, v[5:])
	if ierr != nil {
		t.Fatalf("indexes %v, but the decoder said %v", ierr, err)
	}
	key := progKey{id: int(binary.BigEndian.Uint32(v[1:5]))}
	if len(index) != 1 || index[0] != 0 {
		key.index = indexText(index)
	}
	prog, ok := d.progs[key]
	if !ok {
		if err == nil {
			t.Fatalf("decoded without a program")
		}
		return // no such message type
	}
	var refTS Instant
	ref, refErr := prog.(*protoProgram).appendJSONReference(nil, payload, &refTS)
	switch {
	case (err == nil) != (refErr == nil):
		t.Fatalf("in place: %v, reference: %v (payload %x)", err, refErr, payload)
	case err != nil:
		if !strings.HasSuffix(err.Error(), ": "+refErr.Error()) {
			t.Fatalf("in place: %v, reference: %v", err, refErr)
		}
	case string(out) != string(ref) || ts != refTS:
		t.Fatalf("payload %x:\nin place  %s %+v\nreference %s %+v", payload, out, ts, ref, refTS)
	}
}
