package service

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/repartition"
	"github.com/windowd/windowd/schema"
	"github.com/windowd/windowd/source"
)

// decoders are the decoders of a pipeline's input topics, one each: a
// record of the repartition topic names its input in its upstream header
// (docs/SEMANTICS.md, Several inputs), a co-partitioned input's record in
// its partition (coinputs.go).
type decoders struct {
	each []*source.Decoder
	co   bool // co-partitioned inputs: a record's partition names its input (coinputs.go)
}

// newDecoders returns the decoders of cfg's inputs.
func newDecoders(cfg *config.Pipeline) *decoders {
	ds := &decoders{}
	for i := range max(1, len(cfg.Inputs)) {
		ds.each = append(ds.each, source.NewDecoder(cfg.ForInput(i)))
	}
	return ds
}

// withSchemas makes the decoder of each input of cfg in avro or protobuf
// read its values with schemas from reg (HoldsEvents too when holds: the
// decoders of a poll's second goroutine, ahead.go), and reports whether
// one does.
func (ds *decoders) withSchemas(cfg *config.Pipeline, reg *schema.Registry, holds bool) bool {
	binary := false
	for i, d := range ds.each {
		in := cfg.ForInput(i)
		if in.Input.Format == config.JSON {
			continue
		}
		d.WithSchemas(in, reg)
		if holds {
			d.HoldsEvents()
		}
		binary = true
	}
	return binary
}

// of returns the decoder of r's input.
func (ds *decoders) of(r *kgo.Record) *source.Decoder { return ds.each[ds.input(r)] }

// input returns the index of r's input in the pipeline's inputs (0 for a
// pipeline of one).
func (ds *decoders) input(r *kgo.Record) int32 {
	if len(ds.each) == 1 {
		return 0
	}
	if ds.co {
		return r.Partition / coStride
	}
	if _, up := repartitionHeaders(r); up != nil {
		if src, _, ok := repartition.DecodeUpstream(up); ok && int(src.In) < len(ds.each) {
			return src.In
		}
	}
	return 0 // not written by stage 1: read as the first input's
}
