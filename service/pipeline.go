package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
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
	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

const (
	endsInterval    = time.Second // how often high watermarks are listed for idleness
	metaOffsets     = "offsets"
	errLogInterval  = 10 * time.Second
	readyStaleAfter = 10 * time.Second
)

// partition is what the pipeline tracks of one assigned input partition.
type partition struct {
	position int64 // next offset to process; -1 until known
	// start is where consumption begins while position is unknown (the
	// group's committed offset, else the log start; -1 until known): it
	// tells whether the partition is caught up, and is never committed.
	start  int64
	end    int64 // last known high watermark; -1 until known
	marked int64 // position of the last changelog marker written
	first  int64 // offset of the first record processed while position was unknown; -1: none
	in     prometheus.Counter
	dead   prometheus.Counter
	late   prometheus.Counter
}

// pipeline runs one configured pipeline: a consumer-group member whose
// records feed the windowing engine, whose panes go to the output topic,
// and whose commit cycle makes output, state and offsets durable in that
// order (docs/SEMANTICS.md, Delivery: at_least_once).
type pipeline struct {
	orig   *config.Pipeline // as configured (cfg is stage 2's when repartitioned)
	cfg    *config.Pipeline
	log    *zap.Logger
	m      *metrics
	now    func() time.Time
	cl     *kgo.Client
	adm    *kadm.Client
	prod   *sink.Producer
	db     *state.DB
	store  *trackingStore // db, recording the keys each cycle changes
	eng    *windowing.Engine
	dec    *source.Decoder
	stdout *lockedWriter

	clTopic  string    // the changelog topic
	baseOpts []kgo.Opt // client options (brokers, TLS, SASL) for changelog readers
	engOpts  windowing.Options

	// exactly_once (exactlyonce.go): the transact session wrapping cl, and
	// the input topic's id for the transaction's offset commits.
	eos     bool
	txn     *kgo.GroupTransactSession
	inputID [16]byte
	// relMu guards what the rebalance callbacks leave for the poll loop
	// under exactly_once (they must not wait for mu): partitions to
	// release, and whether the member must settle its assignment before
	// a transaction may commit.
	relMu        sync.Mutex
	released     []int32
	awaitSettle  bool
	revokes      int  // revoke and lost callbacks so far
	revokesAtEnd int  // revokes before the last transaction end began
	txnRecords   bool // the open transaction holds produced records (mu)
	// txnDuplicates counts the repartitioned records the open transaction
	// dropped as duplicates (exactly_once, mu): the metric takes them when
	// it commits, as a rollback processes and drops them again.
	txnDuplicates int
	abortNext     bool      // the open transaction must abort (mu)
	lastSettle    time.Time // last settleAssignment attempt (mu)

	rp    *stage2        // repartition: true (repartition.go); nil otherwise
	split *splitDetector // key.field without repartition: notices split keys

	prodCtx    context.Context // produce context: lives until the pipeline is closed
	prodCancel context.CancelFunc

	// mu guards the engine and the partition table against the rebalance
	// callbacks (which BlockRebalanceOnPoll already serialises with polls).
	mu           sync.Mutex
	parts        map[int32]*partition
	cur          *kgo.Record                            // the record being processed, for Dropped
	paneCounters [windowing.Late + 1]prometheus.Counter // windowd_panes_total by timing, looked up once
	inline       decoded                                // handle's decoding of a record outside a poll's
	ahead        *decodeAhead                           // step's decoding of a poll's records
	panes        *paneWriter                            // produces the engine's panes behind the loop
	lastCommit   time.Time
	lastEnds     time.Time
	lastErrLog   time.Time
	lastDeadLog  time.Time
	deadSinceLog int
	failed       error              // a rebalance callback could not restore or release state
	clNext       map[int32]int64    // next changelog offset per partition that local state holds
	skip         map[int32]*skipSet // restored keys ahead of their partition's position
	loggedWrites int64              // store.writes already counted in the metric
	// countedEvictions: the engine's Stats().Evictions already counted in
	// the metric (0 again with a rollback's new engine).
	countedEvictions int64
	faultAfter       int             // Faults.ExitAfterChangelog; 0: off
	abortTxn         func() bool     // Faults.AbortTxn; nil: off
	gated            map[int32]int64 // partitions catching up on their own frontier: the frontier when they joined

	// offMu guards the persisted offsets, read by AdjustFetchOffsetsFn
	// (which runs on the group goroutine and must not wait for mu).
	offMu  sync.Mutex
	stored map[int32]int64 // next offset per partition, as committed in Pebble

	assignedOnce atomic.Bool
	closing      atomic.Bool  // shutting down: the final commit cycle ran or runs
	inGroup      atomic.Bool  // joined: assigned and not lost since
	lastCommitOK atomic.Int64 // Unix nanoseconds of the last successful commit cycle

	restoring       atomic.Int64 // partition being restored, -1 when none
	restoredRecords atomic.Int64 // changelog records applied by the current restore
}

// lockedWriter serialises pane lines of several pipelines on one stream.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) writeLine(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(append(b, '\n'))
}

