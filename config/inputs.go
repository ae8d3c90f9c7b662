package config

import (
	"strings"

	"github.com/windowd/windowd/expr"
)

// The inputs of a pipeline with several input topics (docs/SEMANTICS.md,
// Several inputs): inputs, the pipeline's group, and the aggregates'
// inputs.

// aggInput is what an aggregate's input names, and where.
type aggInput struct {
	name string // "": every input
	at   pos
	path string
}

// inputs reads inputs: 2 to MaxInputs topics, each with its name (as) and
// optionally its own filter, key and timestamp; the pipeline's filter,
// key and timestamp are the default of each. It sets p.Input to the
// first input's topic, partitions and format and the pipeline's group.
func (d *decoder) inputs(m *mapping, p *Pipeline) {
	if m.has("input") {
		d.errorf(m.keyAt("input"), m.child("input"), "cannot be combined with inputs (one input topic: input; several: inputs)")
	}
	p.Input.Group, _ = opt(m, "group", "windowd-"+p.Name, d.str)
	p.Filter, _ = opt(m, "filter", nil, d.expression(expr.Bool))
	if m.has("key") {
		p.Key = d.key(m.sub("key", keyKeys...))
	}
	if m.has("timestamp") {
		p.Timestamp = d.timestamp(m)
	}
	path := m.child("inputs")
	items, ok := req(m, "inputs", d.list)
	if !ok {
		return
	}
	if len(items) < 2 || len(items) > MaxInputs {
		d.errorf(m.valueAt("inputs"), path, "takes 2 to %d input topics, not %d (one input topic: input)", MaxInputs, len(items))
	}
	topics, names := map[string]int{}, map[string]int{}
	d.inputMaps = nil
	for i, it := range items {
		if it.node == nil {
			continue
		}
		im := d.mapping(it.node, index(path, i), it.at, sourceKeys...)
		d.inputMaps = append(d.inputMaps, im)
		var src Source
		if src.Topic, ok = req(im, "topic", d.topic); ok {
			d.unique(topics, "input topic", src.Topic, im.valueAt("topic"), im.child("topic"))
		}
		if src.As, ok = opt(im, "as", src.Topic, d.str); ok && src.As != "" {
			d.unique(names, "input", src.As, im.valueAt("as"), im.child("as"))
		}
		parts, _ := opt(im, "partitions", DefaultPartitions, d.intIn(1, MaxPartitions))
		src.Partitions = int32(parts)
		src.Format, _ = opt(im, "format", JSON, oneOf(d, formats))
		if src.Format != JSON {
			d.binary = append(d.binary, binaryInput{im.valueAt("format"), im.child("format"), src.Format, false})
		}
		src.Filter, _ = opt(im, "filter", p.Filter, d.expression(expr.Bool))
		src.Key = p.Key
		if im.has("key") {
			src.Key = d.key(im.sub("key", keyKeys...))
		}
		src.Timestamp = p.Timestamp
		switch {
		case im.has("timestamp"):
			src.Timestamp = d.timestamp(im)
		case !m.has("timestamp") && !im.broken:
			d.errorf(im.at, im.child("timestamp"), "required here or at the pipeline (a field, an expr, or source: record)")
		}
		p.Inputs = append(p.Inputs, src)
	}
	if len(p.Inputs) > 0 {
		first := p.Inputs[0]
		p.Input.Topic, p.Input.Partitions, p.Input.Format = first.Topic, first.Partitions, first.Format
	}
}

// resolveAggregateInputs sets p.AggregateInputs from the inputs the
// aggregates name: an aggregate's input must be one of the pipeline's.
func (d *decoder) resolveAggregateInputs(p *Pipeline) {
	refs := d.aggInputs
	d.aggInputs = nil
	if p.Inputs == nil {
		for _, r := range refs {
			if r.name != "" {
				d.errorf(r.at, r.path, "only valid with inputs (an aggregate of one of several input topics)")
			}
		}
		return
	}
	p.AggregateInputs = make([]int, len(refs))
	for j, r := range refs {
		p.AggregateInputs[j] = -1
		if r.name == "" {
			continue
		}
		if p.AggregateInputs[j] = inputNamed(p, r.name); p.AggregateInputs[j] < 0 {
			d.errorf(r.at, r.path, "no input is named %q (the inputs: %s)", r.name, inputNames(p))
		}
	}
}

// inputNames lists p's input names for messages.
func inputNames(p *Pipeline) string {
	names := make([]string, len(p.Inputs))
	for i, src := range p.Inputs {
		names[i] = src.As
	}
	return strings.Join(names, ", ")
}
