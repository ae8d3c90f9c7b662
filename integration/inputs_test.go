package integration

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/windowd/windowd/config"
)

// inputsYAML is a pipeline over two input topics (docs/SEMANTICS.md,
// Several inputs), views and clicks per user, read through repartition:
// true; allowed_lateness 0, so a window that fired before all its records
// of both topics arrived would send the rest to the late topic.
const inputsYAML = `kafka:
  brokers: [%s]
  session_timeout: 6s
state:
  dir: %s
http:
  listen: 127.0.0.1:0
shutdown_grace: 20s
pipelines:
  - name: p
    group: %s
    inputs:
      - {topic: %s, as: views}
      - {topic: %s, as: clicks}
    key: {field: user}
    timestamp: {field: ts}
    watermark: {strategy: bounded_out_of_orderness, max_delay: 1s, idle_timeout: 60s}
    window: {type: tumbling, size: 10s}
    allowed_lateness: 0s
    aggregates:
      - {name: views, op: count, input: views}
      - {name: clicks, op: count, input: clicks}
      - {name: spent, op: sum, field: x, input: clicks}
      - {name: ctr, op: ratio, of: clicks, to: views}
    output: {topic: %s}
    late_topic: %s
    dead_letter_topic: %s
    commit_interval: 200ms
    delivery: %s
    repartition: true
    watermark_interval: 200ms
`

// TestInputsKill: two windowd processes share a pipeline over two input
// topics of 4 and 2 partitions (repartition: true, at_least_once), fed a
// steady stream on both, users on every partition of both; mid-stream one
// is killed (kill -9), the other takes everything over, and the killed one
// restarts on its state and takes its share back. Every window replay
// computes for the same records has exactly one final pane, equal to
// replay's, and nothing is late.
func TestInputsKill(t *testing.T) {
	parallel(t, 18*time.Second)
	inputsKill(t, "at_least_once", 2)
}

// TestInputsKillExactlyOnce is TestInputsKill under exactly_once, two
// topics of 4 partitions: a read_committed reader sees every pane once.
func TestInputsKillExactlyOnce(t *testing.T) {
	parallel(t, 18*time.Second)
	inputsKill(t, "exactly_once", 4)
}

