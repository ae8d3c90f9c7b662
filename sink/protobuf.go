package sink

import (
	"encoding/binary"
	"math"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/windowd/windowd/windowing"
)

// A pane in Protobuf (output.format: protobuf; docs/SEMANTICS.md, Output):
// the message Pane of ProtoSchema, the only top-level message, so that a
// record's message indexes are [0]. Its fields are the pane JSON's; an
// aggregate is field number i+1 of Aggregates (its position in the
// configuration), a scalar one a wrapper (google.protobuf.Int64Value or
// DoubleValue: unset where the JSON has null; wrappers rather than proto3
// optional, whose presence some registries' parsers drop), quantiles a map
// (a quantile without a value is left out), top_k a repeated TopKEntry.

const protoHead = `syntax = "proto3";
package windowd;

import "google/protobuf/wrappers.proto";

// A window's result (windowd docs/SEMANTICS.md, Output). A field the pane
// JSON may have as null (or leave out) is a wrapper message, unset then.
message Pane {
  string key = 1;
  Window window = 2;
  Info pane = 3;
  bool retraction = 4;
  Aggregates aggregates = 5;
  repeated string partial = 6;

  message Window {
    int64 start = 1;
    int64 end = 2;
    google.protobuf.Int64Value first_time = 3;
    google.protobuf.Int64Value last_time = 4;
    google.protobuf.StringValue time_zone = 5;
    google.protobuf.StringValue local_start = 6;
    google.protobuf.StringValue local_end = 7;
  }
  message Info {
    string timing = 1;
    int64 index = 2;
    bool final = 3;
    string mode = 4;
    google.protobuf.Int32Value partition = 5;
    bool quiet = 6;
    bool timeout = 7;
  }
  message TopKEntry {
    string value = 1;
    int64 count = 2;
    int64 error = 3;
  }
  message Aggregates {
`

// ProtoSchema is the Protobuf schema (a .proto file) of the panes of
// aggregates specs.
func ProtoSchema(specs []windowing.AggSpec) string {
	var b strings.Builder
	b.WriteString(protoHead)
	for i := range specs {
		s := &specs[i]
		b.WriteString("    ")
		switch s.Op {
		case windowing.Count, windowing.DistinctApprox:
			b.WriteString("google.protobuf.Int64Value ")
		case windowing.Quantiles:
			b.WriteString("map<string, double> ")
		case windowing.TopK:
			b.WriteString("repeated TopKEntry ")
		default:
			b.WriteString("google.protobuf.DoubleValue ")
		}
		b.WriteString(s.Name)
		b.WriteString(" = ")
		b.WriteString(strconv.Itoa(i + 1))
		b.WriteString(";\n")
	}
	b.WriteString("  }\n}\n")
	return b.String()
}

// Protobuf wire types.
const (
	protoVarint  = 0
	protoFixed64 = 1
	protoLen     = 2
)

// ProtoPanes encodes panes as the message Pane of ProtoSchema(specs),
// after a prefix (WirePrefix). Nested messages are built in scratch
// buffers of its own: one goroutine at a time uses it.
type ProtoPanes struct {
	specs   []windowing.AggSpec
	prefix  []byte
	msg     []byte // a nested message of the pane
	aggs    []byte // the Aggregates message
	entry   []byte // a map entry or TopKEntry
	partial []string
}

// protoPaneHeaders name the message of every Protobuf pane.
var protoPaneHeaders = []kgo.RecordHeader{{Key: HeaderMessageType, Value: []byte("Pane")}}

func (e *ProtoPanes) headers() []kgo.RecordHeader { return protoPaneHeaders }

// NewProtoPanes returns the encoder of panes of specs, each value starting
// with prefix.
func NewProtoPanes(specs []windowing.AggSpec, prefix []byte) *ProtoPanes {
	return &ProtoPanes{specs: specs, prefix: prefix}
}

// Append appends p's value.
func (e *ProtoPanes) Append(b []byte, p *windowing.Pane) []byte {
	b = append(b, e.prefix...)
	b = protoString(b, 1, p.Key)

	w := protoInt(e.msg[:0], 1, p.Start)
	w = protoInt(w, 2, p.End)
	if p.Records {
		w = protoWrappedInt(w, 3, p.FirstTime)
		w = protoWrappedInt(w, 4, p.LastTime)
	}
	if p.Zone != nil {
		var buf [40]byte
		w = protoWrappedString(w, 5, p.Zone.String())
		w = protoWrappedString(w, 6, string(windowing.AppendLocal(buf[:0], p.Start, p.Zone)))
		w = protoWrappedString(w, 7, string(windowing.AppendLocal(buf[:0], p.End, p.Zone)))
	}
	b = protoBytes(b, 2, w)

	w = protoString(w[:0], 1, p.Timing.String())
	w = protoInt(w, 2, int64(p.Index))
	w = protoBool(w, 3, p.Final)
	w = protoString(w, 4, p.Mode.String())
	if p.HasPartition {
		w = protoWrappedInt(w, 5, int64(p.Partition))
	}
	w = protoBool(w, 6, p.Quiet)
	w = protoBool(w, 7, p.TimedOut)
	b = protoBytes(b, 3, w)
	e.msg = w

	b = protoBool(b, 4, p.Retraction)
	a := e.aggs[:0]
	for i := range e.specs {
		var v windowing.Value
		if i < len(p.Values) {
			v = p.Values[i]
		}
		a = e.appendValue(a, uint64(i+1), &e.specs[i], v)
	}
	b = protoBytes(b, 5, a)
	e.aggs = a
	if p.Partial != 0 {
		e.partial = p.PartialNames(e.partial[:0], e.specs)
		for _, n := range e.partial {
			b = protoOptString(b, 6, n)
		}
	}
	return b
}

