package service

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/codec"
	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/kafka"
	"github.com/windowd/windowd/sink"
	"github.com/windowd/windowd/source"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
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
	// Partition watermarks come from the markers, which carry the input
	// partitions' idleness; a repartition partition is never idle itself.
	c.Watermark.Marked, c.Watermark.IdleTimeout = true, 0
	return &c
}

// upstreamState is what stage 2 knows of the input partitions that feed
// one repartition partition.
type upstreamState struct {
	marks *watermark.Upstreams
	next  []int64 // per input partition: the next upstream offset not yet processed
}

func newUpstreamState(inputs int) *upstreamState {
	return &upstreamState{marks: watermark.NewUpstreams(inputs), next: make([]int64, inputs)}
}

func (u *upstreamState) encode(w *codec.Writer) {
	u.marks.Encode(w)
	for _, n := range u.next {
		w.Varint(n)
	}
}

func decodeUpstreamState(r *codec.Reader) *upstreamState {
	marks := watermark.DecodeUpstreams(r)
	if marks == nil {
		return nil
	}
	u := &upstreamState{marks: marks, next: make([]int64, marks.Len())}
	for i := range u.next {
		u.next[i] = r.Varint()
	}
	if r.Err() != nil {
		return nil
	}
	return u
}

// stage2 is the repartition state of a stage-2 pipeline (mu held).
type stage2 struct {
	inputs int32                    // upstream (input) partitions
	ups    map[int32]*upstreamState // per repartition partition
	up     *repartitioner           // this instance's stage 1

	lastPurge time.Time
	purgeNext map[int32]int64 // positions committed at the last purge: deleted at the next
}

// purgeInterval is how often stage 2 deletes the repartition records it
// has processed (the topic has no time-based retention: record timestamps
// are event times, which a backfill places far in the past).
const purgeInterval = 30 * time.Second

// purgeRepartition deletes, once per purgeInterval, the repartition records
// below the positions committed one interval ago (mu held): every resume
// point (group offsets, changelog markers, local checkpoints) has passed
// them.
func (p *pipeline) purgeRepartition(ctx context.Context) {
	if p.now().Sub(p.rp.lastPurge) < purgeInterval {
		return
	}
	p.rp.lastPurge = p.now()
	del := kadm.Offsets{}
	for part, off := range p.rp.purgeNext {
		if _, assigned := p.parts[part]; assigned {
			del.AddOffset(p.cfg.Input.Topic, part, off, -1)
		}
	}
	p.rp.purgeNext = map[int32]int64{}
	for part, st := range p.parts {
		if st.position >= 0 {
			p.rp.purgeNext[part] = st.position
		}
	}
	if len(del) == 0 {
		return
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := p.adm.DeleteRecords(dctx, del)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		p.log.Warn("deleting processed repartition records failed (retrying later)", zap.String("topic", p.cfg.Input.Topic), zap.Error(err))
	}
}

const metaUpstream = "upstream"

// upstream returns q's table, creating it.
func (s *stage2) upstream(q int32) *upstreamState {
	u := s.ups[q]
	if u == nil || u.marks.Len() != int(s.inputs) {
		// A table of another upstream count (the input grew) starts over:
		// its partitions must all be heard from again.
		u = newUpstreamState(int(s.inputs))
		s.ups[q] = u
	}
	return u
}

func (s *stage2) encode() []byte {
	w := codec.NewWriter(nil).Uvarint(uint64(len(s.ups)))
	for q, u := range s.ups {
		w.Varint(int64(q))
		u.encode(w)
	}
	return w.Bytes()
}

func (s *stage2) decode(b []byte) error {
	clear(s.ups)
	if b == nil {
		return nil
	}
	r := codec.NewReader(b, "upstream tables in local state")
	for n := r.Count(); n > 0 && r.Err() == nil; n-- {
		q := r.Varint()
		if u := decodeUpstreamState(r); u != nil {
			s.ups[int32(q)] = u
		}
	}
	return r.Done()
}

// repartitionHeaders finds the marker and upstream headers of a record.
func repartitionHeaders(r *kgo.Record) (marker bool, upstream []byte) {
	for _, h := range r.Headers {
		switch h.Key {
		case source.HeaderMarker:
			marker = true
		case source.HeaderUpstream:
			upstream = h.Value
		}
	}
	return marker, upstream
}