// newPipeline builds the pipeline of cfg, whose input topic has inputs
// partitions; a repartitioned pipeline runs as stage 2 over the internal
// topic, with its stage 1 beside it.
func newPipeline(cfg *config.Pipeline, c *config.Config, brokers []string, inputs int32, deps deps) (*pipeline, error) {
	clTopic := kafka.ChangelogTopic(cfg)
	orig := cfg
	var rp *stage2
	if cfg.Repartition != nil {
		rp = &stage2{inputs: inputs, ups: map[int32]*upstreamState{}}
		cfg = stage2Config(cfg)
	}
	p := &pipeline{
		orig:     orig,
		rp:       rp,
		cfg:      cfg,
		log:      deps.log.With(zap.String("pipeline", cfg.Name)),
		m:        deps.metrics,
		now:      deps.now,
		parts:    map[int32]*partition{},
		stored:   map[int32]int64{},
		clNext:   map[int32]int64{},
		gated:    map[int32]int64{},
		clTopic:  clTopic,
		eos:      cfg.Delivery == config.ExactlyOnce,
		engOpts:  windowing.Options{ShardByPartition: true, CacheBytes: int(c.State.CacheBytes), MaxPendingBytes: deps.faults.MaxPendingBytes},
		abortTxn: deps.faults.AbortTxn,
	}
	p.restoring.Store(-1)
	p.faultAfter = deps.faults.ExitAfterChangelog
	if cfg.OutputStdout {
		p.stdout = deps.stdout
	}
	p.prodCtx, p.prodCancel = context.WithCancel(context.Background())
	dir := filepath.Join(c.State.Dir, cfg.Name)
	db, err := state.Open(dir, state.Options{
		FS:   deps.faults.FS,
		Logf: func(format string, args ...any) { p.log.Error("pebble: " + fmt.Sprintf(format, args...)) },
		Fatal: func(msg string) {
			p.m.ready.WithLabelValues(cfg.Name).Set(0)
			deps.fatal(fmt.Sprintf("pipeline %s: %s", cfg.Name, msg))
		},
	})
	if err != nil {
		return nil, err
	}
	p.db = db
	p.store = &trackingStore{DB: db, dirty: map[int32]map[string]struct{}{}}
	var txnID string
	if p.eos {
		if txnID, err = p.openExactlyOnce(); err != nil {
			db.Close()
			return nil, fmt.Errorf("pipeline %s: state: %w", cfg.Name, err)
		}
	}
	if err := p.loadMeta(); err != nil {
		db.Close()
		return nil, err
	}
	p.eng, err = windowing.New(cfg.Spec, cfg.Watermark, p.store, p, p.engOpts)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("pipeline %s: restore state: %w", cfg.Name, err)
	}
	// Partitions of the last checkpoint hold the frontier until the group
	// hands them back (or two session timeouts pass: they moved elsewhere).
	if held := p.eng.Watermarks().HoldRestored(p.nowMS(), 2*c.Kafka.SessionTimeout); len(held) > 0 {
		p.log.Info("holding the frontier for partitions of the last checkpoint until they are assigned",
			zap.Int32s("partitions", held), zap.Duration("at_most", 2*time.Duration(c.Kafka.SessionTimeout)*time.Millisecond))
	}
	p.dec = source.NewDecoder(cfg)
	p.ahead = newDecodeAhead(source.NewDecoder(cfg))
	p.panes = newPaneWriter(p.writePane)
	base, err := kafka.ClientOpts(c, brokers, p.log)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("pipeline %s: kafka client: %w", cfg.Name, err)
	}
	p.baseOpts = base
	if p.rp != nil {
		orig := c.Pipeline(cfg.Name)
		if p.rp.up, err = newRepartitioner(orig, c, base, p.log, p.m, p.now, kafka.RepartitionPartitions(orig, inputs)); err != nil {
			db.Close()
			return nil, fmt.Errorf("pipeline %s: kafka client: %w", cfg.Name, err)
		}
	} else if cfg.Key.Field != "" {
		p.split = newSplitDetector(p.m.splitKeys.WithLabelValues(cfg.Name))
		p.log.Warn("key.field without repartition: true: the records of one "+cfg.Key.Field+" must share an input partition, or its windows are split; windowd warns and counts windowd_split_keys_total when it sees one on two partitions",
			zap.String("key_field", cfg.Key.Field))
	}
	opts := append(kafka.GroupOpts(base, c, cfg.Input.Group, cfg.Input.Topic),
		kgo.OnPartitionsAssigned(p.onAssigned),
		kgo.OnPartitionsRevoked(p.onRevoked),
		kgo.OnPartitionsLost(p.onLost),
		kgo.AdjustFetchOffsetsFn(p.adjustOffsets),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordPartitioner(kafka.NewChangelogPartitioner(p.clTopic)),
	)
	// The group may assign partitions as soon as the client exists; the
	// callbacks wait for mu until the pipeline is complete.
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.eos {
		// Rebalance callbacks run between polls. Not under exactly_once:
		// a transaction's end waits for a heartbeat, and a member that
		// lost the group gets its onLost only through this gate, so the
		// end would wait forever (exactlyonce.go serialises by mu).
		opts = append(opts, kgo.BlockRebalanceOnPoll())
	}
	if p.eos {
		opts = append(opts, kgo.TransactionalID(txnID), kgo.TransactionTimeout(txnTimeout))
		p.txn, err = kgo.NewGroupTransactSession(opts...)
		if err == nil {
			p.cl = p.txn.Client()
			if err = p.txn.Begin(); err != nil {
				p.cl.Close()
			}
		}
		p.log.Info("exactly_once: one transaction per commit cycle", zap.String("transactional_id", txnID),
			zap.Duration("commit_interval", time.Duration(cfg.CommitInterval)*time.Millisecond))
	} else {
		p.cl, err = kgo.NewClient(opts...)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("pipeline %s: kafka client: %w", cfg.Name, err)
	}
	p.adm = kadm.NewClient(p.cl)
	p.prod = sink.NewProducer(p.cl)
	p.m.ready.WithLabelValues(cfg.Name).Set(0)
	return p, nil
}

// loadMeta reads what the last checkpoint holds beyond window state: the
// next input offset and the next changelog offset per partition, and the
// skip sets of restored keys.
func (p *pipeline) loadMeta() error {
	var err error
	for name, dst := range map[string]map[int32]int64{metaOffsets: p.stored, metaChangelog: p.clNext} {
		var b []byte
		if b, err = p.db.GetMeta(name); err != nil {
			return err
		}
		if err = decodeOffsets(b, dst); err != nil {
			return err
		}
	}
	if p.rp != nil {
		b, err := p.db.GetMeta(metaUpstream)
		if err != nil {
			return err
		}
		if err := p.rp.decode(b); err != nil {
			return err
		}
	}
	b, err := p.db.GetMeta(metaSkip)
	if err != nil {
		return err
	}
	p.skip, err = decodeSkip(b)
	return err
}

