package integration

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/windowd/windowd/config"
)

// rebalanceYAML is the pipeline of TestStateFollowsPartitions and of the
// crash-loop and zombie tests (writeSteadyConfig fills it per run and per
// instance: brokers, session timeout, state dir, topics, group, and the
// pipeline's last lines: commit interval and delivery).
//
// allowed_lateness 30s: when the partitions of a killed instance move, they
// stall for the session timeout (6s here) plus the rebalance, while the other
// instances' frontier runs on with the steady stream. The new owner runs
// their backlog on their own frontier (windowing.Engine.CatchUp), so it is
// not late; were it judged against the new owner's frontier, it would be late
// by about that much (~10s), and 30s would still keep it inside its windows.
// 30s also lets windows expire and finalise during the run, so finalised and
// deleted state moves between instances too.
//
// No early or late trigger: every window ends with exactly one final pane
// (closing: always), and the test compares final panes only. Which
// non-final panes a window gets depends on where its records were late.
const rebalanceYAML = `kafka:
  brokers: [%s]
  session_timeout: %s
state:
  dir: %s
http:
  listen: 127.0.0.1:0
shutdown_grace: 20s
pipelines:
  - name: p
    input: {topic: %s, group: %s}
    key: {field: user}
    timestamp: {field: ts}
    watermark: {max_delay: 2s}
    window: {type: tumbling, size: 1s}
    allowed_lateness: 30s
    trigger: {on_time: true, closing: always}
    accumulation: accumulating
    aggregates:
      - {name: n, op: count}
      - {name: total, op: sum, field: x}
    output: {topic: %s}
    late_topic: %s
    dead_letter_topic: %s
%s`

// newRebalanceEnv creates the topics and the shared config of
// TestStateFollowsPartitions (state dir "shared", used only for replay).
func newRebalanceEnv(t *testing.T, partitions int32, delivery string) *env {
	return newRebalanceEnvWith(t, partitions, delivery, "", false)
}

