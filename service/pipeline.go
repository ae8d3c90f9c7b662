package service

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/evolve"
	"github.com/windowd/windowd/kafka"
	"github.com/windowd/windowd/repartition"
	"github.com/windowd/windowd/schema"
	"github.com/windowd/windowd/sink"
	"github.com/windowd/windowd/state"
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
	start    int64
	end      int64 // last known high watermark; -1 until known
	marked   int64 // position of the last changelog marker written
	first    int64 // offset of the first record processed while position was unknown; -1: none
	in       prometheus.Counter
	dead     prometheus.Counter
	late     prometheus.Counter
	filtered prometheus.Counter // records the filter rejected
}

// newPartition is a partition whose position, start and end are not known
// yet, counting into the given metrics (late: nil where nothing is
// dropped as late).
func newPartition(in, dead, late, filtered prometheus.Counter) *partition {
	return &partition{position: -1, start: -1, end: -1, first: -1, in: in, dead: dead, late: late, filtered: filtered}
}

// pipeline runs one configured pipeline: a consumer-group member whose
// records feed the windowing engine, whose panes go to the output topic,
// and whose commit cycle makes output, state and offsets durable in that
// order (docs/SEMANTICS.md, Delivery: at_least_once).
//
// Its fields are grouped by who may touch them (docs/ARCHITECTURE.md,
// Goroutines of a pipeline): those set while it is built and only read
// after, by every goroutine; mu, the poll loop's state, which the group
// callbacks take too; and the hand-offs to other goroutines, each with its
// own lock, channel or atomics.
type pipeline struct {
	setup // set while the pipeline is built; read-only after

	// mu is the poll loop's state: the engine and what it works with.
	// The group callbacks take it too (at_least_once they run between
	// polls, BlockRebalanceOnPoll; exactly_once holds mu from the poll
	// through its records, poll.go). As in Pebble, a method named
	// …Locked runs holding mu.
	mu loopState

	// rel is what the rebalance callbacks leave for the poll loop under
	// exactly_once (they must not wait for mu): partitions to release, and
	// whether the member must settle its assignment before a transaction
	// may commit.
	rel struct {
		sync.Mutex
		released     []int32
		awaitSettle  bool
		revokes      int // revoke and lost callbacks so far
		revokesAtEnd int // revokes before the last transaction end began
		// lost: partitions lost since the last rollback, whose state
		// the rollback keeps (keepLost).
		lost []int32
	}

	// off is the persisted offsets, read by AdjustFetchOffsetsFn (which
	// runs on the group goroutine and must not wait for mu).
	off struct {
		sync.Mutex
		stored map[int32]int64 // next offset per partition, as committed in Pebble
		// awaiting: assigned partitions whose group offsets franz-go has
		// not fetched yet, and since when (offsetwatch.go).
		awaiting map[int32]time.Time
	}

	// Published by the loop for readiness, the status page and the
	// balancer.
	assignedOnce atomic.Bool
	closing      atomic.Bool                     // shutting down: the final commit cycle ran or runs
	inGroup      atomic.Bool                     // joined: assigned and not lost since
	lastCommitOK atomic.Int64                    // Unix nanoseconds of the last successful commit cycle
	offBlocked   atomic.Pointer[string]          // why the group's offsets do not come (offsetwatch.go); nil while they do
	warm         atomic.Pointer[map[int32]int64] // publishWarm's snapshot (standby.go)
	st           statusState                     // the status page's snapshot and recent panes (statusapi.go)

	w writerState // the pane writer's
	q queryState  // the query API's (query.go)

	rs *restores   // restores and standbys under way, with the readers' channels (restorejob.go)
	sb standbyPlan // this member's standby partitions, from the planner goroutine (standby.go)
}

