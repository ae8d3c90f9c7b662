package integration

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/windowd/windowd/service"
)

// TestExactlyOnceRollbackMidPoll (docs/SEMANTICS.md, Delivery): under
// exactly_once, a transaction that aborts in the middle of a poll rolls the
// pipeline back while the poll still holds records, of the partition being
// processed and of others not reached yet. Those records come again from the
// rewound positions (franz-go's abort resets every partition it delivered to
// its committed offset; the rollback rewinds the ones processed since); the
// pipeline must not also process the copies it polled before the rollback.
//
// The faults make it happen on every run: a 64 KiB cache (below config's
// minimum) and an 8 KiB bound on uncommitted state writes run commit
// cycles every few dozen records, inside polls of several partitions, and
// every other one of the first 40 transactions aborts. The final panes,
// read read_committed, must be replay's, each exactly once.
func TestExactlyOnceRollbackMidPoll(t *testing.T) {
	parallel(t, 3*time.Second)
	if os.Getenv("WINDOWD_KAFKA_BROKERS") == "" {
		t.Skip("needs a real broker (WINDOWD_KAFKA_BROKERS): transactions")
	}
	const parts, perPartition, keys = 3, 2000, 20
	e := newDeliveryEnv(t, parts, "exactly_once").env
	e.cfg.State.CacheBytes = 64 << 10
	var recs []input
	for i := 0; i < perPartition; i++ {
		for p := int32(0); p < parts; p++ {
			u := fmt.Sprintf("k%d-%d", p, i%keys)
			recs = append(recs, input{partition: p, key: u, value: fmt.Sprintf(`{"user":%q,"ts":%d,"x":%d}`, u, base+int64(i)*10, (i*7+int(p))%100)})
		}
	}
	recs = append(recs, flushRecords(parts)...)
	produce(t, e.in, recs) // all before the start: polls hold records of every partition

	var calls, aborts atomic.Int64
	inst := e.startInProcessWith(service.Faults{MaxPendingBytes: 8 << 10, AbortTxn: abortEveryOther(40, &calls, &aborts)})
	e.waitCommitted(t, 90*time.Second)
	if err := inst.stop(); err != nil {
		t.Fatalf("service: %v", err)
	}
	if n := aborts.Load(); n < 10 {
		t.Fatalf("only %d transactions aborted (%d commit cycles): the faults did not reach the rollback path often enough", n, calls.Load())
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
		len(recs), len(want), calls.Load(), aborts.Load(), res.records, res.distinct, res.dups)
	if len(res.problems) > 0 {
		t.Fatalf("after rollbacks in the middle of polls:\n%s", strings.Join(res.problems, "\n"))
	}
}

// TestExactlyOnceEndWithoutAnswer (docs/SEMANTICS.md, Delivery): a
// transaction's end that gets no answer (the broker unreachable at that
// moment) leaves its outcome unknown. windowd must not exit over an
// unreachable broker: it rejoins with a new producer epoch, which aborts
// the transaction if it is still open, and restores from the changelog.
// The faults make two ends fail as a refused connection does (the end is
// not sent); the final panes, read read_committed, must be replay's, each
// exactly once, and the service must still be running at the end. With
// allowed_lateness 0s, nothing may be dropped as late: a rejoin that put
// the frontier or a position wrong would show there.
func TestExactlyOnceEndWithoutAnswer(t *testing.T) {
	parallel(t, 20*time.Second)
	if os.Getenv("WINDOWD_KAFKA_BROKERS") == "" {
		t.Skip("needs a real broker (WINDOWD_KAFKA_BROKERS): transactions")
	}
	const parts, perPartition, keys = 2, 1500, 20
	e := newDeliveryEnvWith(t, parts, "exactly_once", "2s", "0s").env
	var recs []input
	for i := 0; i < perPartition; i++ {
		for p := int32(0); p < parts; p++ {
			u := fmt.Sprintf("k%d-%d", p, i%keys)
			recs = append(recs, input{partition: p, key: u, value: fmt.Sprintf(`{"user":%q,"ts":%d,"x":%d}`, u, base+int64(i)*10, (i*7+int(p))%100)})
		}
	}
	half := len(recs) / 2
	var ends, failed atomic.Int64
	refused := errors.New("unable to dial: dial tcp 127.0.0.1:9092: connect: connection refused (injected)")
	inst := e.startInProcessWith(service.Faults{EndTxn: func() error {
		if n := ends.Add(1); n == 3 || n == 9 {
			failed.Add(1)
			return refused
		}
		return nil
	}})
	produce(t, e.in, recs[:half])
	waitFor(t, "two transaction ends without an answer", 90*time.Second, func() bool { return failed.Load() >= 2 })
	produce(t, e.in, append(recs[half:], flushRecords(parts)...))
	recs = append(recs, flushRecords(parts)...)
	e.waitCommitted(t, 90*time.Second)
	if err := inst.stop(); err != nil {
		t.Fatalf("service stopped with an error (an unanswered transaction end must make it rejoin, not exit): %v", err)
	}
	want := replayFinals(t, e, recs)
	out := e.reader(e.out) // read_committed
	readFinals(out, want, 30*time.Second)
	late := e.reader(e.late)
	late.poll(time.Second)
	res := checkDelivery(e, want, out.got, late.got, true)
	t.Logf("%d input records, %d windows in replay; %d transaction ends, %d without an answer; output (read_committed): %d pane records, %d distinct pane ids, %d duplicates",
		len(recs), len(want), ends.Load(), failed.Load(), res.records, res.distinct, res.dups)
	if len(res.problems) > 0 {
		t.Fatalf("after transaction ends without an answer:\n%s", strings.Join(res.problems, "\n"))
	}
	if len(late.got) > 0 {
		t.Fatalf("%d records dropped as late with allowed_lateness 0s", len(late.got))
	}
}

// abortEveryOther is an AbortTxn fault that aborts every other one of the
// first n transactions (the first, the third, …), counting the
// transactions in calls and the aborts in aborts.
func abortEveryOther(n int64, calls, aborts *atomic.Int64) func() bool {
	return func() bool {
		if c := calls.Add(1); c <= n && c%2 == 1 {
			aborts.Add(1)
			return true
		}
		return false
	}
}