// stage2Record handles what is special about a record of the repartition
// topic (mu held). It reports whether the record is done with: a marker
// (applied), or a duplicate of an upstream record already processed.
func (p *pipeline) stage2Record(r *kgo.Record, now int64) (bool, error) {
	isMarker, upstream := repartitionHeaders(r)
	u := p.rp.upstream(r.Partition)
	if isMarker {
		m, err := source.DecodeMarker(r.Value)
		if err == nil && !u.marks.Observe(m.Upstream, m.Watermark, m.Idle) {
			err = fmt.Errorf("marker of input partition %d: the input had %d partitions at start (restart to take new ones in)", m.Upstream, p.rp.inputs)
		}
		if err != nil {
			if t := p.now(); t.Sub(p.lastErrLog) >= errLogInterval {
				p.lastErrLog = t
				p.log.Warn("ignoring a watermark marker", zap.Int32("partition", r.Partition), zap.Int64("offset", r.Offset), zap.Error(err))
			}
			return true, nil
		}
		label := strconv.Itoa(int(m.Upstream))
		wm, _, _ := u.marks.Upstream(m.Upstream)
		p.m.upstreamWatermark.WithLabelValues(p.cfg.Name, label).Set(msGauge(wm))
		p.m.markerLag.WithLabelValues(p.cfg.Name, label).Set(float64(now - m.Time))
		p.eng.Watermarks().Mark(r.Partition, u.marks.Watermark())
		if err := p.eng.Advance(); err != nil {
			return true, fmt.Errorf("engine: %w", err)
		}
		return true, nil
	}
	up, off, ok := source.DecodeUpstream(upstream)
	if !ok || up >= p.rp.inputs {
		return false, nil // not written by stage 1: processed as it is
	}
	if off < u.next[up] {
		p.duplicateDropped()
		return true, nil
	}
	u.next[up] = off + 1
	return false, nil
}

// duplicateDropped counts a repartitioned record dropped as a duplicate:
// at once under at_least_once; under exactly_once when its transaction
// commits (countCommittedDuplicates), since a rollback reprocesses it and
// drops it again.
func (p *pipeline) duplicateDropped() {
	if p.eos {
		p.txnDuplicates++
		return
	}
	p.m.duplicates.WithLabelValues(p.cfg.Name).Inc()
}

// countCommittedDuplicates adds the duplicates of the transaction that
// committed to the metric.
func (p *pipeline) countCommittedDuplicates() {
	if p.txnDuplicates > 0 {
		p.m.duplicates.WithLabelValues(p.cfg.Name).Add(float64(p.txnDuplicates))
		p.txnDuplicates = 0
	}
}

// splitDetector notices, without repartitioning, a key.field value seen on
// two input partitions: its windows are then split between the partitions'
// states. It remembers the last partition of a bounded number of key hashes
// (a sketch: it can miss a split, never invents one).
type splitDetector struct {
	seed    maphash.Seed
	slots   []splitSlot
	lastLog time.Time
	count   prometheus.Counter
}

type splitSlot struct {
	hash uint64
	part int32 // partition + 1; 0: empty
}

const splitSlots = 1 << 16

func newSplitDetector(c prometheus.Counter) *splitDetector {
	return &splitDetector{seed: maphash.MakeSeed(), slots: make([]splitSlot, splitSlots), count: c}
}

// see records key on part and reports whether it was last seen on another partition.
func (d *splitDetector) see(key string, part int32) bool {
	h := maphash.String(d.seed, key)
	s := &d.slots[h&(splitSlots-1)]
	split := s.part != 0 && s.hash == h && s.part != part+1
	s.hash, s.part = h, part+1
	if split {
		d.count.Inc()
	}
	return split
}

// repartitioner is stage 1 of a repartitioned pipeline: see above.
type repartitioner struct {
	cfg    *config.Pipeline // the pipeline as configured: the input topic and group
	log    *zap.Logger
	m      *metrics
	now    func() time.Time
	cl     *kgo.Client
	adm    *kadm.Client
	dec    *source.Decoder
	topic  string // the repartition topic
	n      int32  // its partitions
	ctx    context.Context
	cancel context.CancelFunc

	// mu guards the rest against the rebalance callbacks (which
	// BlockRebalanceOnPoll already runs between polls).
	mu          sync.Mutex
	wm          *watermark.Frontier // a generator per input partition, and idleness
	parts       map[int32]*partition
	sent        map[int32]source.Marker // last marker broadcast per input partition
	lastMarkers time.Time
	lastCommit  time.Time
	lastEnds    time.Time
	ev          windowing.Event
	rec         source.Record
	prodErr     error // first produce failure (errMu)
	errMu       sync.Mutex
}

