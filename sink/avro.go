package sink

import (
	"encoding/binary"
	"math"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/windowd/windowd/codec"
	"github.com/windowd/windowd/windowing"
)

// A pane in Avro (output.format: avro; docs/SEMANTICS.md, Output). The
// schema has the pane JSON's shape: every pane field is there for every
// window type (a count window's first and last times and a calendar
// window's zone and local bounds are null elsewhere), so that only the
// aggregates differ between pipelines and an aggregate added to a pipeline
// is a field with a default: a compatible change.

// avroEnvelope is the schema around the aggregates record, split where
// the aggregates' fields go.
const avroEnvelopeHead = `{"type":"record","name":"Pane","namespace":"windowd","doc":"A window's result (windowd docs/SEMANTICS.md, Output).","fields":[` +
	`{"name":"key","type":"string"},` +
	`{"name":"window","type":{"type":"record","name":"Window","fields":[` +
	`{"name":"start","type":"long"},{"name":"end","type":"long"},` +
	`{"name":"first_time","type":["null","long"],"default":null},{"name":"last_time","type":["null","long"],"default":null},` +
	`{"name":"time_zone","type":["null","string"],"default":null},` +
	`{"name":"local_start","type":["null","string"],"default":null},{"name":"local_end","type":["null","string"],"default":null}]}},` +
	`{"name":"pane","type":{"type":"record","name":"PaneInfo","fields":[` +
	`{"name":"timing","type":"string"},{"name":"index","type":"long"},{"name":"final","type":"boolean"},{"name":"mode","type":"string"},` +
	`{"name":"partition","type":["null","int"],"default":null},` +
	`{"name":"quiet","type":"boolean","default":false},{"name":"timeout","type":"boolean","default":false}]}},` +
	`{"name":"retraction","type":"boolean"},` +
	`{"name":"aggregates","type":{"type":"record","name":"Aggregates","fields":[`

const avroEnvelopeTail = `]}},{"name":"partial","type":{"type":"array","items":"string"},"default":[]}]}`

