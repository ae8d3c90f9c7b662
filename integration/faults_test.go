package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/internal/brokerlock"
	"github.com/windowd/windowd/service"
)

// committedOffsets returns the group's committed offset per input partition.
func (e *env) committedOffsets(t *testing.T) map[int32]int64 {
	t.Helper()
	adm := kadm.NewClient(newClient(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := adm.FetchOffsets(ctx, e.group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == e.in {
			out[o.Partition] = o.At
		}
	})
	return out
}

// committedPartitions is how many input partitions have a committed
// offset; 0 while the group's coordinator cannot answer (a fresh broker
// answers COORDINATOR_NOT_AVAILABLE until it has created
// __consumer_offsets), where committedOffsets would fail the test.
func (e *env) committedPartitions(adm *kadm.Client) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	offs, err := adm.FetchOffsets(ctx, e.group)
	if err != nil {
		return 0
	}
	n := 0
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == e.in && o.Err == nil && o.At > 0 {
			n++
		}
	})
	return n
}

// TestDiskFull: when the state directory's disk fills up, windowd stops
// committing offsets and exits non-zero with a clear log line; after the
// fault is gone a restart loses nothing. The full disk is Pebble's errorfs
// under the state (WINDOWD_FAULT_DISK_FULL of the test build,
// cmd/windowd/faults_on.go): every write fails with ENOSPC while the
// trigger file exists. No root, no tmpfs.
func TestDiskFull(t *testing.T) {
	e := newEnv(t, 2, "")
	full := filepath.Join(t.TempDir(), "disk-full")
	faults := map[string]string{"WINDOWD_FAULT_DISK_FULL": full}

	s := newStream(5, 2, 400)
	s.phases[1] = nil // records within the bound only: the re-run is deterministic
	want, _, _ := expectedPanes(t, e, s)

	a := e.spawn(faults)
	a.waitListening(t)
	produce(t, e.in, s.phases[0])
	a.waitRecordsIn(t, len(s.phases[0]))
	e.waitCommitted(t, 30*time.Second)
	before := e.committedOffsets(t)

	// The disk fills, then more records come.
	writeFile(t, full, "")
	produce(t, e.in, s.phases[2])
	select {
	case <-a.exited:
	case <-time.After(90 * time.Second):
		t.Fatalf("windowd kept running on a full disk:\n%s", a.stderr.String())
	}
	if a.exitErr == nil {
		t.Fatalf("windowd exited 0 on a full disk:\n%s", a.stderr.String())
	}
	logs := a.stderr.String()
	if !strings.Contains(logs, "no space left on device") || !strings.Contains(logs, `"msg":"pipeline stopped`) || strings.Contains(logs, "panic") {
		t.Fatalf("no clear log line about the disk:\n%s", logs)
	}
	if after := e.committedOffsets(t); fmt.Sprint(after) != fmt.Sprint(before) {
		// Every write failed from the moment the disk filled: no cycle
		// after it could sync its checkpoint, so none may commit.
		t.Fatalf("offsets committed on a full disk: %v before, %v at exit", before, after)
	}

	// The fault goes away: a restart loses nothing.
	if err := os.Remove(full); err != nil {
		t.Fatal(err)
	}
	b := e.spawn(faults)
	b.waitListening(t)
	e.waitCommitted(t, 60*time.Second)
	checkAgainstReplay(t, e, want)
	if err := b.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// TestMalformedAmongGood: 1% malformed records mixed into good ones (1M
// against a real broker, 100k in-process): every malformed one is in the
// dead-letter topic with a reason, every good one is counted, memory stays
// flat.
// Sequential: the heap it measures is the whole test process's.
func TestMalformedAmongGood(t *testing.T) {
	total := 100_000
	if os.Getenv("WINDOWD_KAFKA_BROKERS") != "" {
		total = 1_000_000
	}
	bad := total / 100
	e := newEnv(t, 4, "")
	inst := e.startInProcess()

	cl := newClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(e.in),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(200_000))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	perPart := make([]int64, 4)
	for i := 0; i < total; i++ {
		p := int32(i % 4)
		var v string
		if i%100 == 50 {
			v = fmt.Sprintf(`{"user":"u%d","ts":`, p) // malformed
		} else {
			// one key per partition; event time 1 ms a record per partition: in order
			v = fmt.Sprintf(`{"user":"u%d","ts":%d,"x":1}`, p, base+perPart[p])
			perPart[p]++
		}
		cl.Produce(ctx, &kgo.Record{Partition: p, Key: []byte(fmt.Sprintf("u%d", p)), Value: []byte(v)}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	// A flush record per partition closes every window.
	for p := int32(0); p < 4; p++ {
		cl.Produce(ctx, &kgo.Record{Partition: p, Key: []byte("flush"), Value: []byte(fmt.Sprintf(`{"user":"flush","ts":%d,"x":0}`, base+3600_000))}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	var peakHeap uint64
	waitFor(t, "every record consumed", 4*time.Minute, func() bool {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peakHeap = max(peakHeap, ms.HeapInuse)
		v, _ := inst.metric(t, "windowd_records_in_total")
		return int(v) >= total+4
	})
	if v, _ := inst.metric(t, "windowd_dead_letters_total"); int(v) != bad {
		t.Fatalf("windowd_dead_letters_total = %v, want %d", v, bad)
	}
	dlq := e.reader(e.dlq)
	dlq.readUntil(t, "every dead letter", 2*time.Minute, func(got []outRecord) bool { return len(got) >= bad })
	for _, r := range dlq.got {
		if r.headers["error"] != "value is not valid JSON" {
			t.Fatalf("dead letter reason %q", r.headers["error"])
		}
	}
	// Every good record is counted in exactly one final pane.
	out := e.reader(e.out)
	counted := 0
	out.readUntil(t, "final panes counting every good record", 2*time.Minute, func(got []outRecord) bool {
		counted = 0
		for _, r := range got {
			if r.headers["final"] == "true" && !strings.HasPrefix(r.key, "flush") {
				var n int
				if _, err := fmt.Sscanf(r.value[strings.Index(r.value, `"n":`)+4:], "%d", &n); err == nil {
					counted += n
				}
			}
		}
		return counted >= total-bad
	})
	if counted != total-bad {
		t.Fatalf("final panes count %d records, want %d", counted, total-bad)
	}
	t.Logf("%d records (%d malformed): peak Go heap in use %d MiB during processing", total, bad, peakHeap>>20)
	if peakHeap > 512<<20 {
		t.Fatalf("heap grew to %d MiB", peakHeap>>20)
	}
	if err := inst.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestBrokerOutage: the real broker stops for 30 s mid-stream and starts
// again (same data). windowd keeps running, reports not ready, resumes, and
// the output is complete and correct. Needs WINDOWD_KAFKA_CTL, the path of
// scripts/kafka-local.sh that started the broker (CI sets it).
//
// The outage tests stay sequential (no t.Parallel, no parallel): go test
// runs every sequential top-level test before it releases the parallel
// ones, so no other test is running while the broker is down.
func TestBrokerOutage(t *testing.T) { brokerOutage(t, "") }

// TestBrokerOutageExactlyOnce: the same under exactly_once. The outage
// outlives the 10 s transaction timeout: the broker aborts the open
// transaction when it is back and fences its producer epoch, and windowd
// rebuilds the pipeline and rejoins (it exited with status 1 before);
// read_committed, the output is still replay's. What it cannot outlive is
// a transaction the broker itself left hanging (its coordinator ended it,
// its markers never reached the partitions: txnState); then it skips,
// naming the partitions, rather than blame windowd.
func TestBrokerOutageExactlyOnce(t *testing.T) { brokerOutage(t, "exactly_once") }

func brokerOutage(t *testing.T, delivery string) {
	ctl := os.Getenv("WINDOWD_KAFKA_CTL")
	if ctl == "" || os.Getenv("WINDOWD_KAFKA_BROKERS") == "" {
		t.Skip("needs a real broker and WINDOWD_KAFKA_CTL to stop and start it")
	}
	kafka := func(args ...string) {
		cmd := exec.Command("bash", append([]string{ctl}, args...)...)
		cmd.Env = append(os.Environ(), "WINDOWD_KAFKA_KEEP_DATA=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kafka-local.sh %v: %v\n%s", args, err, out)
		}
	}
	// Tests of other packages that use the broker wait while it is down;
	// the lock goes after the broker is started again (cleanups run last
	// first).
	brokerlock.Hold(t, os.Getenv("WINDOWD_KAFKA_BROKERS"), true)
	t.Cleanup(func() { kafka("start") }) // never leave CI without its broker

	e := newEnv(t, 2, "")
	if delivery != "" {
		writeFile(t, e.cfgPath, readFile(t, e.cfgPath)+"    delivery: "+delivery+"\n")
		cfg, err := config.Load(e.cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		e.cfg = cfg
	}
	s := newStream(6, 2, 400)
	s.phases[1] = nil
	want, _, _ := expectedPanes(t, e, s)
	half := len(s.phases[2]) / 2
	first, rest := s.phases[2][:half], s.phases[2][half:]

	inst := e.spawn(nil, logLevelArgs()...)
	inst.waitListening(t)
	logTroubles(t, map[*instance]string{inst: "windowd"})
	produce(t, e.in, s.phases[0])
	produce(t, e.in, first)
	inst.waitRecordsIn(t, len(s.phases[0])+len(first))

	kafka("stop")
	down := time.Now()
	deadline := time.Now().Add(25 * time.Second)
	for {
		code, body := httpGet(t, "http://"+inst.httpAddr+"/readyz")
		if code == 503 {
			t.Logf("during the outage /readyz says: %q", body)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d %q 25 s into the outage\n%s", code, body, inst.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Until(down.Add(30 * time.Second)))
	select {
	case <-inst.exited:
		t.Fatalf("windowd exited during the outage: %v\n%s", inst.exitErr, inst.stderr.String())
	default:
	}
	stopped := time.Since(down)
	kafka("start")
	back := time.Now()
	t.Logf("broker down for %.1fs, started again in %.1fs", stopped.Seconds(), time.Since(down.Add(stopped)).Seconds())
	for ready := time.Now().Add(90 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if !inst.running() {
			t.Fatalf("windowd exited after the outage: %v\n%s", inst.exitErr, stderrTail(inst, 15))
		}
		code, body := httpGet(t, "http://"+inst.httpAddr+"/readyz")
		if code == 200 {
			break
		}
		if time.Now().After(ready) {
			// What it last did and where it waits (with
			// WINDOWD_TEST_LOG_LEVEL=debug, franz-go's group steps).
			// A retry logged once a second (UNSTABLE_OFFSET_COMMIT) is
			// kept once, so that what came before it shows.
			var last []string
			retries := 0
			for _, l := range lines(inst.stderr.String()) {
				switch {
				case strings.Contains(l, "unable to open connection to broker") || strings.Contains(l, "metadata update triggered"):
				case strings.Contains(l, "failed with retryable partition error"):
					if retries++; retries == 1 {
						last = append(last, l)
					}
				default:
					last = append(last, l)
				}
			}
			if retries > 1 {
				last = append(last, fmt.Sprintf("(and %d more retries of a partition error)", retries-1))
			}
			report, lost := txnState(t, e.group)
			if lost != "" {
				// The broker's fault, not windowd's (txnState): no
				// client can end such a transaction.
				t.Skipf("the broker lost the markers of a transaction its coordinator ended, on %s; windowd cannot go on behind it (/readyz %q)\n%s",
					lost, body, report)
			}
			t.Fatalf("not ready 90 s after the broker was back; /readyz says %q\nlast log lines:\n%s\nwhat the broker holds open:\n%s\nwindowd's goroutines:\n%s",
				body, strings.Join(last[max(0, len(last)-40):], "\n"), report, inst.goroutineDump())
		}
	}
	t.Logf("windowd ready %.1fs after the broker was back", time.Since(back).Seconds())
	produce(t, e.in, rest)
	e.waitCommitted(t, 90*time.Second)
	t.Logf("every input record committed %.1fs after the broker was back", time.Since(back).Seconds())
	checkAgainstReplay(t, e, want)
	if err := inst.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// TestProducerIDUnanswered: under exactly_once the pipeline's first
// transaction loads the producer id while the group may already assign
// its partitions. For 40 s the broker closes the connection on every
// InitProducerID, as a broker shutting down does. windowd neither exits
// nor hangs (the client closing while a group callback waited for the
// pipeline deadlocked): it builds the pipeline again once a second, and
// once the broker answers it is ready and writes its panes. Its own kfake
// cluster, whatever broker the other tests use.
func TestProducerIDUnanswered(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const outage = 40 * time.Second
	var first, refused atomic.Int64
	c.ControlKey(int16(kmsg.InitProducerID), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if req.(*kmsg.InitProducerIDRequest).TransactionalID == nil {
			return nil, nil, false // the test's own producer
		}
		now := time.Now().UnixNano()
		first.CompareAndSwap(0, now)
		if time.Duration(now-first.Load()) < outage {
			refused.Add(1)
			return nil, errors.New("broker away"), true // kfake closes the connection
		}
		return nil, nil, false
	})
	cfg, err := config.Parse("unanswered.yaml", []byte(fmt.Sprintf(`kafka:
  brokers: [%q]
  session_timeout: 6s
state: {dir: %q}
http: {listen: "127.0.0.1:0"}
pipelines:
  - name: p
    input: {topic: in}
    key: {field: user}
    timestamp: {field: ts}
    window: {type: tumbling, size: 10s}
    allowed_lateness: 0s
    aggregates: [{name: n, op: count}]
    output: {topic: out}
    delivery: exactly_once
    commit_interval: 200ms
`, c.ListenAddrs()[0], t.TempDir())))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("in"),
		kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, v := range []string{`{"user":"u","ts":1000}`, `{"user":"u","ts":2000}`, `{"user":"u","ts":60000}`} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	addr := make(chan string, 1)
	done := make(chan error, 1)
	runCtx, stop := context.WithCancel(ctx)
	defer func() { stop(); <-done }()
	go func() {
		done <- service.Run(runCtx, cfg, service.Options{Log: zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)), Ready: func(a string) { addr <- a }})
	}()
	var http string
	select {
	case http = <-addr:
	case err := <-done:
		t.Fatalf("service exited at start: %v", err)
	}
	waitFor(t, "windowd ready once the broker answers again", outage+60*time.Second, func() bool {
		select {
		case err := <-done:
			done <- err // for the deferred wait
			t.Fatalf("windowd stopped while the broker did not answer (%d InitProducerID requests): %v", refused.Load(), err)
		default:
		}
		code, _ := httpGet(t, "http://"+http+"/readyz")
		return code == 200
	})
	if n := refused.Load(); n == 0 || time.Since(time.Unix(0, first.Load())) < outage {
		t.Fatalf("ready %s after the first InitProducerID, %d unanswered: the outage did not happen as meant", time.Since(time.Unix(0, first.Load())), n)
	}
	for {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatal("no pane of window [0s, 10s) on the output topic")
		}
		var found bool
		fetches.EachRecord(func(r *kgo.Record) {
			found = found || strings.Contains(string(r.Value), `"n":2`)
		})
		if found {
			break
		}
	}
	t.Logf("ready after %d InitProducerID requests went unanswered; the pane of [0s, 10s) counts both records", refused.Load())
}
