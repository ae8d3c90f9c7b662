package integration

import (
	"bufio"
	"bytes"
	"container/heap"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/internal/syncbuf"
	"github.com/windowd/windowd/kafka"
	"github.com/windowd/windowd/replay"
	"github.com/windowd/windowd/service"
)

var brokers []string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		if err := setupParallel(); err != nil {
			fmt.Fprintln(os.Stderr, "integration:", err)
			return 2
		}
		if env := os.Getenv("WINDOWD_KAFKA_BROKERS"); env != "" {
			brokers = strings.Split(env, ",")
			fmt.Fprintf(os.Stderr, "integration: real broker %v\n", brokers)
		} else {
			c, err := kfake.NewCluster(kfake.NumBrokers(1))
			if err != nil {
				fmt.Fprintln(os.Stderr, "kfake:", err)
				return 1
			}
			defer c.Close()
			brokers = c.ListenAddrs()
			fmt.Fprintf(os.Stderr, "integration: in-process kfake broker %v (set WINDOWD_KAFKA_BROKERS for a real one)\n", brokers)
		}
		code := m.Run()
		if binDir != "" {
			os.RemoveAll(binDir)
		}
		return code
	}())
}

var nameRE = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// uniqueName returns a topic/group-safe name unique to this test run.
func uniqueName(t *testing.T, suffix string) string {
	return namePrefix(t) + strconv.FormatInt(time.Now().UnixNano()%1e10, 36) + "-" + suffix
}

// namePrefix is what every uniqueName of test t starts with.
func namePrefix(t *testing.T) string {
	return strings.ToLower(nameRE.ReplaceAllString(t.Name(), "-")) + "-"
}

func newClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, name string, partitions int32) {
	t.Helper()
	cl := newClient(t)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, -1, nil, name) // the brokers' default replication
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	// A topic is not served at once (least of all just after the broker
	// restarted, after the outage tests): wait for a leader of every
	// partition, or the first produce may fail with UNKNOWN_TOPIC_OR_PARTITION.
	lctx, lcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer lcancel()
	if err := kafka.WaitLeaders(lctx, cl, name, partitions); err != nil {
		t.Fatal(err)
	}
}

// addPartitions adds add partitions to topic and waits until the metadata
// shows all of them led: a broker answers CreatePartitions before its
// metadata has the new partitions, so a start right after would still read
// the old count.
func addPartitions(t *testing.T, topic string, add int) {
	t.Helper()
	n := partitionCount(t, topic)
	cl := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreatePartitions(ctx, add, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("adding %d partitions to %s: %v", add, topic, err)
	}
	if err := kafka.WaitLeaders(ctx, cl, topic, int32(n+add)); err != nil {
		t.Fatal(err)
	}
}

// partitionCount is topic's number of partitions.
func partitionCount(t *testing.T, topic string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tds, err := kadm.NewClient(newClient(t)).ListTopics(ctx, topic)
	if err == nil {
		err = tds.Error()
	}
	if err != nil {
		t.Fatalf("topic %s: %v", topic, err)
	}
	return len(tds[topic].Partitions)
}

// eachStateDir runs run twice, weighed as parallel: on the state
// directory the stopped run left (keepDir), and with it deleted, so that
// the state comes from the changelog alone (as on a pod without a volume;
// removeStateDir).
func eachStateDir(t *testing.T, weight time.Duration, run func(t *testing.T, keepDir bool)) {
	for _, keepDir := range []bool{true, false} {
		t.Run(map[bool]string{true: "same state dir", false: "state dir deleted"}[keepDir], func(t *testing.T) {
			parallel(t, weight)
			run(t, keepDir)
		})
	}
}

// removeStateDir deletes a stopped instance's state directory dir.
func removeStateDir(t *testing.T, dir string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
}

// input is one record of a test stream, produced to an explicit partition.
type input struct {
	partition int32
	key       string
	value     string
}