// appendValue appends aggregate s's value v as field num of Aggregates.
func (e *ProtoPanes) appendValue(b []byte, num uint64, s *windowing.AggSpec, v windowing.Value) []byte {
	switch s.Op {
	case windowing.Quantiles:
		if v.Kind == windowing.RawValue {
			gjson.Parse(v.Raw).ForEach(func(k, q gjson.Result) bool {
				if q.Type == gjson.Number {
					en := protoOptString(e.entry[:0], 1, k.Str)
					en = protoOptDouble(en, 2, q.Num)
					b = protoBytes(b, num, en)
					e.entry = en
				}
				return true
			})
		}
		return b
	case windowing.TopK:
		if v.Kind == windowing.RawValue {
			for _, t := range gjson.Parse(v.Raw).Array() {
				en := protoString(e.entry[:0], 1, t.Get("value").Str)
				en = protoInt(en, 2, t.Get("count").Int())
				en = protoInt(en, 3, t.Get("error").Int())
				b = protoBytes(b, num, en)
				e.entry = en
			}
		}
		return b
	case windowing.Count, windowing.DistinctApprox:
		if v.Kind == windowing.IntValue {
			b = protoWrappedInt(b, num, v.Int)
		}
		return b
	}
	switch v.Kind {
	case windowing.NumValue:
		if !math.IsNaN(v.Num) && !math.IsInf(v.Num, 0) {
			b = protoWrappedDouble(b, num, v.Num)
		}
	case windowing.IntValue:
		b = protoWrappedDouble(b, num, float64(v.Int))
	}
	return b
}

func protoTag(b []byte, num uint64, wire byte) []byte {
	return binary.AppendUvarint(b, num<<3|uint64(wire))
}

// protoOptInt appends an int64 (or int32) field whatever its value.
func protoOptInt(b []byte, num uint64, v int64) []byte {
	return binary.AppendUvarint(protoTag(b, num, protoVarint), uint64(v))
}

// protoInt appends an int64 field without presence: left out when 0.
func protoInt(b []byte, num uint64, v int64) []byte {
	if v == 0 {
		return b
	}
	return protoOptInt(b, num, v)
}

func protoBool(b []byte, num uint64, v bool) []byte {
	if !v {
		return b
	}
	return append(protoTag(b, num, protoVarint), 1)
}

func protoOptDouble(b []byte, num uint64, f float64) []byte {
	return binary.LittleEndian.AppendUint64(protoTag(b, num, protoFixed64), math.Float64bits(f))
}

func protoOptString(b []byte, num uint64, s string) []byte {
	b = binary.AppendUvarint(protoTag(b, num, protoLen), uint64(len(s)))
	return append(b, s...)
}

// protoString appends a string field without presence: left out when "".
func protoString(b []byte, num uint64, s string) []byte {
	if s == "" {
		return b
	}
	return protoOptString(b, num, s)
}

// protoWrappedInt appends field num as a google.protobuf.Int64Value (or
// Int32Value) of v: a message of v as field 1, empty when v is 0.
func protoWrappedInt(b []byte, num uint64, v int64) []byte {
	if v == 0 {
		return append(protoTag(b, num, protoLen), 0)
	}
	n := 1 + protoVarintLen(uint64(v))
	return protoOptInt(append(protoTag(b, num, protoLen), byte(n)), 1, v)
}

// protoWrappedDouble appends field num as a google.protobuf.DoubleValue
// of f (0 included: its value field is then left out).
func protoWrappedDouble(b []byte, num uint64, f float64) []byte {
	if f == 0 && !math.Signbit(f) {
		return append(protoTag(b, num, protoLen), 0)
	}
	return protoOptDouble(append(protoTag(b, num, protoLen), 9), 1, f)
}

// protoWrappedString appends field num as a google.protobuf.StringValue
// of s.
func protoWrappedString(b []byte, num uint64, s string) []byte {
	inner := 0
	if s != "" {
		inner = 1 + protoVarintLen(uint64(len(s))) + len(s)
	}
	b = binary.AppendUvarint(protoTag(b, num, protoLen), uint64(inner))
	return protoString(b, 1, s)
}

// protoVarintLen is the length of v as a varint.
func protoVarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// protoBytes appends a message field (written even when empty: the
// pane's nested messages are always there).
func protoBytes(b []byte, num uint64, m []byte) []byte {
	b = binary.AppendUvarint(protoTag(b, num, protoLen), uint64(len(m)))
	return append(b, m...)
}
