package integration

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/windowd/windowd/kafka"
)

// The broker-failure tests run on scripts/kafka-cluster.sh's three nodes
// (replication 3, min.insync.replicas 2, the internal topics too, which
// have Kafka's 50 partitions: the group and transaction coordinators of
// the pipelines are spread over the nodes, and killing each node in turn
// moves every one of them).
// They need WINDOWD_KAFKA_CLUSTER (the nodes' bootstrap list) and
// WINDOWD_KAFKA_CLUSTER_CTL (the path of scripts/kafka-cluster.sh); CI
// sets both.
//
// Like the one-broker outage tests they are sequential (no t.Parallel):
// go test runs every sequential top-level test before it releases the
// parallel ones, so the package's brokers may point at the cluster while
// one runs.

const (
	// clusterSession is the pipelines' kafka.session_timeout (the
	// issue's cluster ran 10 s).
	clusterSession = 10 * time.Second
	// maxStall is the bound on the longest time a partition's
	// committed offset stands still while its input grows: the session
	// timeout (a member the dead coordinator knew must be seen again)
	// plus 10 s (leader election, the coordinator's move, a rejoin).
	maxStall = clusterSession + 10*time.Second
	// brokerDown is how long a killed node stays down: longer than
	// maxStall, so that a pipeline that waits for the node fails.
	brokerDown = 25 * time.Second
)

// onCluster points the package's brokers at the three-node cluster for
// the rest of the test and returns the cluster script's runner.
func onCluster(t *testing.T) func(args ...string) {
	t.Helper()
	list, ctl := os.Getenv("WINDOWD_KAFKA_CLUSTER"), os.Getenv("WINDOWD_KAFKA_CLUSTER_CTL")
	if list == "" || ctl == "" {
		t.Skip("needs the three-node cluster of scripts/kafka-cluster.sh (WINDOWD_KAFKA_CLUSTER, WINDOWD_KAFKA_CLUSTER_CTL)")
	}
	if raceEnabled {
		t.Skip("the broker-failure tests run in real time against three brokers: not under the race detector on two cores")
	}
	old := brokers
	brokers = strings.Split(list, ",")
	t.Cleanup(func() { brokers = old })
	run := func(args ...string) {
		t.Helper()
		out, err := exec.Command("bash", append([]string{ctl}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kafka-cluster.sh %v: %v\n%s", args, err, out)
		}
	}
	// Never leave a node down for the tests after this one.
	t.Cleanup(func() {
		for n := 1; n <= 3; n++ {
			run("start-node", fmt.Sprint(n))
		}
	})
	return run
}

// stallMeter polls a group's committed offsets every 100 ms and keeps, per
// input partition, the longest time its offset stood still while the
// partition had records past it: a stall of the pipeline (a failed read
// of the offsets counts as standing still).
type stallMeter struct {
	e      *env
	adm    *kadm.Client
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	last   map[int32]int64
	since  map[int32]time.Time
	worst  time.Duration
	worstP int32
	at     time.Time // when the worst stall ended (or was last seen)
}

func newStallMeter(t *testing.T, e *env) *stallMeter {
	// The meter finds a moved coordinator or leader as fast as windowd
	// does: with franz-go's defaults (metadata at most every 5 s, backoffs
	// up to 5 s) its own lag would count as a stall.
	m := &stallMeter{e: e, adm: kadm.NewClient(newClient(t, kafka.FailoverOpts()...)), stop: make(chan struct{}), done: make(chan struct{}),
		last: map[int32]int64{}, since: map[int32]time.Time{}}
	go m.run()
	t.Cleanup(m.halt)
	return m
}

func (m *stallMeter) run() {
	defer close(m.done)
	tk := time.NewTicker(100 * time.Millisecond)
	defer tk.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-tk.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ends, eerr := m.adm.ListEndOffsets(ctx, m.e.in)
		committed, cerr := m.adm.FetchOffsets(ctx, m.e.group)
		cancel()
		now := time.Now()
		m.mu.Lock()
		for p := int32(0); p < m.e.partitions; p++ {
			if _, ok := m.since[p]; !ok {
				m.since[p] = now
			}
			if eerr == nil && cerr == nil {
				c, ok := committed.Lookup(m.e.in, p)
				end, eok := ends.Lookup(m.e.in, p)
				if ok && c.At > m.last[p] || eok && ok && c.At >= end.Offset {
					// Moved, or nothing left to commit: no stall.
					m.last[p] = max(m.last[p], c.At)
					m.since[p] = now
					continue
				}
			}
			if d := now.Sub(m.since[p]); d > m.worst {
				m.worst, m.worstP, m.at = d, p, now
			}
		}
		m.mu.Unlock()
	}
}