// produce writes records to topic in order, each to its partition, and waits for the acks.
func produce(t *testing.T, topic string, recs []input, opts ...kgo.Opt) {
	t.Helper()
	cl := newClient(t, append([]kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic)}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	krs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		krs[i] = &kgo.Record{Partition: r.partition, Key: []byte(r.key), Value: []byte(r.value)}
	}
	if err := cl.ProduceSync(ctx, krs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// replayLines renders records as a replay input (docs/SEMANTICS.md, Replay).
func replayLines(recs []input) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, `{"partition":%d,"key":%s,"value":%s}`+"\n", r.partition, strconv.Quote(r.key), strconv.Quote(r.value))
	}
	return b.String()
}

// runReplay replays recs through the pipeline and returns its pane lines and error-stream lines.
func runReplay(t *testing.T, p *config.Pipeline, recs []input, partitions int) (panes, errs []string) {
	t.Helper()
	return runReplayInput(t, p, replayLines(recs), partitions)
}

// runReplayInput replays input (replay lines) through the pipeline and
// returns its pane lines and error-stream lines.
func runReplayInput(t *testing.T, p *config.Pipeline, input string, partitions int) (panes, errs []string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if _, err := replay.Run(replay.Options{Pipeline: p, Input: strings.NewReader(input), Partitions: partitions,
		StateDir: filepath.Join(t.TempDir(), "replay"), Out: &out, Errs: &errOut}); err != nil {
		t.Fatalf("replay: %v", err)
	}
	return lines(out.String()), lines(errOut.String())
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// pipelineYAML is the test pipeline; placeholders are filled per test.
const pipelineYAML = `kafka:
  brokers: [%s]
  session_timeout: 6s
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
    watermark: {max_delay: 2s%s}
    window: {type: tumbling, size: 10s}
    allowed_lateness: 30s
    trigger:
      early: {count: 5}
      late: {every: 0s}
    aggregates:
      - {name: n, op: count}
      - {name: total, op: sum, field: x}
    output: {topic: %s}
    late_topic: %s
    dead_letter_topic: %s
    commit_interval: 200ms
`

// env is one test's topics, config and state directory.
type env struct {
	t           *testing.T
	in, out     string
	late, dlq   string
	group       string
	stateDir    string
	cfgPath     string
	cfg         *config.Config
	partitions  int32
	delivery    string // the pipeline's delivery (rebalanceYAML tests)
	lateness    string // the pipeline's allowed_lateness (rebalanceYAML tests); "": 30s
	repartition bool   // the pipeline has repartition: true (rebalanceYAML tests)
	progress    bool   // the pipeline writes progress records every 100ms (rebalanceYAML tests)
	standbys    int    // state.standby_replicas (rebalanceYAML tests)
	recordKey   bool   // the pipeline's key is the record key, not the user field (rebalanceYAML tests)
	window      string // the tumbling window's size (rebalanceYAML tests); "": 1s
}

func newEnv(t *testing.T, partitions int32, watermarkExtra string) *env {
	t.Helper()
	e := &env{t: t, in: uniqueName(t, "in"), out: uniqueName(t, "out"), late: uniqueName(t, "late"), dlq: uniqueName(t, "dlq"),
		group: uniqueName(t, "g"), stateDir: filepath.Join(t.TempDir(), "state"), partitions: partitions}
	createTopic(t, e.in, partitions)
	yaml := fmt.Sprintf(pipelineYAML, strings.Join(quoteAll(brokers), ", "), e.stateDir, e.in, e.group, watermarkExtra, e.out, e.late, e.dlq)
	e.cfgPath = filepath.Join(t.TempDir(), "windowd.yaml")
	if err := os.WriteFile(e.cfgPath, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	e.cfg = cfg
	return e
}

// editConfig replaces, once each, text of the test's configuration file
// (every old text must be there) and loads it again as e.cfg.
func (e *env) editConfig(edits map[string]string) {
	e.t.Helper()
	cfg := readFile(e.t, e.cfgPath)
	for old, repl := range edits {
		if !strings.Contains(cfg, old) {
			e.t.Fatalf("pipeline config has no %q", old)
		}
		cfg = strings.Replace(cfg, old, repl, 1)
	}
	writeFile(e.t, e.cfgPath, cfg)
	c, err := config.Load(e.cfgPath)
	if err != nil {
		e.t.Fatal(err)
	}
	e.cfg = c
}

// zeroLateness edits e's pipeline to allowed_lateness 0s without a late
// trigger (the tests that assert nothing is dropped as late) and, when
// delivery is not empty, to that delivery.
func (e *env) zeroLateness(delivery string) {
	edits := map[string]string{
		"    allowed_lateness: 30s\n": "    allowed_lateness: 0s\n",
		"      late: {every: 0s}\n":   "",
	}
	if delivery != "" {
		edits["    commit_interval: 200ms\n"] = "    commit_interval: 200ms\n    delivery: " + delivery + "\n"
	}
	e.editConfig(edits)
}

// instance is a running windowd: in-process (service.Run) or a child process.
type instance struct {
	httpAddr string
	stop     func() error // graceful stop; returns the run's error
	cmd      *exec.Cmd
	stderr   *syncbuf.Buffer
	exited   chan struct{} // child process: closed when it has exited
	exitErr  error         // child process: cmd.Wait's result, once exited
}

// signal sends sig to the child and waits (up to 40 s) for it to exit.
func (inst *instance) signal(t *testing.T, sig os.Signal) error {
	t.Helper()
	if err := inst.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inst.exited:
		return inst.exitErr
	case <-time.After(40 * time.Second):
		_ = inst.cmd.Process.Kill()
		<-inst.exited
		return fmt.Errorf("windowd did not exit within 40s of %v", sig)
	}
}

// goroutineDump stops a child windowd with SIGQUIT and returns the stacks
// of its goroutines that run windowd's code, franz-go's group management or
// its metadata loop: where a stuck process waits.
func (inst *instance) goroutineDump() string {
	_ = inst.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-inst.exited:
	case <-time.After(10 * time.Second):
	}
	out := inst.stderr.String()
	i := strings.Index(out, "\ngoroutine ")
	if i < 0 {
		return "(no goroutine dump)"
	}
	var ours []string
	for _, g := range strings.Split(out[i+1:], "\n\n") {
		// windowd's own, and franz-go's group management and metadata
		// loop (where a member that does not rejoin waits).
		if strings.Contains(g, "windowd/windowd/") || strings.Contains(g, "kgo.(*groupConsumer)") ||
			strings.Contains(g, "kgo.(*Client).updateMetadata") {
			ours = append(ours, g)
		}
	}
	return strings.Join(ours, "\n\n")
}

