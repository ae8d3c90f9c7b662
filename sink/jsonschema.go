package sink

import (
	"strings"

	"github.com/windowd/windowd/codec"
	"github.com/windowd/windowd/windowing"
)

// A pane as JSON with a registered JSON Schema (output.format: json_schema;
// docs/SEMANTICS.md, Output): the value is the pane JSON itself after the
// wire format's prefix. The aggregates object is closed
// (additionalProperties: false) and no aggregate is required, so that an
// aggregate added to a pipeline is a compatible change.

const jsonSchemaHead = `{"$schema":"http://json-schema.org/draft-07/schema#","title":"windowd.Pane",` +
	`"description":"A window's result (windowd docs/SEMANTICS.md, Output).","type":"object",` +
	`"required":["key","window","pane","retraction","aggregates"],"properties":{` +
	`"key":{"type":"string"},` +
	`"window":{"type":"object","required":["start","end"],"properties":{` +
	`"start":{"type":"integer"},"end":{"type":"integer"},"first_time":{"type":"integer"},"last_time":{"type":"integer"},` +
	`"time_zone":{"type":"string"},"local_start":{"type":"string"},"local_end":{"type":"string"}}},` +
	`"pane":{"type":"object","required":["timing","index","final","mode"],"properties":{` +
	`"timing":{"type":"string","enum":["EARLY","ON_TIME","LATE"]},"index":{"type":"integer"},"final":{"type":"boolean"},` +
	`"mode":{"type":"string","enum":["accumulating","discarding","retracting"]},` +
	`"partition":{"type":"integer"},"quiet":{"type":"boolean"},"timeout":{"type":"boolean"}}},` +
	`"retraction":{"type":"boolean"},` +
	`"partial":{"type":"array","items":{"type":"string"}},` +
	`"aggregates":{"type":"object","additionalProperties":false,"properties":{`

// JSONSchema is the JSON Schema of the panes of aggregates specs.
func JSONSchema(specs []windowing.AggSpec) string {
	var b strings.Builder
	b.WriteString(jsonSchemaHead)
	for i := range specs {
		s := &specs[i]
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(codec.AppendJSONString(nil, s.Name))
		b.WriteByte(':')
		switch s.Op {
		case windowing.Count, windowing.DistinctApprox:
			b.WriteString(`{"type":["integer","null"]}`)
		case windowing.Quantiles:
			b.WriteString(`{"type":"object","additionalProperties":{"type":["number","null"]}}`)
		case windowing.TopK:
			b.WriteString(`{"type":"array","items":{"type":"object","required":["value","count","error"],"properties":{` +
				`"value":{"type":"string"},"count":{"type":"integer"},"error":{"type":"integer"}}}}`)
		default:
			b.WriteString(`{"type":["number","null"]}`)
		}
	}
	b.WriteString("}}}}")
	return b.String()
}

// JSONSchemaPanes writes the pane JSON after a prefix (WirePrefix).
type JSONSchemaPanes struct {
	json   *windowing.PaneJSON
	prefix []byte
}

// NewJSONSchemaPanes returns the encoder of panes of specs, each value
// starting with prefix.
func NewJSONSchemaPanes(specs []windowing.AggSpec, prefix []byte) *JSONSchemaPanes {
	return &JSONSchemaPanes{json: windowing.NewPaneJSON(specs), prefix: prefix}
}

// Append appends p's value.
func (e *JSONSchemaPanes) Append(b []byte, p *windowing.Pane) []byte {
	return e.json.Append(append(b, e.prefix...), p)
}