// setup is what a pipeline is given or opens while it is built: read-only
// after, by every goroutine.
type setup struct {
	orig          *config.Pipeline // as configured (cfg is stage 2's when repartitioned)
	cfg           *config.Pipeline
	log           *zap.Logger
	m             *metrics
	now           func() time.Time
	cl            *kgo.Client
	adm           *kadm.Client
	prod          *kafka.Producer // safe for every goroutine
	db            *state.DB       // its pending batch is mu's (through mu.store)
	stdout        *lockedWriter
	clTopic       string    // the changelog topic
	baseOpts      []kgo.Opt // client options (brokers, TLS, SASL) for changelog readers
	engOpts       windowing.Options
	eos           bool
	in            inputTopics               // the input topics, and the pipeline's partitions of theirs (coinputs.go)
	session       time.Duration             // kafka.session_timeout
	queryAddr     string                    // the address this instance's query API answers at (http.advertise)
	txn           *kgo.GroupTransactSession // exactly_once: the transact session wrapping cl
	txnID         string                    // exactly_once: its transactional id
	reg           *schema.Registry          // the schema registry of an avro or protobuf input
	prodCtx       context.Context           // produce context: lives until the pipeline is closed
	prodCancel    context.CancelFunc
	standbys      int                                        // state.standby_replicas
	up            *repartitioner                             // repartition: true: stage 1, on a goroutine of its own (stage1.go)
	abortTxn      func() bool                                // Faults.AbortTxn; nil: off
	endTxnErr     func() error                               // Faults.EndTxn; nil: off
	restoreStarts func(ctx context.Context, partition int32) // Faults.RestoreStarts; nil: off
	restoreStall  time.Duration                              // how long a restore reads nothing before it looks why (restorewatch.go)
	guard         *retentionGuard                            // the topics' time settings (retention.go)
	outGuard      *guardedTopic                              // the output topic's, for the pane writer
}

// writerState is the pane writer's (writePane: on the writer goroutine,
// or on the loop's when it writes inline).
type writerState struct {
	enc sink.PaneEncoder // the pane values' format (paneschema.go)
}

