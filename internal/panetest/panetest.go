// Package panetest reads back the panes windowd writes in a binary
// output.format with decoders windowd does not use for writing
// (hamba/avro, protobuf-go's dynamicpb), and shapes the pane JSON the way
// they read a pane, so that tests can compare the two (docs/SEMANTICS.md,
// Output). It is for tests only.
package panetest

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Avro reads an Avro pane (the value after the wire prefix) written with
// the schema text schema.
func Avro(schema string, b []byte) (any, error) {
	sch, err := avro.Parse(schema)
	if err != nil {
		return nil, fmt.Errorf("schema does not parse: %w", err)
	}
	var v any
	if err := avro.Unmarshal(sch, b, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// ProtoMessage compiles the .proto text (which may import Google's
// well-known types) and returns its first top-level message, which a
// record with message indexes [0] holds.
func ProtoMessage(text string) (protoreflect.MessageDescriptor, error) {
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(protocompile.ResolverFunc(func(name string) (protocompile.SearchResult, error) {
		if name == "pane.proto" {
			return protocompile.SearchResult{Source: strings.NewReader(text)}, nil
		}
		return protocompile.SearchResult{}, fs.ErrNotExist
	}))}
	files, err := c.Compile(context.Background(), "pane.proto")
	if err != nil {
		return nil, err
	}
	if files[0].Messages().Len() == 0 {
		return nil, fmt.Errorf("no message")
	}
	return files[0].Messages().Get(0), nil
}

// Proto reads a Protobuf pane (the value after the wire prefix and the
// message indexes) as message md, in the pane JSON's shape: every field,
// a wrapper (google.protobuf.Int64Value, …) as its value or null when
// unset, as one with presence, numbers as numbers.
func Proto(md protoreflect.MessageDescriptor, b []byte) (any, error) {
	m := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, err
	}
	return protoShape(m), nil
}

func protoShape(m protoreflect.Message) map[string]any {
	out := map[string]any{}
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		name := string(fd.Name())
		switch {
		case fd.IsMap():
			mm := map[string]any{}
			m.Get(fd).Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
				mm[k.String()] = protoValue(fd.MapValue(), v)
				return true
			})
			out[name] = mm
		case fd.IsList():
			l := m.Get(fd).List()
			list := []any{}
			for j := 0; j < l.Len(); j++ {
				list = append(list, protoValue(fd, l.Get(j)))
			}
			out[name] = list
		case fd.HasPresence() && !m.Has(fd) && (fd.Kind() != protoreflect.MessageKind || wrapper(fd)):
			out[name] = nil
		case wrapper(fd):
			inner := fd.Message().Fields().ByNumber(1)
			out[name] = protoValue(inner, m.Get(fd).Message().Get(inner))
		default:
			out[name] = protoValue(fd, m.Get(fd))
		}
	}
	return out
}

// wrapper says whether fd is a message field of one of Google's wrapper
// types (google.protobuf.Int64Value, DoubleValue, StringValue, …).
func wrapper(fd protoreflect.FieldDescriptor) bool {
	return fd.Kind() == protoreflect.MessageKind && fd.Message().ParentFile().Path() == "google/protobuf/wrappers.proto"
}

func protoValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch fd.Kind() {
	case protoreflect.MessageKind:
		return protoShape(v.Message())
	case protoreflect.Int64Kind, protoreflect.Int32Kind:
		return v.Int()
	case protoreflect.DoubleKind:
		return v.Float()
	case protoreflect.BoolKind:
		return v.Bool()
	}
	return v.String()
}

// Agg names an aggregate of the pipeline and says whether it is a
// quantiles or top_k one (whose empty values the formats write as an
// empty map or list).
type Agg struct {
	Name            string
	Quantiles, TopK bool
}

// Want is the pane JSON pane as a binary format reads it: the fields the
// JSON leaves out are there, as null, false or an empty list; for
// protobuf, a quantile without a value is not in its map.
func Want(pane []byte, aggs []Agg, protobuf bool) (any, error) {
	var m map[string]any
	if err := json.Unmarshal(pane, &m); err != nil {
		return nil, err
	}
	w, _ := m["window"].(map[string]any)
	pn, _ := m["pane"].(map[string]any)
	a, _ := m["aggregates"].(map[string]any)
	if w == nil || pn == nil || a == nil {
		return nil, fmt.Errorf("not a pane: %s", pane)
	}
	for _, k := range []string{"first_time", "last_time", "time_zone", "local_start", "local_end"} {
		if _, ok := w[k]; !ok {
			w[k] = nil
		}
	}
	if _, ok := pn["partition"]; !ok {
		pn["partition"] = nil
	}
	for _, k := range []string{"quiet", "timeout"} {
		if _, ok := pn[k]; !ok {
			pn[k] = false
		}
	}
	if _, ok := m["partial"]; !ok {
		m["partial"] = []any{}
	}
	for _, g := range aggs {
		v := a[g.Name]
		switch {
		case g.Quantiles && v == nil:
			a[g.Name] = map[string]any{}
		case g.Quantiles && protobuf:
			q := v.(map[string]any)
			for k, x := range q {
				if x == nil {
					delete(q, k)
				}
			}
		case g.TopK && v == nil:
			a[g.Name] = []any{}
		}
	}
	return Canonical(m)
}

// Canonical is v as encoding/json reads it back: every number a float64,
// so that values decoded as int64 and as float64 compare.
func Canonical(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	err = json.Unmarshal(b, &out)
	return out, err
}
