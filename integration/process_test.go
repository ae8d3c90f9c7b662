package integration

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// waitCommitted waits until the group's committed offsets reach the end of
// every partition of the input: everything was consumed and checkpointed.
func (e *env) waitCommitted(t *testing.T, timeout time.Duration) {
	t.Helper()
	adm := kadm.NewClient(newClient(t))
	waitFor(t, "group offsets at the end of the input", timeout, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, e.in)
		if err != nil {
			return false
		}
		committed, err := adm.FetchOffsets(ctx, e.group)
		if err != nil {
			return false
		}
		ok := true
		ends.Each(func(lo kadm.ListedOffset) {
			if lo.Offset == 0 {
				return // an empty partition has nothing to commit
			}
			c, found := committed.Lookup(e.in, lo.Partition)
			if !found || c.At != lo.Offset {
				ok = false
			}
		})
		return ok
	})
}

// checkAgainstReplay reads the output until it holds every pane replay
// computes, then checks that the distinct panes are exactly replay's and
// that duplicates only repeat a pane id with identical content.
func checkAgainstReplay(t *testing.T, e *env, want []string) []outRecord {
	t.Helper()
	out := e.reader(e.out)
	wantSet := map[string]bool{}
	for _, w := range want {
		wantSet[w] = true
	}
	missing := func() []string {
		seen := map[string]bool{}
		for _, r := range out.got {
			seen[r.value] = true
		}
		var m []string
		for _, w := range want {
			if !seen[w] {
				m = append(m, w)
			}
		}
		return m
	}
	for deadline := time.Now().Add(60 * time.Second); len(missing()) > 0; out.poll(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			m := missing()
			t.Fatalf("after 60s, %d of %d expected panes are missing (read %d records), e.g.\n%s", len(m), len(want), len(out.got), strings.Join(m[:min(len(m), 10)], "\n"))
		}
	}
	out.poll(time.Second)
	byID := map[string]string{}
	distinct := map[string]bool{}
	dups := 0
	for _, r := range out.got {
		if strings.HasPrefix(r.key, "flush") {
			continue // flush records' windows never close in run (see expectedPanes)
		}
		id := r.headers["pane_id"]
		if prev, ok := byID[id]; ok {
			dups++
			if prev != r.value {
				t.Fatalf("pane id %s emitted with different content:\n%s\n%s", id, prev, r.value)
			}
		}
		byID[id] = r.value
		distinct[r.value] = true
	}
	var got []string
	for v := range distinct {
		got = append(got, v)
	}
	if g, w := sorted(got), sorted(want); strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Fatalf("distinct output panes differ from replay: got %d, want %d\n%s", len(g), len(w), diff(g, w))
	}
	t.Logf("%d pane records, %d distinct, %d duplicates (same pane id, same content)", len(out.got), len(distinct), dups)
	return out.got
}

// setCommitInterval rewrites the env's config file (for the next start).
func (e *env) setCommitInterval(t *testing.T, d string) {
	t.Helper()
	cfg := readFile(t, e.cfgPath)
	i := strings.Index(cfg, "commit_interval: ")
	writeFile(t, e.cfgPath, cfg[:i]+"commit_interval: "+d+"\n")
}

// TestKillAndRestart: kill -9 mid-stream, restart with the same state dir;
// every window's final pane is present and correct, duplicates only repeat
// identical pane ids.
//
//	A  processes and checkpoints phase 1, then is killed (kill -9) mid-stream
//	B  never reaches a checkpoint (commit_interval 1h): it emits the panes of
//	   phases 2 and 3 and is killed
//	C  starts at once (B is still registered in the group: the restart hold
//	   applies), resumes from A's checkpoint and recomputes B's panes:
//	   duplicates
//
// The stream has no records beyond the out-of-orderness bound: whether such
// a record is late depends on how partitions interleave, which a re-run after
// a crash does not reproduce (docs/SEMANTICS.md); every other pane is
// determined by the records alone.
func TestKillAndRestart(t *testing.T) {
	parallel(t, 14*time.Second)
	e := newEnv(t, 2, "")
	s := newStream(3, 2, 1500)
	s.phases[1] = nil
	want, _, _ := expectedPanes(t, e, s)

	a := e.startProcess()
	produce(t, e.in, s.phases[0])
	a.waitRecordsIn(t, len(s.phases[0])/3)
	_ = a.signal(t, syscall.SIGKILL)
	// Let A's session (6 s) expire so that B joins alone: a rebalance while
	// B runs would make it checkpoint on revocation.
	e.waitGroupEmpty(t, 30*time.Second)

	e.setCommitInterval(t, "1h")
	b := e.startProcess()
	waitFor(t, "frontier after phase 1 (after restart)", 60*time.Second, func() bool {
		v, ok := b.metric(t, "windowd_frontier_ms")
		return ok && int64(v) >= s.f1
	})
	produce(t, e.in, s.phases[2])
	// The flush records come last on every partition: once the frontier
	// reaches them, B has processed (and emitted the panes of) everything.
	waitFor(t, "B to reach the flush records", 60*time.Second, func() bool {
		v, ok := b.metric(t, "windowd_frontier_ms")
		return ok && int64(v) >= base+3600_000-2000
	})
	// Kill B only once its panes are in the output topic (they are produced
	// asynchronously), so that C's recomputation shows up as duplicates.
	e.reader(e.out).readUntil(t, "B's panes in the output topic", 60*time.Second, func(got []outRecord) bool { return len(got) >= len(want) })
	_ = b.signal(t, syscall.SIGKILL)

	e.setCommitInterval(t, "200ms")
	c := e.startProcess()
	e.waitCommitted(t, 60*time.Second)
	// Duplicates are expected here (B never checkpointed), but whether B's
	// last panes left its producer before the kill is timing: the contract
	// checked is that every duplicate repeats its pane id with identical
	// content and that every final pane is present and correct.
	checkAgainstReplay(t, e, want)
	if err := c.stop(); err != nil {
		t.Fatalf("stop after restart: %v\n%s", err, c.stderr.String())
	}
}