func (m *stallMeter) halt() {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	<-m.done
}

// restart starts every partition's stall clock again now, keeping the
// longest stall seen so far (forget: dropping it too).
func (m *stallMeter) restart(forget bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for p := range m.since {
		m.since[p] = now
	}
	if forget {
		m.worst = 0
	}
}

func (m *stallMeter) longest() (time.Duration, int32, time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.worst, m.worstP, m.at
}

// clusterPipeline is one delivery mode's pipeline in a broker-failure
// test: two windowd processes of one group, the lockstep stream, and the
// stall meter on the group's offsets.
type clusterPipeline struct {
	de *deliveryEnv
	sp *steadyProducer
	// clicks and cp (newClusterInputsPipeline): the second input topic
	// and its stream; de's topic is the first.
	clicks *env
	cp     *steadyProducer
	insts  map[string]*instance
	envs   map[string]*env
	meter  *stallMeter
	names  map[*instance]string
}

func newClusterPipeline(t *testing.T, delivery string) *clusterPipeline {
	de := newDeliveryEnvWith(t, 8, delivery, clusterSession.String(), "0s")
	cp := &clusterPipeline{de: de, insts: map[string]*instance{}, envs: map[string]*env{}, names: map[*instance]string{}}
	logTroubles(t, cp.names)
	cp.sp = startLockstepProducer(t, de.env)
	for _, name := range []string{"a", "b"} {
		cp.envs[name] = de.instanceEnv(name)
		cp.start(t, name)
	}
	cp.meter = newStallMeter(t, de.env)
	return cp
}

// newClusterInputsPipeline is a pipeline over two input topics of 4
// partitions each (inputsYAML: repartition: true, allowed_lateness 0s),
// two windowd processes, a stream on each topic, the stall meter on the
// first topic's offsets (stage 1's group).
func newClusterInputsPipeline(t *testing.T, delivery string) *clusterPipeline {
	ie := newInputsEnv(t, delivery, 4, 4, func(y string) string {
		return strings.Replace(y, "session_timeout: 6s", "session_timeout: "+clusterSession.String(), 1)
	})
	views, clicks := ie.views, ie.clicks
	cp := &clusterPipeline{de: &deliveryEnv{env: views, session: clusterSession.String()}, clicks: clicks,
		insts: map[string]*instance{}, envs: map[string]*env{}, names: map[*instance]string{}}
	logTroubles(t, cp.names)
	record := func(kind string) func(rng *rand.Rand, p int32, n int, ts int64) input {
		return func(rng *rand.Rand, p int32, n int, ts int64) input {
			u := fmt.Sprintf("u%d", rng.Intn(40))
			return input{partition: p, key: fmt.Sprintf("%s%d", kind, n), value: fmt.Sprintf(`{"user":%q,"ts":%d,"x":%d}`, u, ts, rng.Intn(100))}
		}
	}
	cp.sp = startProducer(t, views, 5353, record("v"))
	cp.cp = startProducer(t, clicks, 5454, record("c"))
	for _, name := range []string{"a", "b"} {
		cp.envs[name] = ie.member(name)
		cp.start(t, name)
	}
	cp.meter = newStallMeter(t, views)
	return cp
}

func (cp *clusterPipeline) start(t *testing.T, name string) {
	inst := cp.envs[name].spawn(nil, logLevelArgs()...)
	inst.waitListening(t)
	cp.insts[name] = inst
	cp.names[inst] = fmt.Sprintf("%s/%s-%d", cp.de.delivery, name, len(cp.names))
}