// decodeOffsets reads what encodeOffsets wrote into dst.
func decodeOffsets(b []byte, dst map[int32]int64) error {
	if b == nil {
		return nil
	}
	r := codec.NewReader(b, "offsets in local state")
	r.Offsets(dst)
	return r.Done()
}

// encodeOffsets encodes a next offset per partition (input offsets,
// changelog positions).
func encodeOffsets(m map[int32]int64) []byte { return codec.NewWriter(nil).Offsets(m).Bytes() }

func (p *pipeline) nowMS() int64 { return p.now().UnixMilli() }

// produce sends an output, late or dead-letter record (mu held).
func (p *pipeline) produce(r *kgo.Record) {
	p.txnRecords = true
	p.prod.Produce(p.prodCtx, r)
}

// Pane implements windowing.Emitter: the pane goes to the pane writer,
// which produces it (writePane) in emission order.
func (p *pipeline) Pane(pn *windowing.Pane) error {
	p.txnRecords = true
	p.panes.add(pn)
	if !pn.Retraction {
		p.paneCounter(pn.Timing).Inc()
	}
	return nil
}

// writePane builds pn's output record and produces it (the pane writer's
// goroutine: it reads only what does not change once the pipeline is
// built).
func (p *pipeline) writePane(pn *windowing.Pane) {
	r := sink.PaneRecord(p.cfg.OutputTopic, pn, p.cfg.Spec.Aggregates)
	p.prod.Produce(p.prodCtx, r)
	if p.stdout != nil {
		p.stdout.writeLine(r.Value)
	}
}

// paneCounter returns the pane counter of timing t.
func (p *pipeline) paneCounter(t windowing.Timing) prometheus.Counter {
	if int(t) >= len(p.paneCounters) {
		return p.m.panes.WithLabelValues(p.cfg.Name, t.String())
	}
	if p.paneCounters[t] == nil {
		p.paneCounters[t] = p.m.panes.WithLabelValues(p.cfg.Name, t.String())
	}
	return p.paneCounters[t]
}

// Dropped implements windowing.Emitter: late records are counted and go to
// the late topic; a record with no representable window is a dead letter.
func (p *pipeline) Dropped(ev *windowing.Event, reason windowing.DropReason) error {
	part := p.parts[ev.Partition]
	if reason == windowing.DropOutOfRange {
		if part != nil {
			part.dead.Inc()
		}
		if p.cur != nil {
			p.produce(sink.DivertedRecord(p.cfg.DeadLetterTopic, reason.String(), p.cur))
		}
		return nil
	}
	if part != nil {
		part.late.Inc()
	}
	if p.cfg.LateTopic != "" && p.cur != nil {
		p.produce(sink.DivertedRecord(p.cfg.LateTopic, reason.String(), p.cur,
			kgo.RecordHeader{Key: sink.HeaderEventTime, Value: strconv.AppendInt(nil, ev.Time, 10)}))
	}
	return nil
}

func (p *pipeline) partitionState(part int32) *partition {
	if st, ok := p.parts[part]; ok {
		return st
	}
	label := strconv.Itoa(int(part))
	st := &partition{
		position: -1, start: -1, end: -1, first: -1,
		in:   p.m.recordsIn.WithLabelValues(p.cfg.Name, label),
		dead: p.m.deadLetters.WithLabelValues(p.cfg.Name, label),
		late: p.m.lateDropped.WithLabelValues(p.cfg.Name, label),
	}
	p.parts[part] = st
	return st
}

// handle processes one input record (mu held).
func (p *pipeline) handle(r *kgo.Record, now int64) error {
	return p.handleDecoded(r, nil, now)
}

// handleDecoded is handle with r's decoding done already (step's, decoded
// ahead), or done here when d is nil (mu held).
func (p *pipeline) handleDecoded(r *kgo.Record, d *decoded, now int64) error {
	part := p.parts[r.Partition] // assigned: step skips the others
	if p.rp != nil {
		done, err := p.stage2Record(r, now)
		if err != nil {
			return err
		}
		if done {
			// A marker, or a record processed already: not data.
			p.advancePosition(part, r)
			return nil
		}
	}
	part.in.Inc()
	p.cur = r
	if d == nil {
		d = &p.inline
		decodeRecord(p.dec, r, d)
	}
	ev := &d.ev
	skip := p.skip[r.Partition] // nil unless restored keys are ahead of this partition
	if err := d.err; err != nil {
		var de *source.DecodeError
		if !errors.As(err, &de) {
			return err
		}
		part.dead.Inc()
		p.produce(sink.DivertedRecord(p.cfg.DeadLetterTopic, de.Reason, r))
		p.deadSinceLog++
		if t := p.now(); t.Sub(p.lastDeadLog) >= time.Second {
			p.log.Info("records dead-lettered", zap.String("topic", p.cfg.DeadLetterTopic), zap.Int("count", p.deadSinceLog),
				zap.String("last_reason", de.Reason), zap.Int32("partition", r.Partition), zap.Int64("offset", r.Offset))
			p.lastDeadLog, p.deadSinceLog = t, 0
		}
	} else if skip != nil && r.Offset < skip.keys[ev.Key] {
		// A restored value of the key already holds this record.
		if err := p.eng.Skip(ev, now); err != nil {
			return fmt.Errorf("engine: %w", err)
		}
	} else {
		if p.split != nil && p.split.see(ev.Key, r.Partition) {
			p.warnSplit(r.Partition, ev.Key)
		}
		if err := p.eng.Record(ev, now); err != nil {
			return fmt.Errorf("engine: %w", err)
		}
	}
	p.cur = nil
	p.advancePosition(part, r)
	return nil
}

