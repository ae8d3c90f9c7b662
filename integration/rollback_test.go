package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/windowd/windowd/service"
)

// TestExactlyOnceRollbackMidPoll (DESIGN.md §9): under exactly_once, a
// transaction that aborts in the middle of a poll rolls the pipeline back
// while the poll still holds records, of the partition being processed and
// of others not reached yet. Those records come again from the rewound
// positions (franz-go's abort resets every partition it delivered to its
// committed offset; the rollback rewinds the ones processed since); the
// pipeline must not also process the copies it polled before the rollback.
//
// The faults make it happen on every run: a small cache and a small bound
// on uncommitted state writes run commit cycles every few dozen records,
// inside polls of several partitions, and every other one of the first 40
// transactions aborts. The final panes must be replay's, each exactly
// once.
func TestExactlyOnceRollbackMidPoll(t *testing.T) {
	e := rollbackEnv(t)
	recs := rollbackRecords(0, 3, 2000)
	produce(t, e.in, recs) // all before the start: polls hold records of every partition
	var calls atomic.Int64
	run := startWithFaults(t, e, func() bool {
		n := calls.Add(1)
		return n <= 40 && n%2 == 1
	})
	run.check(t, e, recs, 10)
}

// rollbackEnv is an exactly_once env of 3 partitions whose pipeline runs
// in this process with a 64 KiB cache (below config's minimum), so that
// evictions fill the pending state writes.
func rollbackEnv(t *testing.T) *env {
	if os.Getenv("WINDOWD_KAFKA_BROKERS") == "" {
		t.Skip("needs a real broker (WINDOWD_KAFKA_BROKERS): transactions")
	}
	e := newDeliveryEnv(t, 3, "exactly_once").env
	e.cfg.State.CacheBytes = 64 << 10
	return e
}

// rollbackRecords are n in-order records on each partition of [from, to),
// 20 keys per partition, 10 ms of event time apart, then a flush record.
func rollbackRecords(from, to int32, n int) []input {
	var recs []input
	for i := 0; i < n; i++ {
		for p := from; p < to; p++ {
			u := fmt.Sprintf("k%d-%d", p, i%20)
			recs = append(recs, input{partition: p, key: u, value: fmt.Sprintf(`{"user":%q,"ts":%d,"x":%d}`, u, base+int64(i)*10, (i*7+int(p))%100)})
		}
	}
	for _, f := range flushRecords(to) {
		if f.partition >= from {
			recs = append(recs, f)
		}
	}
	return recs
}

// faultRun is a pipeline running in this process with injected aborts.
type faultRun struct {
	calls, aborts *atomic.Int64
	stop          func() error
}

// startWithFaults runs e's pipeline in this process, committing in the
// middle of polls (8 KiB of pending state writes), with the transactions
// for which abort says true aborted.
func startWithFaults(t *testing.T, e *env, abort func() bool) *faultRun {
	t.Helper()
	r := &faultRun{calls: new(atomic.Int64), aborts: new(atomic.Int64)}
	faults := service.Faults{MaxPendingBytes: 8 << 10, AbortTxn: func() bool {
		r.calls.Add(1)
		if abort() {
			r.aborts.Add(1)
			return true
		}
		return false
	}}
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- service.Run(ctx, e.cfg, service.Options{Log: zap.NewNop(), Faults: faults, Ready: func(a string) { addr <- a }})
	}()
	stopped := false
	r.stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-done
	}
	t.Cleanup(func() { _ = r.stop() })
	select {
	case <-addr:
	case err := <-done:
		t.Fatalf("service exited at start: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("service did not start")
	}
	return r
}

// check waits until every input record is committed, stops the pipeline,
// and checks that at least minAborts transactions aborted and that the
// output, read read_committed, holds replay's final pane of every window
// of recs exactly once.
func (r *faultRun) check(t *testing.T, e *env, recs []input, minAborts int64) {
	t.Helper()
	e.waitCommitted(t, 90*time.Second)
	if err := r.stop(); err != nil {
		t.Fatalf("service: %v", err)
	}
	if n := r.aborts.Load(); n < minAborts {
		t.Fatalf("only %d transactions aborted (%d commit cycles): the faults did not reach the rollback path often enough", n, r.calls.Load())
	}
	want := replayFinals(t, e, recs)
	if len(want) < 500 {
		t.Fatalf("test stream too small: replay has %d windows", len(want))
	}
	out := e.reader(e.out) // read_committed
	readFinals(out, want, 30*time.Second)
	late := e.reader(e.late)
	late.poll(time.Second)
	res := checkDelivery(e, want, out.got, late.got, true)
	t.Logf("%d input records, %d windows in replay; %d commit cycles, %d aborted; output (read_committed): %d pane records, %d distinct pane ids, %d duplicates",
		len(recs), len(want), r.calls.Load(), r.aborts.Load(), res.records, res.distinct, res.dups)
	if len(res.problems) > 0 {
		t.Fatalf("after rollbacks:\n%s", strings.Join(res.problems, "\n"))
	}
}
