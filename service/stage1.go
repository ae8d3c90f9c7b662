package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/kafka"
	"github.com/windowd/windowd/repartition"
	"github.com/windowd/windowd/schema"
	"github.com/windowd/windowd/sink"
	"github.com/windowd/windowd/source"
)

// repartitioner is stage 1 of a repartitioned pipeline (the overview is in
// stage2.go).
type repartitioner struct {
	cfg  *config.Pipeline // the pipeline as configured: the input topic and group
	log  *zap.Logger
	m    *metrics
	now  func() time.Time
	cl   *kgo.Client
	adm  *kadm.Client
	prod *kafka.Producer // cl's repartitioned records and dead letters
	// decs: each input's decoder; topics: the input topics; layout: their
	// partitions as upstream partitions (markers, upstream headers, the
	// generators and parts below are by upstream partition).
	decs   []*source.Decoder
	topics []string
	layout repartition.Layout
	topic  string   // the repartition topic
	n      int32    // its partitions
	align  *aligner // watermark.max_drift over the input partitions (align.go); nil: off
	// reg and wait: the schema registry of an avro or protobuf input, and
	// the partitions paused while it cannot be asked (registrywait.go).
	reg  *schema.Registry
	wait *registryWait
	// dlqGuard: the dead-letter topic's time settings (retention.go).
	dlqGuard *guardedTopic
	ctx      context.Context
	cancel   context.CancelFunc

	// mu guards what follows against the rebalance callbacks (which
	// BlockRebalanceOnPoll already runs between polls).
	mu struct {
		sync.Mutex
		stage1      *repartition.Stage1 // a generator per input partition, idleness, the markers sent
		parts       map[int32]*partition
		markers     []repartition.Marker // broadcast's buffer
		lastMarkers time.Time
		lastCommit  time.Time
		lastEnds    time.Time
		d           decoded // the record being written (ahead.go's decodeRecord)
	}
}

func newRepartitioner(cfg *config.Pipeline, session time.Duration, base []kgo.Opt, log *zap.Logger, m *metrics, now func() time.Time, partitions int32, reg *schema.Registry, inputs []int32) (*repartitioner, error) {
	r := &repartitioner{
		cfg: cfg, log: log.With(zap.String("stage", "repartition")), m: m, now: now,
		topic: kafka.RepartitionTopic(cfg), n: partitions, reg: reg, layout: repartition.NewLayout(inputs),
	}
	decs := newDecoders(cfg)
	r.decs, r.topics = decs.each, cfg.InputTopics()
	upstreams := layoutTopics{topics: r.topics, layout: r.layout} // the registry wait's and the aligner's partitions
	if decs.withSchemas(cfg, reg, false) {
		// Before the client joins the group: its callbacks read it.
		r.wait = newRegistryWait(upstreams, r.log, m.registryWaiting.WithLabelValues(cfg.Name, "repartition"))
	}
	r.mu.stage1, r.mu.parts = repartition.NewStage1(cfg.Watermark), map[int32]*partition{}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	opts := append(kafka.GroupOpts(base, session, cfg.Input.Group, r.topics...),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(r.onAssigned),
		kgo.OnPartitionsRevoked(r.onRevoked),
		kgo.OnPartitionsLost(r.onLost),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond),
	)
	if cfg.Watermark.MaxDrift > 0 {
		opts = append(opts, kgo.FetchMaxWait(alignFetchMaxWait))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	r.cl, r.adm, r.prod = cl, kadm.NewClient(cl), kafka.NewProducer(cl)
	if r.wait != nil {
		r.wait.cl = cl
	}
	if cfg.Watermark.MaxDrift > 0 {
		r.align = newAligner(cl, upstreams, cfg.Name, m)
		r.align.wait = r.wait
	}
	return r, nil
}

// partitionState returns the state of upstream partition u, making it.
func (r *repartitioner) partitionState(u int32) *partition {
	if st, ok := r.mu.parts[u]; ok {
		return st
	}
	i, part := r.layout.Input(u)
	label := inputPartitionLabel(r.topics, i, part)
	st := newPartition(r.m.repartitioned.WithLabelValues(r.cfg.Name, label), r.m.deadLetters.WithLabelValues(r.cfg.Name, label), nil,
		r.m.filtered.WithLabelValues(r.cfg.Name, label))
	r.mu.parts[u] = st
	return st
}

// layoutTopics names stage 1's upstream partitions (its frontier's, in
// layout) in its input topics and back (partitionMap).
type layoutTopics struct {
	topics []string
	layout repartition.Layout
}

func (l layoutTopics) toKafka(us []int32) map[string][]int32 {
	out := map[string][]int32{}
	for _, u := range us {
		i, p := l.layout.Input(u)
		out[l.topics[i]] = append(out[l.topics[i]], p)
	}
	return out
}

