package integration

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/windowd/windowd/service"
)

// TestLatenessGrownThenRollback: allowed_lateness grows from 0s to 60s
// across a restart, under exactly_once. Windows that had expired at the
// frontier the state was left at stay closed (the sealed bound); windows
// that closed since, under the new lateness, are open for 60 s more. A
// transaction aborted after the first commits makes the engine again from
// the last checkpoint: it must keep the start's sealed bound, not seal
// again from the later frontier, or a late record of a window open under
// the new lateness is dropped to the late topic.
func TestLatenessGrownThenRollback(t *testing.T) {
	parallel(t, 3*time.Second)
	if os.Getenv("WINDOWD_KAFKA_BROKERS") == "" {
		t.Skip("needs a real broker (WINDOWD_KAFKA_BROKERS): transactions")
	}
	e := newDeliveryEnvWith(t, 1, "exactly_once", "6s", "0s").env
	records := func(from, to int64) []input {
		var out []input
		for ts := from; ts < to; ts += 100 {
			out = append(out, input{partition: 0, key: "u", value: fmt.Sprintf(`{"user":"u","ts":%d,"x":1}`, base+ts)})
		}
		return out
	}
	produce(t, e.in, records(0, 20_000))
	inst := e.startInProcessWith(service.Faults{})
	e.waitCommitted(t, 60*time.Second)
	if err := inst.stop(); err != nil {
		t.Fatalf("first run: %v", err)
	}

	e.cfg.Pipelines[0].Spec.AllowedLateness = 60_000
	var abortNext atomic.Bool
	var aborted atomic.Int64
	inst = e.startInProcessWith(service.Faults{AbortTxn: func() bool {
		if abortNext.CompareAndSwap(true, false) {
			aborted.Add(1)
			return true
		}
		return false
	}})
	defer func() { _ = inst.stop() }()
	produce(t, e.in, records(20_000, 40_000))
	e.waitCommitted(t, 60*time.Second) // a checkpoint at a frontier near 38 s
	abortNext.Store(true)
	produce(t, e.in, records(40_000, 40_100))
	waitFor(t, "a transaction to abort", 30*time.Second, func() bool { return aborted.Load() == 1 })
	e.waitCommitted(t, 60*time.Second)
	// [30 s, 31 s) closed at a frontier past 31 s under the new lateness:
	// open until 91 s. A record of it is late, not dropped.
	produce(t, e.in, []input{{partition: 0, key: "late", value: fmt.Sprintf(`{"user":"u","ts":%d,"x":1}`, base+30_500)}})
	produce(t, e.in, records(40_100, 95_000)) // past 91 s: [30 s, 31 s) closes
	e.waitCommitted(t, 60*time.Second)
	if err := inst.stop(); err != nil {
		t.Fatalf("second run: %v", err)
	}
	late := e.reader(e.late)
	late.poll(2 * time.Second)
	if len(late.got) > 0 {
		t.Fatalf("a record of a window open under the grown lateness went to the late topic after a rollback: %s", late.got[0].value)
	}
	out := e.reader(e.out)
	out.poll(2 * time.Second)
	final := ""
	for _, r := range out.got {
		if r.headers["final"] == "true" && r.headers["window_start"] == fmt.Sprint(base+30_000) {
			final = gjson.Get(r.value, "aggregates.n").Raw
		}
	}
	if final != "11" {
		t.Fatalf("final pane of [30 s, 31 s): n = %q, want 11 (its ten records and the late one)", final)
	}
}