func newRepartitioner(cfg *config.Pipeline, c *config.Config, base []kgo.Opt, log *zap.Logger, m *metrics, now func() time.Time, partitions int32) (*repartitioner, error) {
	r := &repartitioner{
		cfg: cfg, log: log.With(zap.String("stage", "repartition")), m: m, now: now,
		dec: source.NewDecoder(cfg), topic: kafka.RepartitionTopic(cfg), n: partitions,
		wm: watermark.NewFrontier(cfg.Watermark), parts: map[int32]*partition{}, sent: map[int32]source.Marker{},
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	opts := append(kafka.GroupOpts(base, c, cfg.Input.Group, cfg.Input.Topic),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(r.onAssigned),
		kgo.OnPartitionsRevoked(r.onRevoked),
		kgo.OnPartitionsLost(r.onLost),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	r.cl, r.adm = cl, kadm.NewClient(cl)
	return r, nil
}

func (r *repartitioner) partitionState(part int32) *partition {
	if st, ok := r.parts[part]; ok {
		return st
	}
	label := strconv.Itoa(int(part))
	st := &partition{
		position: -1, start: -1, end: -1, first: -1,
		in:   r.m.repartitioned.WithLabelValues(r.cfg.Name, label),
		dead: r.m.deadLetters.WithLabelValues(r.cfg.Name, label),
	}
	r.parts[part] = st
	return st
}

func (r *repartitioner) onAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	parts := assigned[r.cfg.Input.Topic]
	for _, part := range parts {
		r.partitionState(part)
		// A new owner's generator starts over: stage 2 keeps the
		// largest watermark each input partition ever sent.
		r.wm.Assign(part, r.now().UnixMilli(), false)
	}
	r.log.Info("input partitions assigned", zap.Int32s("partitions", parts))
}

func (r *repartitioner) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	parts := revoked[r.cfg.Input.Topic]
	if len(parts) == 0 {
		return
	}
	// Commit what was written for them before their next owner starts.
	if err := r.commit(ctx); err != nil {
		r.log.Warn("commit before giving up input partitions failed", zap.Error(err))
	}
	r.forget(parts)
	r.log.Info("input partitions revoked", zap.Int32s("partitions", parts))
}

func (r *repartitioner) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	parts := lost[r.cfg.Input.Topic]
	r.forget(parts)
	r.log.Warn("input partitions lost", zap.Int32s("partitions", parts))
}

func (r *repartitioner) forget(parts []int32) {
	for _, part := range parts {
		r.wm.Forget(part)
		delete(r.parts, part)
		delete(r.sent, part)
	}
}

// run is stage 1's poll loop, until ctx is done; then a final commit.
func (r *repartitioner) run(ctx context.Context, grace time.Duration) error {
	r.mu.Lock() // as pipeline.run: the group's callbacks commit too
	r.lastCommit = r.now()
	r.mu.Unlock()
	m := &kafka.Member{Client: r.cl, Log: r.log, Now: r.now, Mu: &r.mu, Step: r.step}
	err := m.Run(ctx)
	deadline := time.Now().Add(grace - shutdownMargin(grace))
	gctx, cancel := context.WithDeadline(context.Background(), deadline.Add(-leaveBudget(grace)))
	defer cancel()
	r.mu.Lock()
	if err == nil {
		if cerr := r.commit(gctx); cerr == nil {
			r.mu.Unlock()
			lctx, lcancel := context.WithDeadline(context.Background(), deadline)
			_ = r.cl.LeaveGroupContext(lctx)
			lcancel()
			r.mu.Lock()
		} else {
			// Not committed: stage 2 and a restart redo it (docs/OPERATIONS.md, shutdown).
			r.log.Error("repartition stage: final commit failed; exiting without it", zap.Error(cerr))
		}
	}
	r.mu.Unlock()
	closeWithin(r.cl, deadline, r.log)
	r.cancel()
	if err != nil {
		return fmt.Errorf("pipeline %s: repartition stage: %w", r.cfg.Name, err)
	}
	return nil
}