func (l layoutTopics) fromKafka(m map[string][]int32) []int32 {
	var us []int32
	for i, topic := range l.topics {
		for _, p := range m[topic] {
			if l.layout.Has(i, p) {
				us = append(us, l.layout.ID(i, p))
			}
		}
	}
	return us
}

func (l layoutTopics) label(u int32) string {
	i, p := l.layout.Input(u)
	return inputPartitionLabel(l.topics, i, p)
}

// inputPartitionLabel is the metrics' label of partition p of input i of
// topics: the partition, <topic>/<partition> with several inputs.
func inputPartitionLabel(topics []string, i int, p int32) string {
	label := strconv.Itoa(int(p))
	if len(topics) > 1 {
		label = topics[i] + "/" + label
	}
	return label
}

// upstreams returns the upstream partitions of the partitions of each
// topic in parts (the group's callbacks' maps).
func (r *repartitioner) upstreams(parts map[string][]int32) []int32 {
	var us []int32
	for i, topic := range r.topics {
		for _, p := range parts[topic] {
			if r.layout.Has(i, p) {
				us = append(us, r.layout.ID(i, p))
			} else {
				r.log.Warn("an input partition added since the start is read after a restart", zap.String("topic", topic), zap.Int32("partition", p))
			}
		}
	}
	return us
}

func (r *repartitioner) onAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	us := r.upstreams(assigned)
	for _, u := range us {
		r.partitionState(u)
		// A new owner's generator starts over: stage 2 keeps the
		// largest watermark each input partition ever sent.
		r.mu.stage1.Watermarks().Assign(u, r.now().UnixMilli(), false)
	}
	r.log.Info("input partitions assigned", zap.Int32s("partitions", us))
}

func (r *repartitioner) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	us := r.upstreams(revoked)
	if len(us) == 0 {
		return
	}
	// Commit what was written for them before their next owner starts.
	if err := r.commitLocked(ctx); err != nil {
		r.log.Warn("commit before giving up input partitions failed", zap.Error(err))
	}
	r.forget(us)
	r.log.Info("input partitions revoked", zap.Int32s("partitions", us))
}

func (r *repartitioner) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	us := r.upstreams(lost)
	r.forget(us)
	r.log.Warn("input partitions lost", zap.Int32s("partitions", us))
}

// forget drops upstream partitions us.
func (r *repartitioner) forget(us []int32) {
	if r.wait != nil {
		r.wait.forget(us)
	}
	for _, u := range us {
		r.mu.stage1.Forget(u)
		delete(r.mu.parts, u)
	}
}