// advancePosition moves part past r (mu held).
func (p *pipeline) advancePosition(part *partition, r *kgo.Record) {
	if part.position < 0 && part.first < 0 {
		part.first = r.Offset
	}
	part.position = r.Offset + 1
	if skip := p.skip[r.Partition]; skip != nil && part.position >= skip.max {
		delete(p.skip, r.Partition)
	}
}

// warnSplit logs, at most once a minute, that a key.field value arrived on
// two input partitions.
func (p *pipeline) warnSplit(part int32, key string) {
	if t := p.now(); t.Sub(p.split.lastLog) >= time.Minute {
		p.split.lastLog = t
		p.log.Warn("key seen on two input partitions: without repartition: true its windows are split between the partitions' states and each emits its own panes",
			zap.String("key_field", p.cfg.Key.Field), zap.String("key", key), zap.Int32("partition", part),
			zap.String("fix", "set repartition: true on the pipeline, or key the input topic by "+p.cfg.Key.Field))
	}
}

// run is the poll loop; it returns nil when ctx is done and the final
// commit succeeded, or the error that stopped it.
func (p *pipeline) run(ctx context.Context, grace time.Duration) error {
	// The group's callbacks may already be running (the client joined
	// when the pipeline was built), and their commit cycles set it too.
	p.mu.Lock()
	p.lastCommit = p.now()
	p.mu.Unlock()
	var stage1 chan error
	if p.rp != nil {
		// Stage 1 stops with this loop: the stage that fails first stops both.
		upCtx, stopUp := context.WithCancel(ctx)
		defer stopUp()
		stage1 = make(chan error, 1)
		go func() { stage1 <- p.rp.up.run(upCtx, grace) }()
		defer func() {
			stopUp()
			if uerr := <-stage1; uerr != nil {
				p.log.Error("repartition stage stopped", zap.Error(uerr))
			}
		}()
	}
	m := &kafka.Member{
		Client: p.cl, Log: p.log, Now: p.now, Mu: &p.mu,
		// Under exactly_once, mu is held from the poll through step. A
		// rollback (of a rebalance callback, or of a commit cycle in
		// step) rewinds the consumer, and franz-go drops what it had
		// buffered; holding mu puts every rollback either before the
		// poll, whose records are then the rewound ones, or inside step,
		// which drops the rest of the poll. (franz-go also rules out
		// polling while a transaction ends, which callbacks do under mu.)
		// Callbacks wait for mu at most a poll's timeout. Not otherwise:
		// BlockRebalanceOnPoll makes callbacks wait for AllowRebalance,
		// and a poll waits for a rebalance's callbacks, which wait for mu.
		Hold: p.eos,
		Step: p.step,
		// A failure a rebalance callback recorded.
		After: func() error { return p.failed },
	}
	if stage1 != nil {
		m.Before = func() error {
			select {
			case uerr := <-stage1:
				if uerr == nil {
					uerr = errors.New("repartition stage stopped")
				}
				stage1 <- nil // for the deferred wait; the error is reported once, below
				return uerr
			default:
				return nil
			}
		}
	}
	return p.shutdown(m.Run(ctx), grace)
}

// step processes one poll's records, ticks processing time and commits when
// due (mu held).
func (p *pipeline) step(ctx context.Context, fetches kgo.Fetches) error {
	defer p.panes.flush() // the poll's panes go out now, not at the next cycle
	p.applyReleased()
	now := p.now()
	var err error
	rolledBack, dropped := false, 0
	p.ahead.start(fetches, p.cfg.Input.Topic)
	next := 0 // the poll's number of fp.Records[0] in p.ahead
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		if err != nil || fp.Topic != p.cfg.Input.Topic {
			return
		}
		first := next
		next += len(fp.Records)
		if rolledBack {
			dropped += len(fp.Records)
			return
		}
		st := p.parts[fp.Partition]
		if st == nil {
			return // polled before the partition was revoked: no longer ours
		}
		if fp.HighWatermark > st.end {
			st.end = fp.HighWatermark
		}
		for i, r := range fp.Records {
			if err = p.handleDecoded(r, p.ahead.get(first+i), now.UnixMilli()); err != nil {
				return
			}
			if p.eng.NeedsCheckpoint() {
				// Bound memory: uncommitted state writes must not pile up until the next interval.
				if err = p.commit(ctx, true); errors.Is(err, errRolledBack) {
					// The rest of the poll comes again: the
					// rollback rewound the partitions processed
					// since the checkpoint, and the abort reset
					// every other partition franz-go delivered
					// records of to its committed offset.
					err = nil
					rolledBack = true
					dropped += len(fp.Records) - i - 1
					return
				}
				if err != nil && !isFatal(err) {
					p.log.Warn("commit cycle failed; offsets not committed, will retry", zap.Error(err))
					err = nil
				}
				if err != nil {
					return
				}
			}
		}
	})
	p.ahead.finish()
	if dropped > 0 {
		p.log.Info("dropped the rest of a poll after a rollback; the rewound fetches deliver it again", zap.Int("records", dropped))
	}
	if err != nil {
		return err
	}
	if now.Sub(p.lastEnds) >= endsInterval {
		p.lastEnds = now
		p.refreshEnds(ctx)
		if err := p.dropExpiredHolds(); err != nil {
			return fatalError{err}
		}
	}
	if p.eos && p.unsettled() && p.now().Sub(p.lastSettle) >= time.Second {
		// No session has settled the assignment yet (the group was
		// rebalancing again, or could not be read): commits wait.
		if err := p.settleAssignment(ctx, 1); err != nil {
			return err
		}
	}
	if err := p.eng.Tick(p.nowMS()); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	if err := p.releaseGated(); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	if p.now().Sub(p.lastCommit) >= time.Duration(p.cfg.CommitInterval)*time.Millisecond {
		if err := p.commit(ctx, true); err != nil && !errors.Is(err, errRolledBack) {
			if isFatal(err) {
				return err
			}
			p.m.commitFailures.WithLabelValues(p.cfg.Name).Inc()
			p.log.Warn("commit cycle failed; offsets not committed, will retry", zap.Error(err))
		}
	}
	p.updateMetrics()
	return nil
}