// startInProcess runs the service in this process until stop.
func (e *env) startInProcess() *instance {
	e.t.Helper()
	return e.startInProcessWith(service.Faults{})
}

// startInProcessWith is startInProcess with faults injected.
func (e *env) startInProcessWith(faults service.Faults) *instance {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan struct{})
	var runErr error
	go func() {
		runErr = service.Run(ctx, e.cfg, service.Options{Log: zap.NewNop(), Ready: func(a string) { addr <- a }, Faults: faults})
		close(done)
	}()
	inst := &instance{stop: func() error { cancel(); <-done; return runErr }}
	select {
	case a := <-addr:
		inst.httpAddr = a
	case <-done:
		e.t.Fatalf("service exited at start: %v", runErr)
	case <-time.After(30 * time.Second):
		e.t.Fatal("service did not start")
	}
	e.t.Cleanup(func() { cancel(); <-done })
	return inst
}

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// windowdBinary builds cmd/windowd once per test run, with the fault
// points of the windowd_faults tag (cmd/windowd/faults_on.go).
func windowdBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "windowd-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "windowd")
		out, err := exec.Command("go", "build", "-tags", "windowd_faults", "-o", binPath, "github.com/windowd/windowd/cmd/windowd").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

var httpAddrRE = regexp.MustCompile(`"http listening".*"addr":"([^"]+)"`)