// newRebalanceEnvWith is newRebalanceEnv with an allowed_lateness ("": 30s)
// and, with repartition, the pipeline repartitioned by its key field.
func newRebalanceEnvWith(t *testing.T, partitions int32, delivery, lateness string, repartition bool) *env {
	t.Helper()
	e := &env{t: t, in: uniqueName(t, "in"), out: uniqueName(t, "out"), late: uniqueName(t, "late"), dlq: uniqueName(t, "dlq"),
		group: uniqueName(t, "g"), partitions: partitions, delivery: delivery, lateness: lateness, repartition: repartition}
	createTopic(t, e.in, partitions)
	e.stateDir = filepath.Join(t.TempDir(), "shared")
	e.cfgPath = e.writeRebalanceConfig(e.stateDir)
	cfg, err := config.Load(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	e.cfg = cfg
	return e
}

func (e *env) writeRebalanceConfig(stateDir string) string {
	tail := "    commit_interval: 200ms\n    delivery: " + e.delivery + "\n"
	if e.repartition {
		tail += "    repartition: true\n"
	}
	return e.writeSteadyConfig(stateDir, "6s", tail)
}

// writeSteadyConfig writes rebalanceYAML for e's topics and group into a
// new file and returns its path; tail is the pipeline's last lines.
func (e *env) writeSteadyConfig(stateDir, sessionTimeout, tail string) string {
	e.t.Helper()
	path := filepath.Join(e.t.TempDir(), "windowd.yaml")
	yaml := fmt.Sprintf(rebalanceYAML, strings.Join(quoteAll(brokers), ", "), sessionTimeout, stateDir,
		e.in, e.group, e.out, e.late, e.dlq, tail)
	if e.lateness != "" {
		yaml = strings.Replace(yaml, "allowed_lateness: 30s", "allowed_lateness: "+e.lateness, 1)
	}
	if e.standbys > 0 {
		yaml = strings.Replace(yaml, "state:\n", fmt.Sprintf("state:\n  standby_replicas: %d\n", e.standbys), 1)
	}
	if e.window != "" {
		yaml = strings.Replace(yaml, "window: {type: tumbling, size: 1s}", "window: {type: tumbling, size: "+e.window+"}", 1)
	}
	if e.recordKey {
		yaml = strings.Replace(yaml, "    key: {field: user}\n", "", 1)
	}
	if e.progress {
		yaml = strings.Replace(yaml, "    output: {topic: "+e.out+"}", "    output: {topic: "+e.out+", progress_interval: 100ms}", 1)
	}
	if d := os.Getenv("WINDOWD_CRASH_MAX_DELAY"); d != "" {
		yaml = strings.Replace(yaml, "max_delay: 2s", "max_delay: "+d, 1)
	}
	writeFile(e.t, path, yaml)
	return path
}

// member is the env of one instance: same topics and group, its own
// (empty) state dir and config file.
func (e *env) member(name string) *env {
	e.t.Helper()
	m := *e
	m.stateDir = filepath.Join(e.t.TempDir(), "state-"+name)
	m.cfgPath = e.writeRebalanceConfig(m.stateDir)
	return &m
}

// steadyProducer writes a steady out-of-order stream to every partition
// until halted: every 50 ms, 2 records per partition. Per partition, record
// n has event time base + 25ms·n minus up to 500 ms of disorder, well within
// max_delay 2s, so replay (and an undisturbed run) never finds a record
// late. Its record function gives each record's key and value
// (startSteadyProducer: keys k<p>-<i>, 4 per partition, on partition p only).
type steadyProducer struct {
	t      *testing.T
	cl     *kgo.Client
	parts  int32
	rng    *rand.Rand
	record func(rng *rand.Rand, p int32, n int, ts int64) input // n: records produced before
	// disorder: up to this many ms are taken off a record's event time
	disorder int64
	// tick: how often a batch goes out (0: steadyTick); slower than
	// steadyTick, event time runs slower than wall time and windows stay
	// open across more restarts
	tick time.Duration
	// lag: partition p's event time runs lag(p) ms behind (nil: none)
	lag func(p int32) int64

	mu   sync.Mutex
	recs []input
	seq  int64 // records produced per partition (the same for every partition)

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

const (
	steadyTick       = 50 * time.Millisecond
	steadyPerTick    = 2  // records per partition and tick
	steadyStepMS     = 25 // event time between consecutive records of a partition
	steadyDisorderMS = 500
	steadyKeys       = 4 // keys per partition
)

func startSteadyProducer(t *testing.T, e *env) *steadyProducer {
	return startProducer(t, e, 42, steadyRecord)
}

// steadyRecord is a record of key k<p>-<0..3> on partition p.
func steadyRecord(rng *rand.Rand, p int32, _ int, ts int64) input {
	u := fmt.Sprintf("k%d-%d", p, rng.Intn(steadyKeys))
	return input{partition: p, key: u, value: fmt.Sprintf(`{"user":%q,"ts":%d,"x":%d}`, u, ts, rng.Intn(100))}
}

// laggingPartitions makes partition p's event time run 3p seconds behind,
// well beyond max_delay.
func laggingPartitions(p int32) int64 { return int64(p) * 3000 }

// lagOf is how far partition p's event time runs behind the stream's.
func (sp *steadyProducer) lagOf(p int32) int64 {
	if sp.lag == nil {
		return 0
	}
	return sp.lag(p)
}

// startProducer starts a steadyProducer whose records come from record.
func startProducer(t *testing.T, e *env, seed int64, record func(rng *rand.Rand, p int32, n int, ts int64) input) *steadyProducer {
	return startProducerWith(t, e, seed, steadyDisorderMS, 0, nil, record)
}

// startLockstepProducer starts a steadyProducer whose records are in event
// time order within each partition (no disorder), 10 keys per partition.
func startLockstepProducer(t *testing.T, e *env) *steadyProducer {
	var tick time.Duration
	if s := os.Getenv("WINDOWD_CRASH_TICK"); s != "" {
		var err error
		if tick, err = time.ParseDuration(s); err != nil {
			t.Fatalf("WINDOWD_CRASH_TICK: %v", err)
		}
	}
	return startProducerWith(t, e, 43, 0, tick, nil, func(rng *rand.Rand, p int32, _ int, ts int64) input {
		u := fmt.Sprintf("k%d-%d", p, rng.Intn(10))
		return input{partition: p, key: u, value: fmt.Sprintf(`{"user":%q,"ts":%d,"x":%d}`, u, ts, rng.Intn(100))}
	})
}

// startProducerWith is startProducer with up to disorder ms of disorder, a
// batch every tick (0: steadyTick) and partitions lagging by lag (nil: none).
func startProducerWith(t *testing.T, e *env, seed, disorder int64, tick time.Duration, lag func(p int32) int64, record func(rng *rand.Rand, p int32, n int, ts int64) input) *steadyProducer {
	sp := &steadyProducer{t: t, parts: e.partitions, rng: rand.New(rand.NewSource(seed)), record: record, disorder: disorder, tick: tick, lag: lag,
		cl:   newClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(e.in)),
		stop: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(sp.halt) // before the client closes (cleanups run last first)
	go sp.run()
	return sp
}

func (sp *steadyProducer) run() {
	defer close(sp.done)
	tick := steadyTick
	if sp.tick > 0 {
		tick = sp.tick
	}
	tk := time.NewTicker(tick)
	defer tk.Stop()
	for {
		select {
		case <-sp.stop:
			return
		case <-tk.C:
		}
		batch := make([]input, 0, int(sp.parts)*steadyPerTick)
		for p := int32(0); p < sp.parts; p++ {
			for i := int64(0); i < steadyPerTick; i++ {
				ts := base + (sp.seq+i)*steadyStepMS - sp.rng.Int63n(sp.disorder+1) - sp.lagOf(p)
				batch = append(batch, sp.record(sp.rng, p, len(sp.recs)+len(batch), ts))
			}
		}
		krs := make([]*kgo.Record, len(batch))
		for i, r := range batch {
			krs[i] = &kgo.Record{Partition: r.partition, Key: []byte(r.key), Value: []byte(r.value)}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := sp.cl.ProduceSync(ctx, krs...).FirstErr()
		cancel()
		if err != nil {
			sp.t.Errorf("steady producer: %v", err)
			return
		}
		sp.mu.Lock()
		sp.recs = append(sp.recs, batch...)
		sp.seq += steadyPerTick
		sp.mu.Unlock()
	}
}

// halt stops the stream and waits for the last batch's acks.
func (sp *steadyProducer) halt() {
	sp.stopOnce.Do(func() { close(sp.stop) })
	<-sp.done
}

// progress returns the records produced so far and the event time the
// stream has reached (every partition has records up to it, minus disorder).
func (sp *steadyProducer) progress() (records int, eventTime int64) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return len(sp.recs), base + sp.seq*steadyStepMS
}

// finish stops the stream, closes every window with a flush record per
// partition and waits until the group has committed the whole input; it
// returns every record produced.
func (sp *steadyProducer) finish(e *env) []input {
	sp.halt()
	flush := flushRecords(e.partitions)
	produce(sp.t, e.in, flush)
	e.waitCommitted(sp.t, 60*time.Second)
	return append(sp.records(), flush...)
}

func (sp *steadyProducer) records() []input {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return append([]input(nil), sp.recs...)
}

var watermarkLineRE = regexp.MustCompile(`^windowd_partition_watermark_ms\{[^}]*partition="(\d+)"[^}]*\} (\S+)$`)

// partitionWatermarks scrapes the watermark of every partition the
// instance holds (nil when it does not answer).
func (inst *instance) partitionWatermarks() map[int32]float64 {
	resp, err := httpGetQuiet("http://" + inst.httpAddr + "/metrics")
	if err != nil {
		return nil
	}
	out := map[int32]float64{}
	for _, l := range strings.Split(resp, "\n") {
		if m := watermarkLineRE.FindStringSubmatch(l); m != nil {
			p, _ := strconv.Atoi(m[1])
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				v = math.NaN()
			}
			out[int32(p)] = v
		}
	}
	return out
}

// httpGetQuiet is a GET that reports failure instead of failing the test
// (an instance may have just been killed).
func httpGetQuiet(url string) (string, error) {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func (inst *instance) heldPartitions() []int32 {
	var ps []int32
	for p := range inst.partitionWatermarks() {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

// TestStateFollowsPartitions (issue #4, docs/SEMANTICS.md, State follows
// partitions): three instances (separate processes, one group, each its own
// state dir) window a steady out-of-order stream over 8 partitions; one is
// killed (kill -9), a fourth starts with an empty state dir, then two are
// stopped (SIGTERM) and one is left with every partition. The stream never
// pauses. At the end every window replay computes for the same records has
// exactly one final pane in the output, with replay's final aggregates; no
// window is missing or extra, no record was dropped as late, and a pane
// emitted twice (at least once, after the kill) repeats its pane id with
// byte-identical content.
func TestStateFollowsPartitions(t *testing.T) {
	parallel(t, 50*time.Second) // mostly waits for the stream
	stateFollowsPartitions(t, "at_least_once", "", false)
}

// TestStateFollowsPartitionsNoLateness is TestStateFollowsPartitions with
// allowed_lateness 0s: a record that a partition moved behind the frontier
// would make late is lost here instead of turned into a LATE update, so
// frontier and position bugs of the handover show as missing panes.
func TestStateFollowsPartitionsNoLateness(t *testing.T) {
	parallel(t, 50*time.Second) // mostly waits for the stream
	stateFollowsPartitions(t, "at_least_once", "0s", false)
}

// TestStateFollowsPartitionsExactlyOnceNoLateness is the same under
// exactly_once.
func TestStateFollowsPartitionsExactlyOnceNoLateness(t *testing.T) {
	parallel(t, 50*time.Second) // mostly waits for the stream
	stateFollowsPartitions(t, "exactly_once", "0s", false)
}

// TestRepartitionScaleIn is the same sequence (three instances, one killed,
// a fourth joins, scale in to one by SIGTERM) on a repartitioned pipeline
// with allowed_lateness 0s: both stages move, and the last instance, which
// ends up with every input and internal partition, must emit every window's
// final pane. It once emitted nothing after the rebalance: internal
// partitions that moved joined behind its frontier, were let go at once
// because they were at their end, and their windows between the two
// frontiers never fired.
func TestRepartitionScaleIn(t *testing.T) {
	parallel(t, 55*time.Second) // mostly waits for the stream
	stateFollowsPartitions(t, "at_least_once", "0s", true)
}

// TestRepartitionScaleInStandby is TestRepartitionScaleIn with standby
// replicas of the internal partitions' state.
func TestRepartitionScaleInStandby(t *testing.T) {
	parallel(t, 55*time.Second) // mostly waits for the stream
	stateFollowsPartitionsWith(t, "at_least_once", "0s", true, false, 1)
}

// TestStateFollowsPartitionsExactlyOnce is the same under exactly_once:
// every rebalance aborts the transactions open across it, and a
// read_committed reader must see each pane id once.
func TestStateFollowsPartitionsExactlyOnce(t *testing.T) {
	parallel(t, 50*time.Second) // mostly waits for the stream
	stateFollowsPartitions(t, "exactly_once", "", false)
}

func stateFollowsPartitions(t *testing.T, delivery, lateness string, repartition bool) {
	stateFollowsPartitionsWith(t, delivery, lateness, repartition, false, 0)
}

// TestStateFollowsPartitionsStandbyNoLateness is
// TestStateFollowsPartitionsNoLateness with state.standby_replicas 1: each
// instance also follows the changelogs of partitions other instances own,
// and a partition that moves to the instance keeping its standby restores
// only the changelog's tail (docs/OPERATIONS.md, Standby replicas).
func TestStateFollowsPartitionsStandbyNoLateness(t *testing.T) {
	parallel(t, 50*time.Second) // mostly waits for the stream
	stateFollowsPartitionsWith(t, "at_least_once", "0s", false, false, 1)
}

// TestStateFollowsPartitionsStandbyExactlyOnceNoLateness is the same under
// exactly_once.
func TestStateFollowsPartitionsStandbyExactlyOnceNoLateness(t *testing.T) {
	parallel(t, 50*time.Second) // mostly waits for the stream
	stateFollowsPartitionsWith(t, "exactly_once", "0s", false, false, 1)
}

// stateFollowsPartitionsWith is stateFollowsPartitions, with progress
// records checked (checkProgress) when progress is set, and standbys
// standby replicas per partition.
func stateFollowsPartitionsWith(t *testing.T, delivery, lateness string, repartition, progress bool, standbys int) {
	if os.Getenv("WINDOWD_KAFKA_BROKERS") == "" {
		t.Skip("needs a real broker (WINDOWD_KAFKA_BROKERS): windowd processes rebalancing one consumer group")
	}
	windowdBinary(t) // build before the clock matters
	began := time.Now()
	e := newRebalanceEnvWith(t, 8, delivery, lateness, repartition)
	if progress || standbys > 0 {
		e.progress, e.standbys = progress, standbys
		e.cfgPath = e.writeRebalanceConfig(e.stateDir)
	}
	names := map[*instance]string{}
	start := func(name string) *instance {
		inst := e.member(name).spawn(nil)
		names[inst] = name
		return inst
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for inst, name := range names {
			n := 0
			for _, l := range strings.Split(inst.stderr.String(), "\n") {
				if (strings.Contains(l, `"level":"warn"`) || strings.Contains(l, `"level":"error"`) || strings.Contains(l, "panic")) && n < 15 {
					t.Logf("instance %s: %s", name, l)
					n++
				}
			}
		}
	})
	var sp *steadyProducer
	phase := func(what string, live ...*instance) {
		t.Helper()
		n, et := sp.progress()
		held := ""
		for _, inst := range live {
			held += fmt.Sprintf(" %s=%v", names[inst], inst.heldPartitions())
		}
		if held != "" {
			held = "; partitions" + held
		}
		t.Logf("%6.1fs  %s: %d records produced (event time +%.1fs)%s",
			time.Since(began).Seconds(), what, n, float64(et-base)/1000, held)
	}
	assigned := func(insts ...*instance) (sum int, each []int) {
		for _, inst := range insts {
			v, _ := inst.metric(t, "windowd_assigned_partitions")
			sum += int(v)
			each = append(each, int(v))
		}
		return sum, each
	}
	// owners waits until the live instances hold every partition between
	// them, each at least one.
	owners := func(what string, live ...*instance) {
		t.Helper()
		waitFor(t, what, 60*time.Second, func() bool {
			sum, each := assigned(live...)
			for _, n := range each {
				if n == 0 {
					return false
				}
			}
			return sum == int(e.partitions)
		})
	}
	// caughtUp waits until every partition's current owner has processed the
	// records produced so far: its watermark covers them. (The frontier alone
	// would not show it: it never goes back, so a partition that arrives
	// behind does not lower it.)
	caughtUp := func(what string, live ...*instance) {
		t.Helper()
		_, et := sp.progress()
		target := float64(et - steadyDisorderMS - 2000) // watermark = max_ts - max_delay
		waitFor(t, what, 60*time.Second, func() bool {
			covered := map[int32]bool{}
			for _, inst := range live {
				for p, wm := range inst.partitionWatermarks() {
					lag := sp.lagOf(p)
					if e.repartition {
						// An internal partition's watermark is that
						// of the slowest input partition.
						lag = sp.lagOf(e.partitions - 1)
					}
					if wm >= target-float64(lag) {
						covered[p] = true
					}
				}
			}
			return len(covered) == int(e.partitions)
		})
	}
	// until lets the stream reach event time base+at (seconds), so that each
	// phase lasts a while: windows open, fire and (from about +33s, 30s of
	// lateness after their end) expire on the instances of every phase.
	until := func(at float64) {
		t.Helper()
		for {
			if _, et := sp.progress(); et >= base+int64(at*1000) {
				return
			}
			select {
			case <-sp.done:
				t.Fatal("the steady producer stopped")
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	sigterm := func(inst *instance) {
		t.Helper()
		if err := inst.signal(t, syscall.SIGTERM); err != nil {
			t.Fatalf("instance %s after SIGTERM: %v\n%s", names[inst], err, inst.stderr.String())
		}
	}

	// Phase 1: three instances share the partitions and process the stream.
	a, b, c := start("a"), start("b"), start("c")
	for _, inst := range []*instance{a, b, c} {
		inst.waitListening(t)
	}
	if lateness == "0s" {
		// Partition p's event time runs 3p seconds behind partition 0's: a
		// partition that moves to an instance without the slower ones
		// joins behind its frontier and must catch up on its own.
		sp = startProducerWith(t, e, 42, steadyDisorderMS, 0, laggingPartitions, steadyRecord)
	} else {
		sp = startSteadyProducer(t, e)
	}
	owners("three instances sharing the partitions", a, b, c)
	caughtUp("three instances processing", a, b, c)
	until(8)
	phase("three instances running", a, b, c)

	// Phase 2: kill -9 one instance mid-stream; its partitions move after
	// the session timeout, with their state as of its last checkpoint.
	aParts := a.heldPartitions()
	_ = a.signal(t, syscall.SIGKILL)
	phase(fmt.Sprintf("killed a (SIGKILL), which held %v", aParts))
	owners("b and c to take over a's partitions", b, c)
	caughtUp("b and c processing a's partitions", b, c)
	phase("b and c took over", b, c)
	until(20)

	// Phase 3: a fresh instance with an empty state dir joins.
	d := start("d")
	d.waitListening(t)
	owners("d to get partitions", b, c, d)
	caughtUp("b, c and d processing", b, c, d)
	phase("d (empty state dir) joined", b, c, d)
	until(34)

	// Phase 4: scale down to one instance, one SIGTERM at a time: c's
	// partitions move to b and d, then d's (some just restored from c's) to b.
	sigterm(c)
	owners("b and d to take over c's partitions", b, d)
	caughtUp("b and d processing", b, d)
	phase("stopped c (SIGTERM)", b, d)
	until(40)
	sigterm(d)
	owners("b to take over every partition", b)
	caughtUp("b processing every partition", b)
	phase("stopped d (SIGTERM): b alone", b)
	until(46)

	// End of the stream: one far-future record per partition moves every
	// partition's watermark past the end + allowed lateness of every data
	// window, so each fires its final pane. (Their own windows never close
	// in run; replay closes them at end of input: they are left out.)
	sp.halt()
	recs := sp.records()
	var flush []input
	for p := int32(0); p < e.partitions; p++ {
		k := fmt.Sprintf("flush-%d", p)
		flush = append(flush, input{partition: p, key: k, value: fmt.Sprintf(`{"user":%q,"ts":%d,"x":0}`, k, base+3600_000)})
	}
	produce(t, e.in, flush)
	recs = append(recs, flush...)
	e.waitCommitted(t, 60*time.Second)
	waitFor(t, "b's frontier at the flush records", 30*time.Second, func() bool {
		v, ok := b.metric(t, "windowd_frontier_ms")
		return ok && int64(v) >= base+3600_000-2000
	})
	phase("flushed; every input record committed", b)

	// What replay computes for the same records: window -> final aggregates.
	panes, errs := runReplay(t, &e.cfg.Pipelines[0], recs, int(e.partitions))
	if len(errs) > 0 {
		t.Fatalf("replay reported errors: %v", errs[:min(len(errs), 5)])
	}
	want := map[string]string{}
	for _, p := range panes {
		v := gjson.Parse(p)
		if strings.HasPrefix(v.Get("key").Str, "flush") || !v.Get("pane.final").Bool() {
			continue
		}
		want[windowID(v)] = v.Get("aggregates").Raw
	}
	if len(want) < 500 {
		t.Fatalf("test stream too small: replay has %d windows", len(want))
	}

	out := e.reader(e.out)
	finals := func() map[string]map[string]bool { // window -> distinct final pane values
		f := map[string]map[string]bool{}
		for _, r := range out.got {
			if r.headers["final"] == "true" && !strings.HasPrefix(r.key, "flush") {
				id := windowID(gjson.Parse(r.value))
				if f[id] == nil {
					f[id] = map[string]bool{}
				}
				f[id][r.value] = true
			}
		}
		return f
	}
	complete := func() bool {
		f := finals()
		for w := range want {
			if len(f[w]) == 0 {
				return false
			}
		}
		return true
	}
	// The commit cycles that committed the flush records waited for their
	// panes' acks: the output is complete now, up to reading it.
	for deadline := time.Now().Add(20 * time.Second); !complete() && time.Now().Before(deadline); {
		out.poll(200 * time.Millisecond)
	}
	out.poll(time.Second)
	if progress {
		pc := checkProgress(out.got, delivery == "exactly_once")
		reportProgress(t, pc, len(want))
		out.got = pc.panes
	}
	late := e.reader(e.late)
	late.poll(time.Second)

	var problems []string
	report := func(what string, examples []string) {
		if len(examples) == 0 {
			return
		}
		sort.Strings(examples)
		problems = append(problems, fmt.Sprintf("%d %s, e.g.\n  %s", len(examples), what, strings.Join(examples[:min(len(examples), 8)], "\n  ")))
	}
	// A pane emitted twice (the killed instance's last panes, recomputed by
	// the new owner) must repeat its pane id with identical content: a
	// consumer that drops duplicates by pane id keeps the first.
	byID := map[string]string{}
	var dupDiff []string
	dups := 0
	gotWindows := map[string]bool{}
	var extra []string
	for _, r := range out.got {
		if strings.HasPrefix(r.key, "flush") {
			continue
		}
		id := r.headers["pane_id"]
		if prev, ok := byID[id]; ok {
			dups++
			if prev != r.value {
				dupDiff = append(dupDiff, fmt.Sprintf("%s:\n    %s\n    %s", id, prev, r.value))
			}
		} else {
			byID[id] = r.value
		}
		w := windowID(gjson.Parse(r.value))
		if _, ok := want[w]; !ok && !gotWindows[w] {
			extra = append(extra, r.value)
		}
		gotWindows[w] = true
	}
	f := finals()
	var missing, wrong, several []string
	for w, agg := range want {
		switch vs := f[w]; {
		case len(vs) == 0:
			missing = append(missing, fmt.Sprintf("%s (replay: %s)", w, agg))
		case len(vs) > 1:
			var all []string
			for v := range vs {
				all = append(all, v)
			}
			sort.Strings(all)
			several = append(several, fmt.Sprintf("%s (replay: %s):\n    %s", w, agg, strings.Join(all, "\n    ")))
		default:
			for v := range vs {
				if got := gjson.Get(v, "aggregates").Raw; got != agg {
					wrong = append(wrong, fmt.Sprintf("%s: got %s, replay %s", w, got, agg))
				}
			}
		}
	}
	var lateRecs []string
	for _, r := range late.got {
		lateRecs = append(lateRecs, fmt.Sprintf("%s (%s)", r.value, r.headers["error"]))
	}
	report("windows without a final pane", missing)
	report("windows whose final pane differs from replay's", wrong)
	report("windows with more than one final pane", several)
	report("windows replay does not have", extra)
	report("pane ids emitted with different content", dupDiff)
	if delivery == "exactly_once" && dups > 0 {
		report("pane ids a read_committed reader saw more than once under exactly_once", []string{fmt.Sprintf("%d records", dups)})
	}
	report("records dropped as late (late topic)", lateRecs)
	t.Logf("%d input records, %d windows in replay; output: %d pane records, %d distinct pane ids, %d duplicates",
		len(recs), len(want), len(out.got), len(byID), dups)
	if len(problems) > 0 {
		t.Fatalf("output differs from replay after the partitions moved:\n%s", strings.Join(problems, "\n"))
	}
	if standbys > 0 {
		// d's partitions moved to b, the last instance, in phase 4: b kept
		// standbys of all of them (with two members, every partition of
		// the other).
		promoted, warm := 0, 0
		for inst := range names {
			for _, l := range strings.Split(inst.stderr.String(), "\n") {
				promoted += strings.Count(l, "standby promoted")
				if strings.Contains(l, "partition state restored from its standby replica") {
					warm++
				}
			}
		}
		t.Logf("%d standbys promoted, %d restored from them", promoted, warm)
		if warm == 0 {
			t.Fatal("no standby was promoted: the test did not exercise them")
		}
	}
	if err := b.stop(); err != nil {
		t.Fatalf("stop b: %v\n%s", err, b.stderr.String())
	}
	t.Logf("%.1fs in all", time.Since(began).Seconds())
}

// windowID is key/start/end of a pane.
func windowID(v gjson.Result) string {
	return fmt.Sprintf("%s/%d/%d", v.Get("key").Str, v.Get("window.start").Int(), v.Get("window.end").Int())
}