// refreshEnds lists the partitions' high watermarks so that a partition that
// delivers nothing can still be known caught up (and so may become idle).
func (p *pipeline) refreshEnds(ctx context.Context) {
	topic := p.cfg.Input.Topic
	refreshEnds(ctx, p.adm, topic, p.cl.CommittedOffsets()[topic], p.parts, p.eng.Watermarks())
}

// refreshEnds lists the high watermarks of topic's partitions in parts and
// tells wm which of them are caught up. A partition whose position is not
// known yet (nothing processed, stored or committed by this instance) is
// caught up when where its consumption begins is the end: its offset in
// committed (the group's committed offsets, as the consumer knows them),
// else its log start. That offset is only compared, never committed: the
// group's offset stays where it is until a record is processed.
func refreshEnds(ctx context.Context, adm *kadm.Client, topic string, committed map[int32]kgo.EpochOffset, parts map[int32]*partition, wm *watermark.Frontier) {
	if len(parts) == 0 {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(lctx, topic)
	if err != nil {
		return
	}
	var starts kadm.ListedOffsets
	for part, st := range parts {
		if e, ok := ends.Lookup(topic, part); ok && e.Err == nil && e.Offset > st.end {
			st.end = e.Offset
		}
		if st.position < 0 {
			if eo, ok := committed[part]; ok && eo.Offset >= 0 {
				st.start = eo.Offset
			} else if st.start < 0 {
				if starts == nil {
					if starts, err = adm.ListStartOffsets(lctx, topic); err != nil {
						return
					}
				}
				if s, ok := starts.Lookup(topic, part); ok && s.Err == nil && s.Offset >= 0 {
					st.start = s.Offset
				}
			}
		}
		wm.SetCaughtUp(part, st.caughtUp())
	}
}

// consumed is the offset the partition has been consumed to: its position,
// or while that is unknown where its consumption begins; -1 when neither is
// known.
func (st *partition) consumed() int64 {
	if st.position >= 0 {
		return st.position
	}
	return st.start
}

// caughtUp reports whether the partition has been consumed to its last
// known end.
func (st *partition) caughtUp() bool {
	c := st.consumed()
	return c >= 0 && st.end >= 0 && c >= st.end
}

// commit runs the commit cycle (mu held): write the changed keys and the
// partition markers to the changelog, wait for every produced record (panes,
// dead letters, changelog) to be acknowledged, write state, offsets and the
// frontier to Pebble in one synced batch, then commit the offsets to the
// group.
func (p *pipeline) commit(ctx context.Context, toGroup bool) error {
	// Every pane emitted so far is produced before the cycle flushes,
	// ends the transaction or rolls back.
	p.panes.sync()
	if p.eos {
		// The offsets commit with the transaction, always. The cycles of
		// assignment (toGroup false) and shutdown must end the open
		// transaction; the poll loop's may wait for the group to settle.
		return p.commitTxn(ctx, !toGroup || p.closing.Load())
	}
	start := p.now()
	p.lastCommit = start
	// The cycle's panes, dead letters and late records are acknowledged
	// before the state that produced them reaches the changelog: a key
	// value logged there is restored ahead of the input position (its
	// records are skipped, docs/SEMANTICS.md, State follows partitions),
	// so a crash with the value logged but a pane of it not yet written
	// would lose that pane for good.
	if err := p.flushOutput(ctx); err != nil {
		return err
	}
	// State changes go to the changelog before anything is committed.
	if err := p.eng.Flush(); err != nil {
		return fatalError{fmt.Errorf("state flush: %w", err)}
	}
	acks := p.writeChangelog()
	if err := p.flushOutput(ctx); err != nil {
		return err
	}
	if acks.err != nil {
		return fatalError{fmt.Errorf("changelog not acknowledged: %w", acks.err)}
	}
	if err := p.checkpoint(acks); err != nil {
		return err
	}
	if toGroup {
		if err := p.commitGroup(ctx); err != nil {
			return err
		}
		if p.rp != nil {
			p.purgeRepartition(ctx)
		}
	}
	p.cycleDone(start)
	return nil
}

// flushOutput waits until every record produced so far is acknowledged
// (mu held); a refusal is fatal.
func (p *pipeline) flushOutput(ctx context.Context) error {
	if err := p.prod.Flush(ctx); err != nil {
		if ctx.Err() != nil {
			return err
		}
		return fatalError{fmt.Errorf("output not acknowledged: %w", err)}
	}
	return nil
}

// checkpoint makes the local checkpoint (mu held): the changelog positions
// of the cycle's acknowledged records (acks nil: none), the offsets, the
// state and the frontier, in one synced Pebble batch.
func (p *pipeline) checkpoint(acks *changelogAcks) error {
	if acks != nil {
		p.changelogWritten(acks)
	}
	offsets := p.offsetsToStore()
	if err := p.putLocalMeta(offsets); err != nil {
		return fatalError{err}
	}
	if err := p.eng.Checkpoint(true); err != nil {
		return fatalError{fmt.Errorf("state checkpoint: %w", err)}
	}
	p.offMu.Lock()
	p.stored = offsets
	p.offMu.Unlock()
	p.m.stateBytes.WithLabelValues(p.cfg.Name).Set(float64(p.db.DiskBytes()))
	return nil
}

// cycleDone records a commit cycle, begun at start, that succeeded.
func (p *pipeline) cycleDone(start time.Time) {
	p.lastCommitOK.Store(p.now().UnixNano())
	p.m.commitLatency.WithLabelValues(p.cfg.Name).Observe(p.now().Sub(start).Seconds())
}

// offsetsToStore is the next input offset per partition that local state
// holds after this cycle.
func (p *pipeline) offsetsToStore() map[int32]int64 {
	offsets := map[int32]int64{}
	p.offMu.Lock()
	for part, off := range p.stored {
		offsets[part] = off
	}
	p.offMu.Unlock()
	for part, st := range p.parts {
		if st.position >= 0 {
			offsets[part] = st.position
		}
	}
	return offsets
}

// positions are the known positions of parts.
func positions(parts map[int32]*partition) map[int32]int64 {
	out := make(map[int32]int64, len(parts))
	for part, st := range parts {
		if st.position >= 0 {
			out[part] = st.position
		}
	}
	return out
}

// commitGroup commits the positions of the assigned partitions to the group.
func (p *pipeline) commitGroup(ctx context.Context) error {
	return kafka.CommitPositions(ctx, p.cl, p.cfg.Input.Topic, positions(p.parts))
}

// onAssigned restores each new partition's state before any of its records
// is processed (polls wait: BlockRebalanceOnPoll), then starts it at the
// offset its state covers (adjustOffsets runs after this returns).
func (p *pipeline) onAssigned(ctx context.Context, _ *kgo.Client, assigned map[string][]int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing.Load() {
		// The final cycle ran; under exactly_once a transaction begun
		// now would wait for a heartbeat while the client leaves the
		// group, which waits for this callback.
		return
	}
	parts := assigned[p.cfg.Input.Topic]
	if err := p.assign(ctx, parts); err != nil {
		if ctx.Err() == nil {
			p.failed = fmt.Errorf("restoring partitions %v: %w", parts, err)
		}
		return
	}
	p.assignedOnce.Store(true)
	p.inGroup.Store(true)
	p.log.Info("partitions assigned", zap.Int32s("partitions", parts))
}

func (p *pipeline) assign(ctx context.Context, parts []int32) error {
	if p.eos {
		// Every session of the group ends here, also one that only took
		// partitions away: the place to settle what this member owns.
		if err := p.settleAssignment(ctx, 3); err != nil {
			return err
		}
	}
	if len(parts) == 0 {
		return nil
	}
	// Commit what is pending first: the restore then writes alone.
	if err := p.commit(ctx, false); err != nil && !errors.Is(err, errRolledBack) {
		return err
	}
	if p.eos {
		// Loading the producer id fences (and aborts) a transaction this
		// instance's previous incarnation left open, before the restore
		// waits for the changelog's stable offset to pass it.
		if _, _, err := p.cl.ProducerID(ctx); err != nil {
			return fmt.Errorf("initialising the transactional producer: %w", err)
		}
		if p.inputID == ([16]byte{}) {
			if err := p.lookUpInputID(ctx); err != nil {
				return err
			}
		}
	}
	if err := p.growChangelog(ctx, parts); err != nil {
		return err
	}
	for _, part := range parts {
		rs, err := p.restore(ctx, part)
		if err != nil {
			return fmt.Errorf("partition %d: %w", part, err)
		}
		st := p.partitionState(part)
		p.offMu.Lock()
		if off, ok := p.stored[part]; ok {
			st.position, st.marked = off, off
		}
		p.offMu.Unlock()
		p.eng.Assign(part, p.nowMS(), false)
		p.gateIfBehind(part)
		label := strconv.Itoa(int(part))
		p.m.restoreRecords.WithLabelValues(p.cfg.Name, label).Add(float64(rs.records))
		p.m.restoreSeconds.WithLabelValues(p.cfg.Name, label).Set(rs.took.Seconds())
		if rs.records > 0 || rs.cold {
			p.log.Info("partition state restored from the changelog", zap.Int32("partition", part), zap.Bool("from_scratch", rs.cold),
				zap.Int64("from_offset", rs.from), zap.Int64("to_offset", rs.to), zap.Int64("records", rs.records),
				zap.Int64("bytes", rs.bytes), zap.Duration("took", rs.took), zap.Int("keys_to_skip", p.skipLen(part)))
		}
	}
	if p.eos {
		// Only restored state is pending (the first cycle above ended
		// the transaction), and it is the changelog's committed state:
		// checkpoint it alone, so that a transaction that aborts from
		// here on rolls back to it rather than to before the restore.
		if err := p.checkpoint(nil); err != nil {
			return err
		}
		if p.unsettled() {
			// No transaction may commit yet (settleAssignment); due
			// windows fire with the next frontier advance.
			return nil
		}
	}
	// Restored windows the frontier already passed fire now (those of
	// partitions that joined behind it wait: releaseGated).
	if err := p.eng.FireDue(); err != nil {
		return err
	}
	if err := p.commit(ctx, false); err != nil && !errors.Is(err, errRolledBack) {
		return err
	}
	return nil
}

// gateIfBehind runs assigned partition part on its own frontier when it
// joins behind the frontier (it moved, or it was held), until releaseGated:
// its records are then not late merely because this instance's frontier is
// ahead, and its windows fire with its records (windowing.Engine.CatchUp).
func (p *pipeline) gateIfBehind(part int32) {
	if f := p.eng.Frontier(); f > watermark.MinTime && f < watermark.MaxTime {
		if g, _ := p.eng.Watermarks().Generator(part); g.Watermark < f {
			p.eng.CatchUp(part)
			p.gated[part] = f
		}
	}
}

// lookUpInputID reads the input topic's id, which the transaction's offset
// commits carry (TxnOffsetCommit v6+).
func (p *pipeline) lookUpInputID(ctx context.Context) error {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tds, err := p.adm.ListTopics(lctx, p.cfg.Input.Topic)
	if err != nil {
		return fmt.Errorf("looking up input topic %s: %w", p.cfg.Input.Topic, err)
	}
	td, ok := tds[p.cfg.Input.Topic]
	if !ok || td.Err != nil {
		return fmt.Errorf("looking up input topic %s: %v", p.cfg.Input.Topic, td.Err)
	}
	p.inputID = td.ID
	return nil
}

func (p *pipeline) skipLen(part int32) int {
	if s := p.skip[part]; s != nil {
		return len(s.keys)
	}
	return 0
}

// adjustOffsets starts each assigned partition at the offset the local
// checkpoint holds: its state covers exactly the records before it.
func (p *pipeline) adjustOffsets(_ context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	p.offMu.Lock()
	defer p.offMu.Unlock()
	for part, o := range offsets[p.cfg.Input.Topic] {
		if off, ok := p.stored[part]; ok && o.EpochOffset().Offset != off {
			offsets[p.cfg.Input.Topic][part] = kgo.NewOffset().At(off).WithEpoch(-1)
			p.log.Info("resuming from local checkpoint", zap.Int32("partition", part), zap.Int64("offset", off), zap.Stringer("group_offset", o))
		}
	}
	return offsets, nil
}

func (p *pipeline) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	if p.eos {
		p.deferRelease(revoked[p.cfg.Input.Topic], true)
		return
	}
	p.handOver(ctx, revoked[p.cfg.Input.Topic], true)
}