// loopState is the poll loop's state: the engine and what it works with
// (pipeline.mu). A method named …Locked runs with it held.
type loopState struct {
	sync.Mutex
	eng   engine
	store *trackingStore // db, recording the keys each cycle changes
	dec   *decoders      // decode a record outside a poll's (handleLocked)
	// def: the definition the state is kept under (definition.go),
	// and its stored form.
	def      *evolve.Definition
	defBytes []byte
	align    *aligner            // watermark.max_drift (align.go); nil: off
	wait     *registryWait       // partitions paused while the registry cannot be asked; nil for JSON
	rp       *stage2             // repartition: true (stage2.go); nil otherwise
	split    *splitDetector      // notices keys seen on two partitions (split.go); nil: off
	panes    *paneWriter         // hands the engine's panes to the pane writer goroutine
	inputIDs map[string][16]byte // exactly_once: the input topics' ids for the transaction's offset commits
	// paneCounters: windowd_panes_total by timing, looked up once.
	paneCounters [windowing.Late + 1]prometheus.Counter
	status       statusRates // what the status snapshots are built from (statusapi.go)

	parts  map[int32]*partition
	inline decoded      // handle's decoding of a record outside a poll's
	ahead  *decodeAhead // step's decoding of a poll's records

	prefetchKeys []string // prefetchLocked's, reused

	lastCommit time.Time
	// cycleRecords: records processed since the last cycle began;
	// cycleWaiting: the records waiting in Kafka when it began; putOff:
	// this cycle was put off (cadence.go).
	cycleRecords int64
	cycleWaiting int64
	putOff       bool
	lastEnds     time.Time
	lastErrLog   time.Time
	lastDeadLog  time.Time
	deadSinceLog int
	failed       error              // a rebalance callback could not restore or release state
	clNext       map[int32]int64    // next changelog offset per partition that local state holds
	skip         map[int32]*skipSet // restored keys ahead of their partition's position
	following    map[int32]bool     // co-partitioned inputs: followers waiting for their lead's restore (coinputs.go)
	// restoredFollow: followers of a state restored here before they
	// were assigned, where the restore puts them (joinFollowerLocked).
	restoredFollow map[int32]restoredAt
	loggedWrites   int64 // store.writes already counted in the metric
	// counted: the engine's Stats() whose Evictions, QuietAdvances and
	// Discarded are already counted in the metrics (zero again with a rollback's
	// new engine).
	counted     windowing.Stats
	gated       map[int32]int64 // partitions catching up on their own frontier: the frontier when they joined
	faultAfter  int             // Faults.ExitAfterChangelog; 0: off
	defSeq      int             // counts changes of defBytes
	drainLogged bool            // the end of a drain was logged
	defLogged   map[int32]int   // defSeq last written to each partition's changelog

	// exactly_once (exactlyonce.go)
	txnRecords bool // the open transaction holds produced records
	// txnDuplicates counts the repartitioned records the open
	// transaction dropped as duplicates: the metric takes them when
	// it commits, as a rollback processes and drops them again.
	txnDuplicates int
	abortNext     bool      // the open transaction must abort
	lastSettle    time.Time // last settleAssignment attempt
	// keptLost: lost partitions whose state, as of the last
	// committed transaction, stays until then for the group to
	// hand them back (keepLost).
	keptLost map[int32]time.Time

	progressDue time.Time // when the next progress records are due (progress.go)

	// adoptedPlan: the text of the last changed configuration a restore
	// logged (definition.go): a plan shared by many partitions is logged
	// once.
	adoptedPlan string
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

// plan is what one pipeline is built from, resolved once by Run from the
// configuration: the pipeline as configured, its topics (partition counts,
// the changelog's id, from kafka.EnsureTopics) and the process's settings
// it uses. The client options every client starts from are in deps.
type plan struct {
	pipeline   *config.Pipeline
	topics     kafka.Topics
	stateDir   string        // state.dir
	cacheBytes int64         // state.cache_bytes
	standbys   int           // state.standby_replicas
	session    time.Duration // kafka.session_timeout
}

// plans resolves the plan of every pipeline of c.
func plans(c *config.Config, topics map[string]kafka.Topics) []plan {
	pls := make([]plan, len(c.Pipelines))
	for i := range c.Pipelines {
		pl := &c.Pipelines[i]
		pls[i] = plan{pipeline: pl, topics: topics[pl.Name], stateDir: c.State.Dir, cacheBytes: c.State.CacheBytes,
			standbys: c.State.StandbyReplicas, session: time.Duration(c.Kafka.SessionTimeout) * time.Millisecond}
	}
	return pls
}

// newPipeline builds the pipeline of pl; a repartitioned pipeline runs as
// stage 2 over the internal topic, with its stage 1 beside it. On an error
// what was opened is closed in one place.
func newPipeline(pl plan, deps deps) (p *pipeline, err error) {
	p = newPipelineState(pl, deps)
	defer func() {
		if err != nil {
			// After mu is released: the client's Close waits for the
			// group's callbacks, which wait for mu (and then find the
			// pipeline closing).
			if p.cl != nil {
				p.cl.Close()
			}
			p.prodCancel()
			if p.db != nil {
				p.closeQuery()
				p.db.Close()
			}
			p = nil
		}
	}()
	txnID, err := p.openLocalState(pl, deps)
	if err != nil {
		return p, err
	}
	p.openDecoders(deps)
	if p.mu.def.GrewFrom > 0 && p.mu.rp == nil {
		p.q.byHash = false // a key's windows may be on its partition before the growth
	}
	p.mu.panes = newPaneWriter(p.writePane, !spreads(p.cfg))
	p.baseOpts = append(slices.Clip(deps.clientOpts), kafka.LoggerOpt(p.log))
	if p.mu.rp != nil {
		if p.up, err = newRepartitioner(p.orig, p.session, p.baseOpts, p.log, p.m, p.now, pl.topics.Repartition, deps.registry, inputCounts(pl.topics)); err != nil {
			return p, fmt.Errorf("pipeline %s: kafka client: %w", p.cfg.Name, err)
		}
		p.up.dlqGuard = p.guard.topic(p.orig.Name, p.orig.DeadLetterTopic)
	} else {
		p.watchSplitKeys()
	}
	// The group may assign partitions as soon as the client exists; the
	// callbacks wait for mu until the pipeline is complete.
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.openGroupClientLocked(txnID); err != nil {
		p.closing.Store(true) // a callback waiting for mu returns at once
		return p, fmt.Errorf("pipeline %s: kafka client: %w", p.cfg.Name, err)
	}
	p.m.ready.WithLabelValues(p.cfg.Name).Set(0)
	return p, nil
}

// inputCounts is the partition count of each of a pipeline's input topics.
func inputCounts(t kafka.Topics) []int32 {
	if t.InputPartitions == nil {
		return []int32{t.Partitions}
	}
	return t.InputPartitions
}

// newPipelineState is the pipeline of pl before anything is opened.
func newPipelineState(pl plan, deps deps) *pipeline {
	cfg, topics := pl.pipeline, pl.topics
	orig := cfg
	var rp *stage2
	if cfg.Repartition != nil {
		layout := repartition.NewLayout(inputCounts(topics))
		rp = &stage2{layout: layout, topics: cfg.InputTopics(), ups: map[int32]*repartition.Table{}}
		cfg = stage2Config(cfg)
	}
	p := &pipeline{setup: setup{
		orig:      orig,
		cfg:       cfg,
		log:       deps.log.With(zap.String("pipeline", cfg.Name)),
		m:         deps.metrics,
		now:       deps.now,
		clTopic:   kafka.ChangelogTopic(orig),
		eos:       cfg.Delivery == config.ExactlyOnce,
		engOpts:   windowing.Options{ShardByPartition: true, CacheBytes: int(pl.cacheBytes), MaxPendingBytes: deps.faults.MaxPendingBytes},
		abortTxn:  deps.faults.AbortTxn,
		endTxnErr: deps.faults.EndTxn,
	}}
	p.in = inputTopics{topics: []string{cfg.Input.Topic}}
	if rp == nil && cfg.Inputs != nil {
		// Co-partitioned inputs (coinputs.go): partition p of each input
		// joins the state of the first's.
		p.in.topics = cfg.InputTopics()
		p.engOpts.Shards = coStride
	}
	p.guard, p.outGuard = deps.guard, deps.guard.topic(orig.Name, orig.OutputTopic)
	p.w.enc = newPaneEncoder(cfg, deps.paneSchemas[orig.Name])
	p.mu.rp = rp
	p.rs = newRestores()
	p.standbys = pl.standbys
	p.queryAddr = deps.queryAddr
	p.q.byHash = !cfg.Key.FromValue() || rp != nil
	p.q.partitions = pl.topics.Partitions
	if rp != nil {
		p.q.partitions = pl.topics.Repartition
	}
	p.restoreStarts = deps.faults.RestoreStarts
	p.restoreStall = restoreStallAfter
	if deps.faults.RestoreStall > 0 {
		p.restoreStall = deps.faults.RestoreStall
	}
	p.mu.parts, p.mu.clNext, p.mu.gated = map[int32]*partition{}, map[int32]int64{}, map[int32]int64{}
	p.mu.defLogged = map[int32]int{}
	p.mu.following = map[int32]bool{}
	p.mu.keptLost = map[int32]time.Time{}
	p.session = pl.session
	p.off.stored = map[int32]int64{}
	p.mu.faultAfter = deps.faults.ExitAfterChangelog
	if cfg.OutputStdout {
		p.stdout = deps.stdout
	}
	p.prodCtx, p.prodCancel = context.WithCancel(context.Background())
	return p
}

// openLocalState opens the state directory and the engine on it: the
// stored offsets and definition, the plan of a changed configuration, and
// under exactly_once the transactional id it returns.
func (p *pipeline) openLocalState(pl plan, deps deps) (txnID string, err error) {
	name := p.cfg.Name
	dir := filepath.Join(pl.stateDir, name)
	stateOpts := state.Options{
		FS:   deps.faults.FS,
		Logf: func(format string, args ...any) { p.log.Error("pebble: " + fmt.Sprintf(format, args...)) },
		Fatal: func(msg string) {
			p.m.ready.WithLabelValues(name).Set(0)
			deps.fatal(fmt.Sprintf("pipeline %s: %s", name, msg))
		},
	}
	if p.db, err = p.openState(dir, stateOpts, pl.topics.ChangelogID); err != nil {
		return "", err
	}
	p.mu.store = &trackingStore{DB: p.db, dirty: map[int32]map[string][]byte{}}
	if p.eos {
		if txnID, err = p.openExactlyOnce(); err != nil {
			return "", fmt.Errorf("pipeline %s: state: %w", name, err)
		}
	}
	if err := p.loadMetaLocked(); err != nil {
		return "", err
	}
	if err := p.planState(pl.topics.Partitions, pl.topics.Logged, dir); err != nil {
		return "", err
	}
	p.mu.eng, err = p.newEngineLocked()
	if err == nil {
		err = p.storeDefinitionLocked()
	}
	if err != nil {
		return "", fmt.Errorf("pipeline %s: restore state: %w", name, err)
	}
	// Partitions of the last checkpoint hold the frontier until the group
	// hands them back (or two session timeouts pass: they moved elsewhere).
	if held := p.mu.eng.Watermarks().HoldRestored(p.nowMS(), 2*p.session.Milliseconds()); len(held) > 0 {
		p.log.Info("holding the frontier for partitions of the last checkpoint until they are assigned",
			zap.Int32s("partitions", held), zap.Duration("at_most", 2*p.session))
	}
	return txnID, nil
}

// openDecoders makes the decoders of the loop and of the poll's second
// goroutine (ahead.go), on the schema registry for avro and protobuf.
func (p *pipeline) openDecoders(deps deps) {
	cfg := p.cfg
	p.mu.dec = newDecoders(cfg)
	p.mu.ahead = newDecodeAhead(newDecoders(cfg), spreads(cfg))
	p.mu.dec.co, p.mu.ahead.dec.co = p.in.co(), p.in.co()
	if p.mu.dec.withSchemas(cfg, deps.registry, false) {
		p.mu.ahead.dec.withSchemas(cfg, deps.registry, true)
		p.reg = deps.registry
		// Before the client joins the group: its callbacks read it.
		p.mu.wait = newRegistryWait(p.in, p.log, p.m.registryWaiting.WithLabelValues(cfg.Name, "pipeline"))
	}
}

// watchSplitKeys starts the split-key detector where a key's records may
// be on two input partitions (split.go): a key from the value, or an input
// that grew.
func (p *pipeline) watchSplitKeys() {
	if p.mu.def.GrewFrom > 0 {
		p.startSplitDetectorLocked() // partitions were added to the input
	}
	if k := p.cfg.Key; k.FromValue() {
		p.startSplitDetectorLocked()
		p.log.Warn("a key from the value without repartition: true: the records of one key ("+k.String()+") must share an input partition, or its windows are split; windowd warns and counts windowd_split_keys_total when it sees one on two partitions",
			zap.String("key", k.String()))
	}
}

// openGroupClientLocked creates the consumer-group client (under exactly_once
// its transact session, with the first transaction begun) and what works
// through it (its callbacks may run at once).
func (p *pipeline) openGroupClientLocked(txnID string) error {
	cfg := p.cfg
	opts := append(kafka.GroupOpts(p.baseOpts, p.session, cfg.Input.Group, p.in.topics...),
		// Partitions that move go where their state is (standby.go); with
		// several inputs, partition p of each with the first's.
		kgo.Balancers(p.balancers()...),
		kgo.OnPartitionsAssigned(p.onAssigned),
		kgo.OnPartitionsRevoked(p.onRevoked),
		kgo.OnPartitionsLost(p.onLost),
		kgo.AdjustFetchOffsetsFn(p.adjustOffsets),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordPartitioner(kafka.NewPartitioner(p.clTopic, cfg.OutputTopic)),
		kgo.WithPools(recordSlices),
	)
	if cfg.Watermark.MaxDrift > 0 {
		opts = append(opts, kgo.FetchMaxWait(alignFetchMaxWait))
	} else {
		opts = append(opts, kgo.FetchMaxWait(resumeFetchMaxWait))
	}
	var err error
	if p.eos {
		p.txnID = txnID
		opts = append(opts, kgo.TransactionalID(txnID), kgo.TransactionTimeout(txnTimeout))
		p.txn, err = kgo.NewGroupTransactSession(opts...)
		if err == nil {
			p.cl = p.txn.Client()
			// Begin may load the producer id; on an error newPipeline
			// closes the client once mu is released.
			err = unanswered(p.txn.Begin())
		}
		p.log.Info("exactly_once: one transaction per commit cycle", zap.String("transactional_id", txnID),
			zap.Duration("commit_interval", time.Duration(cfg.CommitInterval)*time.Millisecond))
	} else {
		// Rebalance callbacks run between polls. Not under exactly_once:
		// a transaction's end waits for a heartbeat, and a member that
		// lost the group gets its onLost only through this gate, so the
		// end would wait forever (exactlyonce.go serialises by mu).
		p.cl, err = kgo.NewClient(append(opts, kgo.BlockRebalanceOnPoll())...)
	}
	if err != nil {
		return err
	}
	p.adm = kadm.NewClient(p.cl)
	p.prod = kafka.NewProducer(p.cl)
	if p.mu.wait != nil {
		p.mu.wait.cl = p.cl
	}
	if cfg.Watermark.MaxDrift > 0 {
		p.mu.align = newAligner(p.cl, p.in, cfg.Name, p.m)
		p.mu.align.wait = p.mu.wait
	}
	return nil
}

func (p *pipeline) nowMS() int64 { return p.now().UnixMilli() }

// balancers are the group's balancers, in order of preference: the warm
// balancer, then cooperative-sticky for members that do not know it (an
// older windowd in a rolling upgrade), but not for co-partitioned inputs,
// which only the warm balancer keeps together.
func (p *pipeline) balancers() []kgo.GroupBalancer {
	warm := kafka.WarmBalancer(p.in.topics, p.warmPositions, p.queryAddr)
	if p.in.co() {
		return []kgo.GroupBalancer{warm}
	}
	return []kgo.GroupBalancer{warm, kgo.CooperativeStickyBalancer()}
}