// AvroSchema is the Avro schema of the panes of aggregates specs.
func AvroSchema(specs []windowing.AggSpec) string {
	var b strings.Builder
	b.WriteString(avroEnvelopeHead)
	topK := false
	for i := range specs {
		s := &specs[i]
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"name":`)
		b.Write(codec.AppendJSONString(nil, s.Name))
		b.WriteString(`,"type":`)
		switch s.Op {
		case windowing.Count, windowing.DistinctApprox:
			b.WriteString(`["null","long"],"default":null`)
		case windowing.Quantiles:
			b.WriteString(`{"type":"map","values":["null","double"]},"default":{}`)
		case windowing.TopK:
			if topK {
				b.WriteString(`{"type":"array","items":"TopKEntry"},"default":[]`)
			} else {
				b.WriteString(`{"type":"array","items":{"type":"record","name":"TopKEntry","fields":[` +
					`{"name":"value","type":"string"},{"name":"count","type":"long"},{"name":"error","type":"long"}]}},"default":[]`)
				topK = true
			}
		default: // sum, min, max, avg
			b.WriteString(`["null","double"],"default":null`)
		}
		b.WriteByte('}')
	}
	b.WriteString(avroEnvelopeTail)
	return b.String()
}

// AvroPanes encodes panes in Avro's binary encoding of AvroSchema(specs),
// after a prefix (the Confluent wire format's magic byte and schema id).
type AvroPanes struct {
	specs  []windowing.AggSpec
	prefix []byte
}

// NewAvroPanes returns the encoder of panes of specs, each value starting
// with prefix.
func NewAvroPanes(specs []windowing.AggSpec, prefix []byte) *AvroPanes {
	return &AvroPanes{specs: specs, prefix: prefix}
}

// Append appends p's value.
func (e *AvroPanes) Append(b []byte, p *windowing.Pane) []byte {
	b = append(b, e.prefix...)
	b = avroString(b, p.Key)
	b = avroLong(b, p.Start)
	b = avroLong(b, p.End)
	if p.Records {
		b = avroLong(avroLong(b, 1), p.FirstTime)
		b = avroLong(avroLong(b, 1), p.LastTime)
	} else {
		b = append(b, 0, 0) // null, null
	}
	if p.Zone != nil {
		b = avroString(avroLong(b, 1), p.Zone.String())
		b = avroLong(b, 1)
		b = avroLocal(b, p.Start, p)
		b = avroLong(b, 1)
		b = avroLocal(b, p.End, p)
	} else {
		b = append(b, 0, 0, 0)
	}
	b = avroString(b, p.Timing.String())
	b = avroLong(b, int64(p.Index))
	b = avroBool(b, p.Final)
	b = avroString(b, p.Mode.String())
	if p.HasPartition {
		b = avroLong(avroLong(b, 1), int64(p.Partition))
	} else {
		b = append(b, 0)
	}
	b = avroBool(b, p.Quiet)
	b = avroBool(b, p.TimedOut)
	b = avroBool(b, p.Retraction)
	for i := range e.specs {
		var v windowing.Value
		if i < len(p.Values) {
			v = p.Values[i]
		}
		b = e.appendValue(b, &e.specs[i], v)
	}
	if p.Partial == 0 {
		return append(b, 0)
	}
	names := p.PartialNames(nil, e.specs)
	b = avroLong(b, int64(len(names)))
	for _, n := range names {
		b = avroString(b, n)
	}
	return append(b, 0)
}

// appendValue appends aggregate s's value v.
func (e *AvroPanes) appendValue(b []byte, s *windowing.AggSpec, v windowing.Value) []byte {
	switch s.Op {
	case windowing.Quantiles:
		if v.Kind != windowing.RawValue {
			return append(b, 0)
		}
		r := gjson.Parse(v.Raw)
		n := 0
		r.ForEach(func(_, _ gjson.Result) bool { n++; return true })
		if n == 0 {
			return append(b, 0)
		}
		b = avroLong(b, int64(n))
		r.ForEach(func(k, q gjson.Result) bool {
			b = avroString(b, k.Str)
			if q.Type == gjson.Number {
				b = avroDouble(avroLong(b, 1), q.Num)
			} else {
				b = append(b, 0)
			}
			return true
		})
		return append(b, 0)
	case windowing.TopK:
		if v.Kind != windowing.RawValue {
			return append(b, 0)
		}
		entries := gjson.Parse(v.Raw).Array()
		if len(entries) == 0 {
			return append(b, 0)
		}
		b = avroLong(b, int64(len(entries)))
		for _, en := range entries {
			b = avroString(b, en.Get("value").Str)
			b = avroLong(b, en.Get("count").Int())
			b = avroLong(b, en.Get("error").Int())
		}
		return append(b, 0)
	case windowing.Count, windowing.DistinctApprox:
		if v.Kind != windowing.IntValue {
			return append(b, 0)
		}
		return avroLong(avroLong(b, 1), v.Int)
	}
	switch v.Kind {
	case windowing.NumValue:
		if math.IsNaN(v.Num) || math.IsInf(v.Num, 0) {
			return append(b, 0) // null, as in the pane JSON
		}
		return avroDouble(avroLong(b, 1), v.Num)
	case windowing.IntValue:
		return avroDouble(avroLong(b, 1), float64(v.Int))
	}
	return append(b, 0)
}

// avroLocal appends the local time of ms in the pane's zone as an Avro
// string (windowing.AppendLocal's text).
func avroLocal(b []byte, ms int64, p *windowing.Pane) []byte {
	var buf [40]byte
	return avroString(b, string(windowing.AppendLocal(buf[:0], ms, p.Zone)))
}

func avroLong(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

func avroString(b []byte, s string) []byte {
	return append(binary.AppendVarint(b, int64(len(s))), s...)
}

func avroBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func avroDouble(b []byte, f float64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
}