// onLost: the group no longer accepts our commits and the partitions may
// already have a new owner: their local state is dropped without logging
// more of it (handOver).
func (p *pipeline) onLost(ctx context.Context, _ *kgo.Client, lost map[string][]int32) {
	if p.eos {
		p.deferRelease(lost[p.cfg.Input.Topic], false)
		return
	}
	p.handOver(ctx, lost[p.cfg.Input.Topic], false)
}

// handOver runs a commit cycle (to the group too when it still accepts
// commits) and releases the partitions.
func (p *pipeline) handOver(ctx context.Context, parts []int32, toGroup bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(parts) == 0 {
		return
	}
	switch {
	case p.closing.Load():
		// A clean shutdown keeps local state (its final cycle ran): a
		// restart catches up from the changelog instead of restoring.
		p.release(parts)
	case toGroup:
		// Revoked: log and commit their last changes, then drop them;
		// their state now lives in the changelog and with their next owner.
		if err := p.commit(ctx, true); err != nil {
			p.log.Warn("commit before giving up partitions failed", zap.Bool("revoked", toGroup), zap.Error(err))
		}
		p.release(parts)
		p.dropReleased(ctx, parts)
	default:
		// Lost: another member may own them already and be restoring them,
		// so nothing more of theirs is logged; what this instance did
		// since its last cycle is redone by the new owner. The other
		// partitions' changes are still logged and checkpointed.
		p.release(parts)
		p.dropReleased(ctx, parts)
		if err := p.commit(ctx, false); err != nil {
			p.log.Warn("commit after losing partitions failed", zap.Error(err))
		}
	}
	if !toGroup {
		p.inGroup.Store(false)
	}
	if toGroup {
		p.log.Info("partitions revoked", zap.Int32s("partitions", parts))
	} else {
		p.log.Warn("partitions lost", zap.Int32s("partitions", parts))
	}
}

