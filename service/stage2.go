package service

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/codec"
	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/kafka"
	"github.com/windowd/windowd/repartition"
)

// Repartitioning (docs/SEMANTICS.md, Repartitioning). A pipeline with
// `repartition: true` runs two stages in every instance, each a member of its
// own consumer group:
//
//   - Stage 1 (repartitioner, group input.group, the input topic): decodes
//     each record, writes it to the internal topic
//     <group>-<pipeline>-repartition in partition KeyPartition(group key)
//     with an upstream header (input partition, offset), and keeps the
//     input partition's watermark generator. Every watermark_interval, and
//     after each poll in which an input partition's watermark or idleness
//     changed, it writes a marker of that partition to every repartition
//     partition. Its input offsets commit only after everything it wrote
//     is acknowledged.
//   - Stage 2 (the pipeline, group <group>-<pipeline>-repartition, the
//     internal topic): the windowing engine. The watermark of repartition
//     partition q is the minimum over the input partitions of their last
//     marker in q (watermark.Upstreams); markers are never data.
//
// A stage 1 restart writes records again from its last committed offset.
// Stage 2 keeps, per repartition partition and input partition, the next
// upstream offset it has not processed, and drops a record below it: the
// records of one input partition reach a repartition partition in offset
// order (one producer per input partition at a time, idempotent), so a
// record below it was processed already. That table and the markers are
// persisted with the partition's state (checkpoint and changelog marker).

// stage2Config is the pipeline as stage 2 runs it: it consumes the internal
// topic in its own group.
func stage2Config(p *config.Pipeline) *config.Pipeline {
	c := *p
	c.Input.Topic = kafka.RepartitionTopic(p)
	c.Input.Group = kafka.RepartitionTopic(p)
	c.Watermark = repartition.DownstreamSpec(c.Watermark)
	return &c
}

// stage2 is the repartition state of a stage-2 pipeline, the poll loop's:
// only methods named …Locked touch it.
type stage2 struct {
	layout repartition.Layout           // the input topics' partitions as upstream partitions
	topics []string                     // the input topics (metric labels)
	ups    map[int32]*repartition.Table // per repartition partition

	lastPurge time.Time
	purgeNext map[int32]int64 // positions committed at the last purge: deleted at the next
}

// purgeInterval is how often stage 2 deletes the repartition records it
// has processed (the topic has no time-based retention: record timestamps
// are event times, which a backfill places far in the past).
const purgeInterval = 30 * time.Second