// alive fails the test when a windowd process exited on its own.
func (cp *clusterPipeline) alive(t *testing.T) {
	t.Helper()
	for name, inst := range cp.insts {
		if !inst.running() {
			t.Fatalf("%s: windowd %s exited on its own: %v\n%s", cp.de.delivery, name, inst.exitErr, stderrTail(inst, 30))
		}
	}
}

// finish drains the stream and checks the output against replay: every
// window's one final pane equal to replay's, no duplicate under
// exactly_once, nothing late.
func (cp *clusterPipeline) finish(t *testing.T) {
	t.Helper()
	e := cp.de.env
	recs := cp.sp.finish(e)
	var res *deliveryResult
	var want map[string]string
	if cp.clicks == nil {
		res, want = checkReplayFinals(t, e, recs, 60*time.Second, cp.de.delivery == "exactly_once")
	} else {
		crecs := cp.cp.finish(cp.clicks)
		want = replayInputs(t, &e.cfg.Pipelines[0], map[string][]input{e.in: recs, cp.clicks.in: crecs}, int(e.partitions))
		out := e.reader(e.out)
		readFinals(out, want, 60*time.Second)
		late := e.reader(e.late)
		late.poll(time.Second)
		res = checkDelivery(e, want, out.got, late.got, cp.de.delivery == "exactly_once")
		recs = append(recs, crecs...)
	}
	if len(want) < 300 {
		t.Fatalf("test stream too small: replay has %d windows", len(want))
	}
	for name, inst := range cp.insts {
		if v, _ := inst.metric(t, "windowd_late_dropped_total"); v != 0 {
			res.problems = append(res.problems, fmt.Sprintf("instance %s counted %.0f records dropped as late", name, v))
		}
	}
	t.Logf("%s: %d input records, %d windows; output (read_committed): %d pane records, %d distinct pane ids, %d duplicates",
		cp.de.delivery, len(recs), len(want), res.records, res.distinct, res.dups)
	if len(res.problems) > 0 {
		t.Fatalf("%s output differs from replay:\n%s", cp.de.delivery, strings.Join(res.problems, "\n"))
	}
}

// coordinator names the node that coordinates group (for the log).
func coordinator(t *testing.T, group string) string {
	adm := kadm.NewClient(newClient(t))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp := adm.FindGroupCoordinators(ctx, group)
	for _, c := range resp {
		if c.Err != nil {
			return "unknown (" + c.Err.Error() + ")"
		}
		return fmt.Sprint("node ", c.NodeID)
	}
	return "unknown"
}

// TestBrokerFailures (issue: a broker restart must not stop the pipeline):
// on the three-node cluster, an at_least_once and an exactly_once
// pipeline, two windowd processes each, allowed_lateness 0s, run a
// lockstep stream while each node in turn is killed with SIGKILL, stays
// down for brokerDown and starts again; while the second node is down,
// one windowd process of each pipeline is killed (kill -9) and started
// again; then the nodes restart one by one (SIGTERM, start, next: a
// rolling restart). No input partition's committed offset may stand
// still for longer than maxStall while it has records to commit (a stall
// that outlasts the windowd kill is measured from the kill: that member's
// partitions wait for its session to time out, as without a broker
// failure), and
// every window must end with exactly one final pane equal to replay's
// (no duplicate pane under exactly_once, nothing late).
func TestBrokerFailures(t *testing.T) {
	cluster := onCluster(t)
	windowdBinary(t)
	brokerFailures(t, cluster, newClusterPipeline(t, "at_least_once"), newClusterPipeline(t, "exactly_once"))
}

// TestBrokerFailuresInputs is TestBrokerFailures for an exactly_once
// pipeline over two input topics (repartition: true): both stages, the
// internal topic and both inputs' offsets through each node's failure.
func TestBrokerFailuresInputs(t *testing.T) {
	cluster := onCluster(t)
	windowdBinary(t)
	brokerFailures(t, cluster, newClusterInputsPipeline(t, "exactly_once"))
}