// dropReleased drops released partitions' local state and checkpoints
// (mu held); a failure stops the pipeline. The checkpoint holds the other
// partitions' state too, so the panes and diverted records produced from
// it are acknowledged first (as in commit); when they cannot be, the
// checkpoint waits for the next commit cycle.
func (p *pipeline) dropReleased(ctx context.Context, parts []int32) {
	var err error
	for _, part := range parts {
		if err = p.dropPartition(part); err != nil {
			break
		}
	}
	if err == nil {
		p.panes.sync()
		if ferr := p.flushOutput(ctx); ferr != nil {
			if isFatal(ferr) {
				p.failed = fmt.Errorf("releasing partitions %v: %w", parts, ferr)
			}
			return
		}
		err = p.checkpoint(nil)
	}
	if err != nil {
		p.failed = fmt.Errorf("releasing partitions %v: %w", parts, err)
	}
}

func (p *pipeline) release(parts []int32) {
	for _, part := range parts {
		delete(p.gated, part)
		p.eng.Revoke(part)
		delete(p.parts, part)
		label := strconv.Itoa(int(part))
		for _, g := range []*prometheus.GaugeVec{p.m.watermark, p.m.idle, p.m.holds, p.m.lag} {
			g.DeleteLabelValues(p.cfg.Name, label)
		}
	}
}

// shutdown commits what was processed (unless the pipeline failed), leaves
// the group and closes everything, within grace of now (docs/OPERATIONS.md,
// shutdown): the final commit gets all but a share of grace kept for
// leaving the group; a commit still running then (a transaction's end
// waiting for a broker that is down, a restore holding the pipeline) is
// abandoned, and so is a client that cannot leave a group stuck in a
// rebalance. What was not committed is processed again after a restart
// (at_least_once) or rolled back (exactly_once), so giving up loses
// nothing; only a pipeline that failed (cause) makes the shutdown fail.
func (p *pipeline) shutdown(cause error, grace time.Duration) error {
	deadline := time.Now().Add(grace - shutdownMargin(grace))
	commitBy := deadline.Add(-leaveBudget(grace))
	p.closing.Store(true)
	if cause != nil {
		cause = fmt.Errorf("pipeline %s: %w", p.cfg.Name, cause)
	}
	committed := make(chan error, 1)
	go func() { committed <- p.finalCommit(cause, commitBy) }()
	var err error
	select {
	case err = <-committed:
	case <-time.After(time.Until(commitBy)):
		p.log.Error("shutdown grace: the final commit did not finish in time; exiting without it (uncommitted work is processed again after a restart, or rolled back under exactly_once)",
			zap.Duration("shutdown_grace", grace))
		closeWithin(p.cl, deadline, p.log)
		p.prodCancel()
		p.m.ready.WithLabelValues(p.cfg.Name).Set(0)
		return cause
	}
	if err != nil && cause == nil {
		p.log.Error("final commit failed; exiting without it (uncommitted work is processed again after a restart, or rolled back under exactly_once)", zap.Error(err))
	}
	if cause == nil && err == nil {
		lctx, cancel := context.WithDeadline(context.Background(), deadline)
		_ = p.cl.LeaveGroupContext(lctx)
		cancel()
	}
	closeWithin(p.cl, deadline, p.log)
	p.prodCancel()
	if cerr := p.db.Close(); cerr != nil && cause == nil {
		cause = cerr
	}
	p.m.ready.WithLabelValues(p.cfg.Name).Set(0)
	return cause
}