// TestSIGTERMCommits: SIGTERM exits 0 after committing; a restart
// re-emits nothing already committed and carries on correctly.
func TestSIGTERMCommits(t *testing.T) {
	parallel(t, 6*time.Second)
	e := newEnv(t, 2, "")
	s := newStream(4, 2, 300)
	want, _, _ := expectedPanes(t, e, s)

	a := e.startProcess()
	produce(t, e.in, s.phases[0])
	a.waitRecordsIn(t, len(s.phases[0]))
	waitFor(t, "frontier after phase 1", 30*time.Second, func() bool {
		v, ok := a.metric(t, "windowd_frontier_ms")
		return ok && int64(v) >= s.f1
	})
	start := time.Now()
	if err := a.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("windowd exited with %v after SIGTERM\n%s", err, a.stderr.String())
	}
	if code := a.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	t.Logf("SIGTERM to exit: %s", time.Since(start).Round(time.Millisecond))
	for _, want := range []string{`"stopped cleanly"`, `"partitions revoked"`} {
		if !strings.Contains(a.stderr.String(), want) {
			t.Fatalf("log lacks %s:\n%s", want, a.stderr.String())
		}
	}
	e.waitCommitted(t, 5*time.Second) // committed before exit: no waiting needed

	out := e.reader(e.out)
	out.poll(2 * time.Second)
	before := len(out.got)
	if before == 0 {
		t.Fatal("no panes before the restart")
	}

	b := e.startProcess()
	waitFor(t, "restarted instance ready", 30*time.Second, func() bool {
		v, _ := b.metric(t, "windowd_pipeline_ready")
		return v == 1
	})
	out.poll(2 * time.Second)
	if after := len(out.got); after != before {
		t.Fatalf("restart re-emitted %d records without new input", after-before)
	}
	produce(t, e.in, s.phases[1])
	e.waitCommitted(t, 60*time.Second)
	produce(t, e.in, s.phases[2])
	e.waitCommitted(t, 60*time.Second)
	got := checkAgainstReplay(t, e, want)
	if len(got) != len(want) {
		t.Fatalf("%d pane records after a clean restart, want exactly %d (no duplicates)", len(got), len(want))
	}
	if err := b.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// TestBrokerUnreachable: with no broker, windowd keeps running, reports
// not ready with the reason, and still stops cleanly.
func TestBrokerUnreachable(t *testing.T) {
	parallel(t, 3*time.Second)
	e := newEnv(t, 1, "")
	cfg := strings.Replace(readFile(t, e.cfgPath), strings.Join(quoteAll(brokers), ", "), `"127.0.0.1:1"`, 1)
	writeFile(t, e.cfgPath, cfg)
	inst := e.startProcess()
	time.Sleep(3 * time.Second)
	code, body := httpGet(t, "http://"+inst.httpAddr+"/readyz")
	if code != 503 || !strings.Contains(body, "not ready") {
		t.Fatalf("/readyz = %d %q, want 503 not ready", code, body)
	}
	select {
	case <-inst.exited:
		t.Fatalf("windowd exited without a broker:\n%s", inst.stderr.String())
	default:
	}
	if !strings.Contains(inst.stderr.String(), "waiting for input topic (retrying)") {
		t.Fatalf("log does not say it is retrying:\n%s", inst.stderr.String())
	}
	if err := inst.stop(); err != nil {
		t.Fatalf("stop without a broker: %v\n%s", err, inst.stderr.String())
	}
}