// spawn runs windowd as a child process with extra arguments and
// environment variables; it returns at once, without waiting for the HTTP
// listener (a process that fails to connect may exit before the test looks).
func (e *env) spawn(env map[string]string, args ...string) *instance {
	e.t.Helper()
	cmd := exec.Command(windowdBinary(e.t), append([]string{"run", "--config", e.cfgPath}, args...)...)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	inst := &instance{cmd: cmd, stderr: &syncbuf.Buffer{}, exited: make(chan struct{})}
	cmd.Stderr = inst.stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { inst.exitErr = cmd.Wait(); close(inst.exited) }()
	inst.stop = func() error { return inst.signal(e.t, os.Interrupt) }
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-inst.exited
	})
	return inst
}

// logLevelArgs are spawn's arguments for WINDOWD_TEST_LOG_LEVEL, the log
// level of the windowd children of the broker-failure and outage tests
// (debug: franz-go's group and transaction steps too).
func logLevelArgs() []string {
	if l := os.Getenv("WINDOWD_TEST_LOG_LEVEL"); l != "" {
		return []string{"--log-level", l}
	}
	return nil
}

// waitListening waits for the child's HTTP address.
func (inst *instance) waitListening(t *testing.T) {
	t.Helper()
	waitFor(t, "windowd's http listener", 30*time.Second, func() bool {
		select {
		case <-inst.exited:
			t.Fatalf("windowd exited: %v\n%s", inst.exitErr, inst.stderr.String())
		default:
		}
		if m := httpAddrRE.FindStringSubmatch(inst.stderr.String()); m != nil {
			inst.httpAddr = m[1]
			return true
		}
		return false
	})
}

// startProcess runs windowd as a child process with the env's config and
// waits for its HTTP listener.
func (e *env) startProcess() *instance {
	e.t.Helper()
	inst := e.spawn(nil)
	inst.waitListening(e.t)
	return inst
}

// metric returns the sum of the samples of a metric whose labels contain every given label pair.
func (inst *instance) metric(t *testing.T, name string, labels ...string) (float64, bool) {
	t.Helper()
	resp, err := http.Get("http://" + inst.httpAddr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sum, found := 0.0, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		ok := true
		for i := 0; i+1 < len(labels); i += 2 {
			if !strings.Contains(line, labels[i]+`="`+labels[i+1]+`"`) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			sum += v
			found = true
		}
	}
	return sum, found
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", timeout, what)
}

// expectNothingLate fails the test when inst dropped a record as late
// (its metric) or the late topic holds one.
func (e *env) expectNothingLate(inst *instance) {
	e.t.Helper()
	if v, _ := inst.metric(e.t, "windowd_late_dropped_total"); v != 0 {
		e.t.Fatalf("windowd_late_dropped_total = %v, want 0", v)
	}
	late := e.reader(e.late)
	late.poll(time.Second)
	if len(late.got) != 0 {
		e.t.Fatalf("%d records dropped as late, e.g. %s", len(late.got), late.got[0].value)
	}
}

// waitRecordsIn waits until the instance has consumed n input records.
func (inst *instance) waitRecordsIn(t *testing.T, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d records consumed", n), 60*time.Second, func() bool {
		v, _ := inst.metric(t, "windowd_records_in_total")
		return int(v) >= n
	})
}

// outRecord is one record read from an output, late or dead-letter topic.
type outRecord struct {
	key, value string
	headers    map[string]string
	partition  int32
	codec      int8 // its batch's compression: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd
}

// topicReader reads a topic from the start, across calls.
type topicReader struct {
	cl  *kgo.Client
	got []outRecord
}