// inputsKill runs the test with the clicks topic of clickParts partitions
// (the views topic has 4): topics of different partition counts need no
// co-partitioning, stage 1 repartitions both.
func inputsKill(t *testing.T, delivery string, clickParts int32) {
	if os.Getenv("WINDOWD_KAFKA_BROKERS") == "" {
		t.Skip("needs a real broker (WINDOWD_KAFKA_BROKERS): windowd processes in two consumer groups over two input topics")
	}
	windowdBinary(t)
	began := time.Now()
	const parts = 4
	views := &env{t: t, in: uniqueName(t, "views"), out: uniqueName(t, "out"), late: uniqueName(t, "late"), dlq: uniqueName(t, "dlq"),
		group: uniqueName(t, "g"), partitions: parts, delivery: delivery}
	clicks := *views
	clicks.in, clicks.partitions = uniqueName(t, "clicks"), clickParts
	createTopic(t, views.in, parts)
	createTopic(t, clicks.in, clickParts)
	write := func(stateDir string) string {
		path := filepath.Join(t.TempDir(), "windowd.yaml")
		writeFile(t, path, fmt.Sprintf(inputsYAML, strings.Join(quoteAll(brokers), ", "), stateDir, views.group, views.in, clicks.in,
			views.out, views.late, views.dlq, delivery))
		return path
	}
	views.stateDir = filepath.Join(t.TempDir(), "state")
	views.cfgPath = write(views.stateDir)
	cfg, err := config.Load(views.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	views.cfg = cfg
	member := func(name string) *env {
		m := *views
		m.stateDir = filepath.Join(t.TempDir(), "state-"+name)
		m.cfgPath = write(m.stateDir)
		return &m
	}
	aEnv := member("a")
	a := aEnv.spawn(nil)
	b := member("b").spawn(nil)
	names := map[*instance]string{a: "a", b: "b"}
	logTroubles(t, names)
	a.waitListening(t)
	b.waitListening(t)
	alive := func(inst *instance) {
		if !inst.running() {
			t.Fatalf("instance %s exited: %v\n%s", names[inst], inst.exitErr, stderrTail(inst, 30))
		}
	}
	// Users on every partition of both topics: the records of one user
	// meet only in the repartition topic.
	record := func(kind string) func(rng *rand.Rand, p int32, n int, ts int64) input {
		return func(rng *rand.Rand, p int32, n int, ts int64) input {
			u := fmt.Sprintf("u%d", rng.Intn(40))
			return input{partition: p, key: fmt.Sprintf("%s%d", kind, n), value: fmt.Sprintf(`{"user":%q,"ts":%d,"x":%d}`, u, ts, rng.Intn(100))}
		}
	}
	vp := startProducer(t, views, 4343, record("v"))
	cp := startProducer(t, &clicks, 4444, record("c"))
	at := func(format string, args ...any) {
		n, et := vp.progress()
		t.Logf("%5.1fs  %s (%d view records produced, event time +%.1fs)", time.Since(began).Seconds(), fmt.Sprintf(format, args...), n, float64(et-base)/1000)
	}
	adm := kadm.NewClient(newClient(t))
	stage1, stage2 := views.group, views.repartitionTopic()
	// Stage 1 holds both topics' partitions.
	inputParts := int(parts + clickParts)
	waitFor(t, "a and b to share both stages' partitions", 60*time.Second, func() bool {
		alive(a)
		alive(b)
		s := groupShares(adm, stage1, stage2)
		return len(s[stage1]) == 2 && s[stage1][0] > 0 && s[stage1][0]+s[stage1][1] == inputParts &&
			len(s[stage2]) == 2 && s[stage2][0] > 0 && s[stage2][0]+s[stage2][1] == parts
	})
	out := views.reader(views.out)
	for {
		alive(a)
		out.poll(200 * time.Millisecond)
		if _, et := vp.progress(); et >= base+8_000 && len(out.got) > 0 {
			break
		}
		if time.Since(began) > 60*time.Second {
			t.Fatal("no pane within 60s")
		}
	}
	at("%d pane records so far; killing a", len(out.got))
	_ = a.signal(t, syscall.SIGKILL)
	_, killedAt := vp.progress()
	waitFor(t, "b to own every partition of both stages", 45*time.Second, func() bool {
		alive(b)
		s := groupShares(adm, stage1, stage2)
		return len(s[stage1]) == 1 && s[stage1][0] == inputParts && len(s[stage2]) == 1 && s[stage2][0] == parts
	})
	at("b owns every partition")
	for _, et := vp.progress(); et < killedAt+4_000; _, et = vp.progress() {
		alive(b)
		time.Sleep(50 * time.Millisecond)
	}
	// a restarts on its state directory and takes its share back.
	a = aEnv.spawn(nil)
	names[a] = "a (restarted)"
	a.waitListening(t)
	waitFor(t, "a (restarted) and b to share both stages' partitions", 60*time.Second, func() bool {
		alive(a)
		alive(b)
		s := groupShares(adm, stage1, stage2)
		return len(s[stage1]) == 2 && s[stage1][0] > 0 && len(s[stage2]) == 2 && s[stage2][0] > 0
	})
	at("a restarted; they share the partitions again")
	_, restartedAt := vp.progress()
	for _, et := vp.progress(); et < restartedAt+4_000; _, et = vp.progress() {
		alive(a)
		alive(b)
		time.Sleep(50 * time.Millisecond)
	}
	vrecs := vp.finish(views)
	crecs := cp.finish(&clicks)
	alive(b)
	at("streams stopped, flushed; every input record committed by stage 1")

	want := replayInputs(t, &cfg.Pipelines[0], map[string][]input{views.in: vrecs, clicks.in: crecs}, parts)
	if len(want) < 50 {
		t.Fatalf("test stream too small: replay has %d windows", len(want))
	}
	readFinals(out, want, 40*time.Second)
	for _, inst := range []*instance{a, b} {
		if err := inst.signal(t, syscall.SIGTERM); err != nil {
			t.Errorf("instance %s after SIGTERM: %v\n%s", names[inst], err, stderrTail(inst, 30))
		}
	}
	out.poll(time.Second)
	late := views.reader(views.late)
	late.poll(time.Second)
	res := checkDelivery(views, want, out.got, late.got, delivery == "exactly_once")
	t.Logf("%d + %d input records, %d windows in replay; output: %d pane records, %d distinct pane ids, %d duplicates; %.1fs in all",
		len(vrecs), len(crecs), len(want), res.records, res.distinct, res.dups, time.Since(began).Seconds())
	if len(res.problems) > 0 {
		t.Fatalf("output of two inputs after a kill -9 (%s) differs from replay:\n%s", delivery, strings.Join(res.problems, "\n"))
	}
}

// replayInputs replays the records of each topic (a line names its topic)
// and returns window id -> final aggregates, as replayFinals does.
func replayInputs(t *testing.T, p *config.Pipeline, recs map[string][]input, partitions int) map[string]string {
	t.Helper()
	var in strings.Builder
	for topic, rs := range recs {
		for _, r := range rs {
			fmt.Fprintf(&in, `{"topic":%q,"partition":%d,"key":%s,"value":%s}`+"\n", topic, r.partition, strconv.Quote(r.key), strconv.Quote(r.value))
		}
	}
	panes, errs := runReplayInput(t, p, in.String(), partitions)
	return finals(t, panes, errs)
}
