package schema

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/windowd/windowd/config"
)

// FuzzSchemaDecode: any bytes after a wire header naming a registered Avro
// schema (every type and logical type) or Protobuf schema (scalars, maps,
// well-known types, a reference; message indexes from the bytes too) never
// panic and never take long: they decode to one valid JSON object, or to a
// *BadRecord with a reason (docs/SEMANTICS.md, Input formats).
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
	decoders := map[bool]*Decoder{false: NewDecoder(reg, config.Avro, "ts", nil), true: NewDecoder(reg, config.Protobuf, "", nil)}
	f.Add(false, []byte{10, 'a', 'b'})
	f.Add(true, []byte{0, 8, 1})
	f.Add(true, []byte{2, 2, 0x0a, 0})
	f.Fuzz(func(t *testing.T, protobuf bool, payload []byte) {
		id := avroID
		if protobuf {
			id = protoID
		}
		v := append([]byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}, payload...)
		start := time.Now()
		out, _, err := decoders[protobuf].AppendJSON(nil, v)
		if d := time.Since(start); d > time.Second+time.Duration(len(payload))*10*time.Microsecond {
			t.Fatalf("%d bytes took %v", len(payload), d)
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
