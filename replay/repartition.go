package replay

import (
	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/source"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// repartitioner replays a pipeline with `repartition: true`
// (docs/SEMANTICS.md, Repartitioning) in one process: stage 1 keeps a
// generator (and idleness) per input partition and routes each record to
// repartition partition KeyPartition(key); each watermark change of an input
// partition is a marker that every repartition partition applies before the
// next input line, and stage 2's partition watermarks come only from the
// markers.
//
// Stage 2 receives a record before the marker its own event time produced,
// as it does in run; so the frontier, and hence the final panes, equal a
// replay without repartitioning.
type repartitioner struct {
	spec     watermark.Spec
	upstream *watermark.Frontier    // stage 1: the input partitions
	down     []*watermark.Upstreams // stage 2: the markers each repartition partition holds
	inputs   int32
	input    int32 // input partition of the record being processed
}

func newRepartitioner(p *config.Pipeline, inputs int) *repartitioner {
	n := p.Repartition.Partitions
	if n == 0 {
		n = int32(inputs)
	}
	rp := &repartitioner{spec: p.Watermark, upstream: watermark.NewFrontier(p.Watermark), inputs: int32(inputs)}
	for q := int32(0); q < n; q++ {
		rp.down = append(rp.down, watermark.NewUpstreams(inputs))
	}
	return rp
}

// downstreamSpec is the engine's watermark spec: partition watermarks from
// markers; idleness is the upstream partitions' and travels in the markers.
func (rp *repartitioner) downstreamSpec() watermark.Spec {
	s := rp.spec
	s.Marked, s.IdleTimeout = true, 0
	return s
}

// start assigns every partition of both stages and broadcasts the first
// markers (no watermark yet).
func (rp *repartitioner) start(eng *windowing.Engine, now int64) error {
	for p := int32(0); p < rp.inputs; p++ {
		rp.upstream.Assign(p, now, true)
	}
	for q := range rp.down {
		eng.Assign(int32(q), now, true)
	}
	rp.broadcast(eng, -1)
	return eng.Advance()
}

// broadcast applies the current marker of input partition only (-1: of
// every input partition) to every repartition partition.
func (rp *repartitioner) broadcast(eng *windowing.Engine, only int32) {
	for _, st := range rp.upstream.Status() {
		if only >= 0 && st.Partition != only {
			continue
		}
		for _, u := range rp.down {
			u.Observe(st.Partition, st.Watermark, st.Idle)
		}
	}
	for q, u := range rp.down {
		eng.Watermarks().Mark(int32(q), u.Watermark())
	}
}

// record sends a decoded record through both stages.
func (rp *repartitioner) record(eng *windowing.Engine, ev *windowing.Event, now int64) error {
	p := ev.Partition
	rp.input = p
	ev.Partition = source.KeyPartition(ev.Key, int32(len(rp.down)))
	if err := eng.Record(ev, now); err != nil {
		return err
	}
	rp.upstream.Observe(p, ev.Time, now)
	rp.broadcast(eng, p)
	return eng.Advance()
}

// tick moves stage 1's processing time (idleness) and broadcasts; the
// engine's Tick that follows fires what the markers allow.
func (rp *repartitioner) tick(eng *windowing.Engine, now int64) {
	rp.upstream.Tick(now)
	rp.broadcast(eng, -1)
}