// brokerFailures runs the schedule of TestBrokerFailures on pipes.
func brokerFailures(t *testing.T, cluster func(args ...string), pipes ...*clusterPipeline) {
	began := time.Now()
	coordinators := func() string {
		var cs []string
		for _, cp := range pipes {
			cs = append(cs, cp.de.delivery+" "+coordinator(t, cp.de.group))
		}
		return "group coordinators: " + strings.Join(cs, ", ")
	}
	adm := kadm.NewClient(newClient(t))
	waitFor(t, "every pipeline to commit", 90*time.Second, func() bool {
		for _, cp := range pipes {
			cp.alive(t)
			if cp.de.committedPartitions(adm) < int(cp.de.partitions) {
				return false
			}
		}
		return true
	})
	for _, cp := range pipes {
		cp.meter.restart(true) // the start-up is no stall
	}
	steps := []string{}
	step := func(what string) {
		steps = append(steps, fmt.Sprintf("%6.1fs %s", time.Since(began).Seconds(), what))
	}
	sleep := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			for _, cp := range pipes {
				cp.alive(t)
			}
		}
	}
	for n := 1; n <= 3; n++ {
		step(fmt.Sprintf("kill -9 node %d (%s)", n, coordinators()))
		cluster("kill", fmt.Sprint(n))
		if n == 2 {
			sleep(5 * time.Second)
			step("kill -9 windowd a of each pipeline")
			for _, cp := range pipes {
				inst := cp.insts["a"]
				delete(cp.insts, "a")
				_ = inst.signal(t, syscall.SIGKILL)
				// A second failure: its partitions stall for its own
				// session timeout, rebalance and restore, bounded
				// from here (the stalls before stay measured).
				cp.meter.restart(false)
			}
			sleep(3 * time.Second)
			step("start windowd a of each pipeline")
			for _, cp := range pipes {
				cp.start(t, "a")
			}
			sleep(brokerDown - 8*time.Second)
		} else {
			sleep(brokerDown)
		}
		step(fmt.Sprintf("start node %d", n))
		cluster("start-node", fmt.Sprint(n))
		sleep(10 * time.Second)
	}
	for n := 1; n <= 3; n++ {
		step(fmt.Sprintf("rolling restart: stop node %d (%s)", n, coordinators()))
		cluster("stop-node", fmt.Sprint(n))
		cluster("start-node", fmt.Sprint(n))
		step(fmt.Sprintf("rolling restart: node %d answers", n))
		sleep(8 * time.Second)
	}
	step("done")
	t.Logf("steps:\n%s", strings.Join(steps, "\n"))
	var stalls []string
	failed := false
	for _, cp := range pipes {
		cp.meter.halt()
		d, p, at := cp.meter.longest()
		stalls = append(stalls, fmt.Sprintf("%s: longest stall %.1fs (partition %d, ended or seen at %.1fs)", cp.de.delivery, d.Seconds(), p, at.Sub(began).Seconds()))
		failed = failed || d > maxStall
	}
	sort.Strings(stalls)
	t.Logf("%s", strings.Join(stalls, "\n"))
	// What the members went through. A member usually keeps its
	// partitions through a coordinator's move; when franz-go gives up a
	// heartbeat first, it loses them, keeps their state and gets them
	// back (TestLostPartitionsKeepState), within the stall bound above.
	for _, cp := range pipes {
		for inst, name := range cp.names {
			log := inst.stderr.String()
			t.Logf("%s: %d transactions aborted, %d losses of partitions (state kept %d times), %d restores from scratch", name,
				strings.Count(log, `"msg":"transaction aborted`), strings.Count(log, `"msg":"partitions lost"`),
				strings.Count(log, "keeping the state of lost partitions"), strings.Count(log, `"from_scratch":true`))
		}
	}
	for _, cp := range pipes {
		cp.finish(t)
	}
	if failed {
		t.Fatalf("a pipeline stood still for longer than session_timeout + 10s = %s:\n%s", maxStall, strings.Join(stalls, "\n"))
	}
}