func (e *env) reader(topic string) *topicReader {
	return &topicReader{cl: newClient(e.t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))}
}

// poll reads whatever is available within d.
func (r *topicReader) poll(d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for ctx.Err() == nil {
		fs := r.cl.PollFetches(ctx)
		fs.EachRecord(func(rec *kgo.Record) {
			h := map[string]string{}
			for _, kv := range rec.Headers {
				h[kv.Key] = string(kv.Value)
			}
			r.got = append(r.got, outRecord{key: string(rec.Key), value: string(rec.Value), headers: h, partition: rec.Partition,
				codec: int8(rec.Attrs.CompressionType())})
		})
	}
}

// readUntil polls until cond holds on what was read, or fails after timeout.
func (r *topicReader) readUntil(t *testing.T, what string, timeout time.Duration, cond func([]outRecord) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond(r.got) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (read %d records)", timeout, what, len(r.got))
		}
		r.poll(200 * time.Millisecond)
	}
}

func values(recs []outRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.value
	}
	return out
}

func sorted(s []string) []string {
	c := append([]string(nil), s...)
	sort.Strings(c)
	return c
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Parallelism. Most tests here own their topics and group (uniqueName) and
// spend their time waiting on a real-time stream, session timeouts and
// rebalances, not on the CPU: they run in parallel (parallel below). Tests
// that must not overlap with any other stay sequential; go test runs every
// sequential top-level test before it releases the parallel ones, so they
// never share the broker with them:
//
//   - TestBrokerOutage, TestBrokerOutageExactlyOnce stop and restart the broker;
//   - TestDiskFull (left as it was);
//   - TestMalformedAmongGood measures the test process's heap and is CPU-bound;
//   - the security tests that set environment variables (t.Setenv).
//
// The parallel tests are admitted by the suite's own limiter rather than by
// go test's -parallel: longest expected first (so that a 100 s test does not
// start last and stretch the run), at most parallelSlots at a time. The
// default, 6, suits the 2-core CI machine, with or without -race (the
// windowd processes are not built with it): the parallel tests spend their
// time waiting on the stream, sessions and rebalances, each took as long
// beside five others as alone, and the longest ones (the crash loops and
// the five state-follows-partitions runs, 50-75 s) bound the parallel phase
// anyway. -parallel N, when given, or WINDOWD_TEST_PARALLEL sets the slots
// instead. A test whose figures the load bends (parallelAlone: a peak
// compared between two runs) runs alone: behind the tests waiting when it
// queues, and with none beside it.

// parallelSlots is how many parallel tests run at once.
var parallelSlots = 6

func setupParallel() error {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if explicit {
		n, err := strconv.Atoi(flag.Lookup("test.parallel").Value.String())
		if err != nil {
			return err
		}
		parallelSlots = n
	} else if s := os.Getenv("WINDOWD_TEST_PARALLEL"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return fmt.Errorf("WINDOWD_TEST_PARALLEL: %q", s)
		}
		parallelSlots = n
	}
	parallelSlots = max(parallelSlots, 1)
	// go test's own limit must not get in the way of this one (a test
	// waiting for a slot here would hold one of go test's).
	return flag.Set("test.parallel", "1000")
}

// limiter admits waiting parallel tests, longest expected first.
var limiter struct {
	mu      sync.Mutex
	running int
	waiting waitHeap
	settle  *time.Timer // the first admissions wait for every test to queue
	settled bool
	// lastAdmit, spacing: admissions come admitSpacing apart, so that the
	// first tests do not all create their topics and start their windowd
	// processes in the same instant (a burst of topic creations slows the
	// broker's; windowd then met UNKNOWN_TOPIC_OR_PARTITION producing to
	// its own just-created repartition topic, and exited)
	lastAdmit time.Time
	spacing   bool // a timer will admit the next one
	alone     bool // a test that runs alone runs
}