// step writes one poll's records on and markers out, and commits when due
// (mu held).
func (r *repartitioner) step(ctx context.Context, fetches kgo.Fetches) error {
	now := r.now()
	nowMS := now.UnixMilli()
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		st := r.parts[fp.Partition]
		if st == nil || fp.Topic != r.cfg.Input.Topic {
			return
		}
		if fp.HighWatermark > st.end {
			st.end = fp.HighWatermark
		}
		for _, rec := range fp.Records {
			r.handle(rec, st, nowMS)
		}
	})
	if now.Sub(r.lastEnds) >= endsInterval {
		r.lastEnds = now
		// The group's offsets of newly assigned partitions arrive after
		// their assignment: until a record comes, refreshEnds reads where
		// consumption begins from them.
		topic := r.cfg.Input.Topic
		refreshEnds(ctx, r.adm, topic, r.cl.CommittedOffsets()[topic], r.parts, r.wm)
	}
	r.wm.Tick(nowMS)
	r.broadcast(nowMS, now.Sub(r.lastMarkers) >= time.Duration(r.cfg.Repartition.WatermarkInterval)*time.Millisecond)
	if now.Sub(r.lastCommit) >= time.Duration(r.cfg.CommitInterval)*time.Millisecond {
		if err := r.commit(ctx); err != nil {
			if isFatal(err) {
				return err
			}
			r.log.Warn("repartition commit failed; offsets not committed, will retry", zap.Error(err))
		}
	}
	return nil
}

// handle writes one input record to the repartition topic, or to the
// dead-letter topic when it cannot be decoded (mu held).
func (r *repartitioner) handle(in *kgo.Record, st *partition, now int64) {
	r.rec = source.Record{Partition: in.Partition, Offset: in.Offset, Key: in.Key, Value: in.Value, Timestamp: in.Timestamp.UnixMilli()}
	st.position = in.Offset + 1
	if err := r.dec.Decode(&r.rec, &r.ev); err != nil {
		var de *source.DecodeError
		reason := err.Error()
		if errors.As(err, &de) {
			reason = de.Reason
		}
		st.dead.Inc()
		d := sink.DivertedRecord(r.cfg.DeadLetterTopic, reason, in)
		d.Partition = in.Partition
		r.produce(d)
		return
	}
	st.in.Inc()
	headers := make([]kgo.RecordHeader, 0, len(in.Headers)+1)
	headers = append(headers, in.Headers...)
	headers = append(headers, kgo.RecordHeader{Key: source.HeaderUpstream, Value: source.AppendUpstream(nil, in.Partition, in.Offset)})
	r.produce(&kgo.Record{
		Topic: r.topic, Partition: source.KeyPartition(r.ev.Key, r.n),
		Key: []byte(r.ev.Key), Value: in.Value, Timestamp: in.Timestamp, Headers: headers,
	})
	r.wm.Observe(in.Partition, r.ev.Time, now)
}

func (r *repartitioner) produce(rec *kgo.Record) {
	r.cl.Produce(r.ctx, rec, func(_ *kgo.Record, err error) {
		if err != nil {
			r.errMu.Lock()
			if r.prodErr == nil {
				r.prodErr = err
			}
			r.errMu.Unlock()
		}
	})
}

// broadcast writes a marker of every assigned input partition whose
// watermark or idleness changed since its last marker (all: of every one)
// to every repartition partition (mu held).
func (r *repartitioner) broadcast(now int64, all bool) {
	if all {
		r.lastMarkers = time.UnixMilli(now)
	}
	for _, s := range r.wm.Status() {
		if !s.Assigned {
			continue
		}
		last, sent := r.sent[s.Partition]
		if !all && sent && last.Watermark == s.Watermark && last.Idle == s.Idle {
			continue
		}
		m := source.Marker{Upstream: s.Partition, Watermark: s.Watermark, Idle: s.Idle, Time: now}
		r.sent[s.Partition] = m
		value := source.AppendMarker(nil, m)
		for q := int32(0); q < r.n; q++ {
			r.produce(&kgo.Record{Topic: r.topic, Partition: q, Value: value,
				Headers: []kgo.RecordHeader{{Key: source.HeaderMarker}}})
		}
		r.m.markers.WithLabelValues(r.cfg.Name).Add(float64(r.n))
	}
}

// commit waits for everything written so far to be acknowledged, then
// commits the input positions (mu held).
func (r *repartitioner) commit(ctx context.Context) error {
	r.lastCommit = r.now()
	if err := r.cl.Flush(ctx); err != nil {
		return err
	}
	r.errMu.Lock()
	perr := r.prodErr
	r.errMu.Unlock()
	if perr != nil {
		// Records after the failed one may be written: the positions
		// cannot be committed. A restart writes again from the last
		// commit; stage 2 drops what it processed already.
		return fatalError{fmt.Errorf("repartitioned record not acknowledged: %w", perr)}
	}
	return kafka.CommitPositions(ctx, r.cl, r.cfg.Input.Topic, positions(r.parts))
}