// finalCommit runs the last commit cycle (none after a failure: cause) and
// stops the pane writer; under exactly_once a committed cycle marks the
// local state clean.
func (p *pipeline) finalCommit(cause error, by time.Time) error {
	gctx, cancel := context.WithDeadline(context.Background(), by)
	defer cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	if cause == nil {
		if err = p.commit(gctx, true); errors.Is(err, errRolledBack) {
			err = nil // back at the last committed transaction: as clean
		}
		if err == nil && p.eos {
			err = p.markClean()
		}
	}
	p.panes.stop()
	return err
}

// shutdownMargin is the part of grace a pipeline leaves the process for
// returning and exiting.
func shutdownMargin(grace time.Duration) time.Duration { return min(grace/10, 500*time.Millisecond) }

// leaveBudget is the part of grace kept for leaving the group and closing
// the client after the final commit.
func leaveBudget(grace time.Duration) time.Duration { return min(grace/4, 2*time.Second) }

// closeWithin closes cl, waiting for it until deadline at most: a client
// whose group is stuck in a rebalance (waiting for a dead member's session
// to expire) cannot leave it sooner, and the process must not wait for it.
func closeWithin(cl *kgo.Client, deadline time.Time, log *zap.Logger) {
	closed := make(chan struct{})
	go func() { cl.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(time.Until(deadline)):
		log.Warn("shutdown grace: the Kafka client did not close in time (the group is rebalancing?); the group drops this member when its session times out")
	}
}

// releaseGated returns a partition that joined behind the frontier to the
// frontier once its own watermark has reached the frontier it joined at, or
// it is idle (mu held). Until then it runs on its own frontier
// (gateIfBehind). Not merely because its consumer reached the partition's
// end: its watermark is still behind the frontier then, and its next
// records, judged against the frontier, would be late (dropped under
// allowed_lateness 0) where replay, whose frontier the partition held,
// counts them; its frontier is held meanwhile, as the partition holds it
// after the release too.
func (p *pipeline) releaseGated() error {
	if len(p.gated) == 0 {
		return nil
	}
	idle := map[int32]bool{}
	for _, s := range p.eng.Watermarks().Status() {
		idle[s.Partition] = s.Idle
	}
	for part, f := range p.gated {
		g, _ := p.eng.Watermarks().Generator(part)
		if g.Watermark < f && !idle[part] {
			continue
		}
		delete(p.gated, part)
		if err := p.eng.ReleaseTimers(part); err != nil {
			return err
		}
	}
	return nil
}

// ready reports whether the pipeline has its assignment and commits succeed.
func (p *pipeline) ready() (bool, string) {
	if part := p.restoring.Load(); part >= 0 {
		return false, fmt.Sprintf("restoring partition %d from changelog %s (%d records so far)", part, p.clTopic, p.restoredRecords.Load())
	}
	if !p.assignedOnce.Load() {
		return false, "waiting for partition assignment"
	}
	if !p.inGroup.Load() {
		return false, "partitions lost (group session expired?); rejoining"
	}
	stale := max(readyStaleAfter, 5*time.Duration(p.cfg.CommitInterval)*time.Millisecond)
	last := p.lastCommitOK.Load()
	if last == 0 {
		return false, "no commit cycle has completed yet"
	}
	if age := p.now().Sub(time.Unix(0, last)); age > stale {
		return false, fmt.Sprintf("last successful commit %s ago (broker unreachable?)", age.Round(time.Second))
	}
	return true, ""
}

func msGauge(v int64) float64 {
	if v == watermark.MinTime || v == watermark.MaxTime {
		return math.NaN()
	}
	return float64(v)
}

// countEvictions adds the engine's cache evictions not counted yet to the
// metric (mu held).
func (p *pipeline) countEvictions() {
	n := p.eng.Stats().Evictions
	p.m.evictions.WithLabelValues(p.cfg.Name).Add(float64(n - p.countedEvictions))
	p.countedEvictions = n
}

// updateMetrics refreshes the gauges (mu held).
func (p *pipeline) updateMetrics() {
	name := p.cfg.Name
	f := p.eng.Frontier()
	p.m.frontier.WithLabelValues(name).Set(msGauge(f))
	if f == watermark.MinTime || f == watermark.MaxTime {
		p.m.frontierLag.WithLabelValues(name).Set(math.NaN())
	} else {
		p.m.frontierLag.WithLabelValues(name).Set(float64(p.nowMS()-f) / 1000)
	}
	p.m.openWindows.WithLabelValues(name).Set(float64(p.eng.OpenWindows()))
	p.m.cacheBytes.WithLabelValues(name).Set(float64(p.eng.CacheBytes()))
	p.countEvictions()
	p.m.assigned.WithLabelValues(name).Set(float64(len(p.parts)))
	ok, _ := p.ready()
	p.m.ready.WithLabelValues(name).Set(b2f(ok))
	status := p.eng.Watermarks().Status()
	minActive := watermark.MaxTime
	for _, s := range status {
		if s.Assigned && !s.Idle && s.Watermark < minActive {
			minActive = s.Watermark
		}
	}
	for _, s := range status {
		st := p.parts[s.Partition]
		if st == nil || !s.Assigned {
			continue
		}
		label := strconv.Itoa(int(s.Partition))
		p.m.watermark.WithLabelValues(name, label).Set(msGauge(s.Watermark))
		p.m.idle.WithLabelValues(name, label).Set(b2f(s.Idle))
		p.m.holds.WithLabelValues(name, label).Set(b2f(!s.Idle && s.Watermark == minActive && f < watermark.MaxTime))
		if c := st.consumed(); st.end >= 0 && c >= 0 {
			p.m.lag.WithLabelValues(name, label).Set(float64(max(0, st.end-c)))
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