// run is stage 1's poll loop, until ctx is done; then a final commit.
func (r *repartitioner) run(ctx context.Context, grace time.Duration) error {
	r.mu.Lock() // as pipeline.run: the group's callbacks commit too
	r.mu.lastCommit = r.now()
	r.mu.Unlock()
	m := &kafka.Member{Client: r.cl, Log: r.log, Now: r.now, Mu: &r.mu.Mutex, Step: r.stepLocked}
	err := m.Run(ctx)
	deadline := time.Now().Add(grace - shutdownMargin(grace))
	gctx, cancel := context.WithDeadline(context.Background(), deadline.Add(-leaveBudget(grace)))
	defer cancel()
	r.mu.Lock()
	if err == nil {
		if cerr := r.commitLocked(gctx); cerr == nil {
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

// stepLocked writes one poll's records on and markers out, and commits when
// due.
func (r *repartitioner) stepLocked(ctx context.Context, fetches kgo.Fetches) error {
	now := r.now()
	nowMS := now.UnixMilli()
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		i := slices.Index(r.topics, fp.Topic)
		if i < 0 || !r.layout.Has(i, fp.Partition) {
			return
		}
		u := r.layout.ID(i, fp.Partition)
		st := r.mu.parts[u]
		if st == nil {
			return
		}
		if fp.HighWatermark > st.end {
			st.end = fp.HighWatermark
		}
		for _, rec := range fp.Records {
			if un := r.handleLocked(rec, st, i, u, nowMS); un != nil {
				// The rest of the partition's poll comes again once
				// the registry answers (registrywait.go); meanwhile
				// the partition holds the frontier.
				r.wait.hold(u, rec, un, now)
				r.mu.stage1.Watermarks().Wait(u)
				return
			}
		}
	})
	if r.wait != nil {
		var aligned func(int32) bool
		if r.align != nil {
			aligned = r.mu.stage1.Watermarks().Paused
		}
		r.wait.step(now, aligned)
		r.wait.recovered(r.reg)
	}
	if now.Sub(r.mu.lastEnds) >= endsInterval {
		r.mu.lastEnds = now
		// The group's offsets of newly assigned partitions arrive after
		// their assignment: until a record comes, refreshEnds reads where
		// consumption begins from them.
		for i, topic := range r.topics {
			id := func(p int32) int32 { return r.layout.ID(i, p) }
			refreshEnds(ctx, r.adm, topic, r.cl.CommittedOffsets()[topic], r.ofTopic(i), r.mu.stage1.Watermarks(), id)
		}
	}
	r.mu.stage1.Watermarks().Tick(nowMS)
	if r.align != nil {
		// Stage 1's frontier: the minimum over its own input partitions.
		r.mu.stage1.Watermarks().Advance()
		r.align.step(r.mu.stage1.Watermarks(), now)
	}
	r.broadcastLocked(nowMS, now.Sub(r.mu.lastMarkers) >= time.Duration(r.cfg.Repartition.WatermarkInterval)*time.Millisecond)
	if now.Sub(r.mu.lastCommit) >= time.Duration(r.cfg.CommitInterval)*time.Millisecond {
		if err := r.commitLocked(ctx); err != nil {
			if isFatal(err) {
				return err
			}
			r.log.Warn("repartition commit failed; offsets not committed, will retry", zap.Error(err))
		}
	}
	return nil
}

// handleLocked writes one input record to the repartition topic, or to the
// dead-letter topic when it cannot be decoded. When the schema
// registry cannot be asked for the record's schema it does nothing with
// it and returns why.
func (r *repartitioner) handleLocked(in *kgo.Record, st *partition, input int, u int32, now int64) *schema.Unavailable {
	if in.Attrs.IsControl() {
		st.position = in.Offset + 1 // a transaction marker: not data
		return nil
	}
	decodeRecord(r.decs[input], in, &r.mu.d, now)
	err := r.mu.d.err
	var un *schema.Unavailable
	if errors.As(err, &un) {
		return un
	}
	st.position = in.Offset + 1
	if err == source.ErrFiltered {
		// Not an event: neither forwarded nor observed
		// (docs/SEMANTICS.md, Expressions).
		st.filtered.Inc()
		return nil
	}
	if err != nil {
		var de *source.DecodeError
		reason := err.Error()
		if errors.As(err, &de) {
			reason = de.Reason
		}
		st.dead.Inc()
		d := sink.DivertedRecord(r.cfg.DeadLetterTopic, reason, in)
		d.Partition = in.Partition
		r.dlqGuard.check(d, r.now, r.log)
		r.produce(d)
		return nil
	}
	st.in.Inc()
	headers := make([]kgo.RecordHeader, 0, len(in.Headers)+1)
	headers = append(headers, in.Headers...)
	headers = append(headers, kgo.RecordHeader{Key: repartition.HeaderUpstream, Value: repartition.AppendUpstream(nil, r.layout.Source(u), in.Offset)})
	r.produce(&kgo.Record{
		Topic: r.topic, Partition: repartition.KeyPartition(r.mu.d.ev.Key, r.n),
		Key: []byte(r.mu.d.ev.Key), Value: in.Value, Timestamp: in.Timestamp, Headers: headers,
	})
	r.mu.stage1.Watermarks().Observe(u, r.mu.d.ev.Time, now)
	return nil
}

// ofTopic returns the states of input i's partitions, by its partition
// numbers.
func (r *repartitioner) ofTopic(i int) map[int32]*partition {
	if len(r.topics) == 1 {
		return r.mu.parts
	}
	out := map[int32]*partition{}
	for u, st := range r.mu.parts {
		if j, p := r.layout.Input(u); j == i {
			out[p] = st
		}
	}
	return out
}

func (r *repartitioner) produce(rec *kgo.Record) { r.prod.Produce(r.ctx, rec) }

// broadcastLocked writes a marker of every assigned input partition whose
// watermark or idleness changed since its last marker (all: of every one)
// to every repartition partition.
func (r *repartitioner) broadcastLocked(now int64, all bool) {
	if all {
		r.mu.lastMarkers = time.UnixMilli(now)
	}
	r.mu.markers = r.mu.stage1.Markers(r.mu.markers[:0], now, all)
	for _, m := range r.mu.markers {
		value := repartition.AppendMarker(nil, r.layout.Source(m.Upstream), m)
		for q := int32(0); q < r.n; q++ {
			r.produce(&kgo.Record{Topic: r.topic, Partition: q, Value: value,
				Headers: []kgo.RecordHeader{{Key: repartition.HeaderMarker}}})
		}
		r.m.markers.WithLabelValues(r.cfg.Name).Add(float64(r.n))
	}
}

// commitLocked waits for everything written so far to be acknowledged, then
// commits the input positions.
func (r *repartitioner) commitLocked(ctx context.Context) error {
	r.mu.lastCommit = r.now()
	if perr := r.prod.Flush(ctx); perr != nil {
		if ctx.Err() != nil {
			return perr
		}
		// Records after the failed one may be written: the positions
		// cannot be committed. A restart writes again from the last
		// commit; stage 2 drops what it processed already.
		return fatalError{fmt.Errorf("repartitioned record not acknowledged: %w", perr)}
	}
	all := map[string]map[int32]int64{}
	for i, topic := range r.topics {
		all[topic] = positions(r.ofTopic(i))
	}
	return kafka.CommitTopicPositions(ctx, r.cl, all)
}