// purgeRepartitionLocked deletes, once per purgeInterval, the repartition
// records below the positions committed one interval ago: every resume
// point (group offsets, changelog markers, local checkpoints) has passed
// them.
func (p *pipeline) purgeRepartitionLocked(ctx context.Context) {
	if p.now().Sub(p.mu.rp.lastPurge) < purgeInterval {
		return
	}
	p.mu.rp.lastPurge = p.now()
	del := map[int32]int64{}
	for part, off := range p.mu.rp.purgeNext {
		if _, assigned := p.mu.parts[part]; assigned {
			del[part] = off
		}
	}
	p.mu.rp.purgeNext = map[int32]int64{}
	for part, st := range p.mu.parts {
		if st.position >= 0 {
			p.mu.rp.purgeNext[part] = st.position
		}
	}
	if len(del) == 0 {
		return
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := kafka.DeleteBefore(dctx, p.adm, p.cfg.Input.Topic, del); err != nil {
		p.log.Warn("deleting processed repartition records failed (retrying later)", zap.String("topic", p.cfg.Input.Topic), zap.Error(err))
	}
}

const (
	metaUpstream = "upstream"
	// metaUpstreamLayout: the layout the upstream tables are numbered in
	// (absent: stored before windowd kept it).
	metaUpstreamLayout = "upstream_layout"
)

// upstream returns q's table, creating it.
func (s *stage2) upstream(q int32) *repartition.Table {
	u := s.ups[q]
	if u == nil || u.Inputs() != int(s.layout.Total()) {
		// A table of another upstream count (the input grew) starts over:
		// its partitions must all be heard from again.
		u = repartition.NewTable(int(s.layout.Total()))
		s.ups[q] = u
	}
	return u
}

// adopt returns t, a table numbered in layout from (nil: unknown), in the
// current layout: an input partition keeps its place in the table when an
// earlier input gained partitions since (repartition.Table.Remap). A
// table of an unknown layout is taken as it is (upstream starts it over
// when its size is not the current layout's).
func (s *stage2) adopt(t *repartition.Table, from *repartition.Layout) *repartition.Table {
	if from == nil || from.Equal(s.layout) {
		return t
	}
	return t.Remap(*from, s.layout)
}

func (s *stage2) encodeLayout() []byte {
	w := codec.NewWriter(nil)
	s.layout.Encode(w)
	return w.Bytes()
}

// decodeLayout reads what encodeLayout wrote; nil for nil.
func decodeLayout(b []byte) (*repartition.Layout, error) {
	if b == nil {
		return nil, nil
	}
	r := codec.NewReader(b, "upstream layout in local state")
	l, _ := repartition.DecodeLayout(r)
	if err := r.Done(); err != nil {
		return nil, err
	}
	return &l, nil
}

func (s *stage2) encode() []byte {
	w := codec.NewWriter(nil).Uvarint(uint64(len(s.ups)))
	for q, u := range s.ups {
		w.Varint(int64(q))
		u.Encode(w)
	}
	return w.Bytes()
}

// decode reads what encode wrote, tables numbered in layout from (nil:
// unknown).
func (s *stage2) decode(b []byte, from *repartition.Layout) error {
	clear(s.ups)
	if b == nil {
		return nil
	}
	r := codec.NewReader(b, "upstream tables in local state")
	for n := r.Count(); n > 0 && r.Err() == nil; n-- {
		q := r.Varint()
		if u := repartition.DecodeTable(r); u != nil {
			s.ups[int32(q)] = s.adopt(u, from)
		}
	}
	return r.Done()
}

// repartitionHeaders finds the marker and upstream headers of a record.
func repartitionHeaders(r *kgo.Record) (marker bool, upstream []byte) {
	for _, h := range r.Headers {
		switch h.Key {
		case repartition.HeaderMarker:
			marker = true
		case repartition.HeaderUpstream:
			upstream = h.Value
		}
	}
	return marker, upstream
}

// stage2RecordLocked handles what is special about a record of the repartition
// topic. It reports whether the record is done with: a marker
// (applied), or a duplicate of an upstream record already processed.
func (p *pipeline) stage2RecordLocked(r *kgo.Record, now int64) (bool, error) {
	isMarker, upstream := repartitionHeaders(r)
	u := p.mu.rp.upstream(r.Partition)
	if isMarker {
		src, m, err := repartition.DecodeMarker(r.Value)
		if err == nil {
			var ok bool
			if m.Upstream, ok = p.mu.rp.layout.Upstream(src); !ok || !u.Apply(m) {
				err = fmt.Errorf("marker of partition %d of input %d: not a partition the inputs had at start (restart to take new ones in)", src.P, src.In)
			}
		}
		if err != nil {
			if t := p.now(); t.Sub(p.mu.lastErrLog) >= errLogInterval {
				p.mu.lastErrLog = t
				p.log.Warn("ignoring a watermark marker", zap.Int32("partition", r.Partition), zap.Int64("offset", r.Offset), zap.Error(err))
			}
			return true, nil
		}
		label := inputPartitionLabel(p.mu.rp.topics, int(src.In), src.P) // as stage 1's
		wm, _, _ := u.Upstream(m.Upstream)
		p.m.upstreamWatermark.WithLabelValues(p.cfg.Name, label).Set(msGauge(wm))
		p.m.markerLag.WithLabelValues(p.cfg.Name, label).Set(float64(now - m.Time))
		p.mu.eng.Watermarks().MarkQuiet(r.Partition, u.Watermark(), u.Base())
		if err := p.mu.eng.Advance(); err != nil {
			return true, fmt.Errorf("engine: %w", err)
		}
		return true, nil
	}
	src, off, ok := repartition.DecodeUpstream(upstream)
	if !ok {
		return false, nil // not written by stage 1: processed as it is
	}
	up, ok := p.mu.rp.layout.Upstream(src)
	if !ok {
		// Of an input partition added since this stage 2 started, written
		// by a stage 1 started later: processed without the duplicate
		// check, as stage 2 would without its table.
		return false, nil
	}
	if !u.Accept(up, off) {
		p.duplicateDroppedLocked()
		return true, nil
	}
	return false, nil
}

// duplicateDroppedLocked counts a repartitioned record dropped as a duplicate:
// at once under at_least_once; under exactly_once when its transaction
// commits (countCommittedDuplicates), since a rollback reprocesses it and
// drops it again.
func (p *pipeline) duplicateDroppedLocked() {
	if p.eos {
		p.mu.txnDuplicates++
		return
	}
	p.m.duplicates.WithLabelValues(p.cfg.Name).Inc()
}

// countCommittedDuplicatesLocked adds the duplicates of the transaction that
// committed to the metric.
func (p *pipeline) countCommittedDuplicatesLocked() {
	if p.mu.txnDuplicates > 0 {
		p.m.duplicates.WithLabelValues(p.cfg.Name).Add(float64(p.mu.txnDuplicates))
		p.mu.txnDuplicates = 0
	}
}
