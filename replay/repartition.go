package replay

import (
	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/repartition"
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
//
// Every repartition partition applies the same markers in the same order,
// so one table stands for all of them: a table per repartition partition
// would cost inputs × partitions (10,000 × 10,000 at the partition limit of
// docs/OPERATIONS.md, Limits: gigabytes, and as many marker applications
// per clock line). A repartition partition's watermark is marked only when
// the table's changed (Mark only ever raises it).
type repartitioner struct {
	spec   watermark.Spec
	stage1 *repartition.Stage1 // stage 1: the input partitions
	down   *repartition.Table  // stage 2: the markers every repartition partition holds
	parts  int32               // repartition partitions
	marked int64               // the table's watermark when last marked
	// markedBase: the table's Base (watermark.Upstreams.Base) then.
	markedBase int64
	started    bool                 // marked at least once
	markers    []repartition.Marker // broadcast's buffer
	inputs     int32                // upstream partitions: partitions × the pipeline's input topics
	input      int32                // upstream partition of the record being processed
}

func newRepartitioner(p *config.Pipeline, partitions int) *repartitioner {
	n := p.Repartition.Partitions
	if n == 0 {
		n = int32(partitions)
	}
	ups := layoutOf(p, partitions).Total() // lineOut.part: the upstream partitions of every input
	return &repartitioner{spec: p.Watermark, stage1: repartition.NewStage1(p.Watermark), down: repartition.NewTable(int(ups)), parts: n, inputs: ups}
}

// downstreamSpec is the engine's watermark spec (repartition.DownstreamSpec).
func (rp *repartitioner) downstreamSpec() watermark.Spec { return repartition.DownstreamSpec(rp.spec) }

// start assigns every partition of both stages and broadcasts the first
// markers (no watermark yet).
func (rp *repartitioner) start(eng stepper, now int64) error {
	for p := int32(0); p < rp.inputs; p++ {
		rp.stage1.Watermarks().Assign(p, now, true)
	}
	for q := int32(0); q < rp.parts; q++ {
		eng.Assign(q, now, true)
	}
	rp.broadcast(eng, true)
	return eng.Advance()
}

// broadcast applies stage 1's markers (as run writes them: of the input
// partitions whose watermark or idleness changed; all: of every one) to
// every repartition partition, and marks each repartition partition's
// watermark in the engine.
func (rp *repartitioner) broadcast(eng stepper, all bool) {
	rp.markers = rp.stage1.Markers(rp.markers[:0], 0, all)
	for _, m := range rp.markers {
		rp.down.Apply(m)
	}
	wm, base := rp.down.Watermark(), rp.down.Base()
	if rp.started && wm == rp.marked && base == rp.markedBase {
		return
	}
	rp.started, rp.marked, rp.markedBase = true, wm, base
	for q := int32(0); q < rp.parts; q++ {
		eng.Watermarks().MarkQuiet(q, wm, base)
	}
}

// record sends a decoded record through both stages.
func (rp *repartitioner) record(eng stepper, ev *windowing.Event, now int64) error {
	p := ev.Partition
	rp.input = p
	ev.Partition = repartition.KeyPartition(ev.Key, rp.parts)
	outOfRange := eng.Stats().OutOfRange
	if err := eng.Record(ev, now); err != nil {
		return err
	}
	if eng.Stats().OutOfRange != outOfRange {
		// Dead-lettered for having no representable window: it moves
		// no watermark (docs/SEMANTICS.md, Bad input), in stage 1 either.
		return nil
	}
	rp.stage1.Watermarks().Observe(p, ev.Time, now)
	rp.broadcast(eng, false)
	return eng.Advance()
}

// tick moves stage 1's processing time (idleness) and broadcasts; the
// engine's Tick that follows fires what the markers allow.
func (rp *repartitioner) tick(eng stepper, now int64) {
	rp.stage1.Watermarks().Tick(now)
	rp.broadcast(eng, true)
}