const admitSpacing = 500 * time.Millisecond

type waiter struct {
	expect time.Duration
	seq    int
	alone  bool // parallelAlone: runs when no other test does
	admit  chan struct{}
}

type waitHeap []*waiter

func (h waitHeap) Len() int { return len(h) }
func (h waitHeap) Less(i, j int) bool {
	if h[i].alone != h[j].alone {
		return h[j].alone // the tests that run alone come last
	}
	if h[i].expect != h[j].expect {
		return h[i].expect > h[j].expect
	}
	return h[i].seq < h[j].seq
}
func (h waitHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *waitHeap) Push(x any)   { *h = append(*h, x.(*waiter)) }
func (h *waitHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	*h = old[:len(old)-1]
	return w
}

var waiterSeq int

// admitLocked starts waiting tests while slots are free.
func admitLocked() {
	for limiter.settled && limiter.running < parallelSlots && limiter.waiting.Len() > 0 && !limiter.alone {
		if limiter.waiting[0].alone && limiter.running > 0 {
			return // it waits for the others to end
		}
		if wait := time.Until(limiter.lastAdmit.Add(admitSpacing)); wait > 0 {
			if !limiter.spacing {
				limiter.spacing = true
				time.AfterFunc(wait, func() {
					limiter.mu.Lock()
					limiter.spacing = false
					admitLocked()
					limiter.mu.Unlock()
				})
			}
			return
		}
		limiter.lastAdmit = time.Now()
		w := heap.Pop(&limiter.waiting).(*waiter)
		limiter.running++
		limiter.alone = w.alone
		close(w.admit)
	}
}

// parallel marks t (a top-level test) parallel and waits until the limiter
// admits it; expect is its usual duration against the real broker, which
// orders the admissions. Its subtests may call t.Parallel themselves: they
// run within the parent's slot.
func parallel(t *testing.T, expect time.Duration) {
	t.Helper()
	queue(t, &waiter{expect: expect, admit: make(chan struct{})})
}

// parallelAlone is parallel for a test whose figures load bends (peaks
// compared between two runs): it is admitted after the tests waiting with
// it, once none runs, and none is admitted while it runs.
func parallelAlone(t *testing.T, expect time.Duration) {
	t.Helper()
	queue(t, &waiter{expect: expect, alone: true, admit: make(chan struct{})})
}

func queue(t *testing.T, w *waiter) {
	t.Helper()
	t.Parallel()
	limiter.mu.Lock()
	waiterSeq++
	w.seq = waiterSeq
	heap.Push(&limiter.waiting, w)
	if limiter.settle == nil {
		// go test releases every parallel test at once: let them all
		// queue before the first is admitted.
		limiter.settle = time.AfterFunc(200*time.Millisecond, func() {
			limiter.mu.Lock()
			limiter.settled = true
			admitLocked()
			limiter.mu.Unlock()
		})
	}
	admitLocked()
	limiter.mu.Unlock()
	queued := time.Now()
	<-w.admit
	admitted := time.Now()
	t.Cleanup(func() {
		t.Logf("parallel: ran %.1fs, after %.1fs waiting for one of %d slots", time.Since(admitted).Seconds(), admitted.Sub(queued).Seconds(), parallelSlots)
		limiter.mu.Lock()
		limiter.running--
		if w.alone {
			limiter.alone = false
		}
		admitLocked()
		limiter.mu.Unlock()
	})
}

// waitGroupEmpty waits until the consumer group has no member left (a
// killed member's session has expired).
func (e *env) waitGroupEmpty(t *testing.T, timeout time.Duration) {
	t.Helper()
	adm := kadm.NewClient(newClient(t))
	waitFor(t, "the group to have no member", timeout, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		described, err := adm.DescribeGroups(ctx, e.group)
		if err != nil {
			return false
		}
		g, ok := described[e.group]
		return ok && g.Err == nil && len(g.Members) == 0
	})
}
