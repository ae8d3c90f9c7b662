package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestInputPartitionsAdded (docs/OPERATIONS.md): partitions added to the
// input while windowd runs (kafka-topics --alter --partitions) are consumed
// from their start, get watermark generators and join the frontier, and the
// changelog grows to match; with allowed_lateness 0 every final pane is
// replay's and nothing is dropped as late.
func TestInputPartitionsAdded(t *testing.T) {
	if os.Getenv("WINDOWD_KAFKA_BROKERS") == "" {
		t.Skip("needs a real broker (WINDOWD_KAFKA_BROKERS): partitions added to a topic")
	}
	parallel(t, 7*time.Second)
	windowdBinary(t)
	de := newDeliveryEnvWith(t, 2, "at_least_once", "6s", "0s")
	e := de.env
	inst := e.spawn(nil)
	logTroubles(t, map[*instance]string{inst: "windowd"})
	inst.waitListening(t)

	// In event-time order per partition; keys k<p>-<i> live on partition p.
	batch := func(parts []int32, from, to int64) []input {
		var out []input
		for ts := from; ts < to; ts += 100 {
			for _, p := range parts {
				u := fmt.Sprintf("k%d-%d", p, ts/100%3)
				out = append(out, input{partition: p, key: u, value: fmt.Sprintf(`{"user":%q,"ts":%d,"x":%d}`, u, base+ts, ts%7)})
			}
		}
		return out
	}
	recs := batch([]int32{0, 1}, 0, 5000)
	produce(t, e.in, recs)
	inst.waitRecordsIn(t, len(recs))

	adm := kadm.NewClient(newClient(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreatePartitions(ctx, 2, e.in); err != nil {
		t.Fatal(err)
	}
	e.partitions = 4
	// Records on the new partitions before windowd has seen them: they
	// must be consumed from the partitions' start.
	more := batch([]int32{0, 1, 2, 3}, 5000, 10000)
	produce(t, e.in, more)
	recs = append(recs, more...)
	flush := flushRecords(4)
	produce(t, e.in, flush)
	recs = append(recs, flush...)
	e.waitCommitted(t, 90*time.Second)

	want := replayFinals(t, e, recs)
	out := e.reader(e.out)
	readFinals(out, want, 30*time.Second)
	lateDropped, _ := inst.metric(t, "windowd_late_dropped_total")
	if err := inst.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("after SIGTERM: %v\n%s", err, stderrTail(inst, 20))
	}
	late := e.reader(e.late)
	late.poll(time.Second)
	res := checkDelivery(e, want, out.got, late.got, false)
	if lateDropped != 0 {
		res.problems = append(res.problems, fmt.Sprintf("%.0f records dropped as late", lateDropped))
	}
	tds, err := adm.ListTopics(ctx, e.group+"-p-changelog")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tds[e.group+"-p-changelog"].Partitions); n != 4 {
		res.problems = append(res.problems, fmt.Sprintf("the changelog has %d partitions, want 4 (one per input partition)", n))
	}
	if !strings.Contains(inst.stderr.String(), "input grew: added partitions to match") {
		res.problems = append(res.problems, "windowd did not log that it grew the changelog")
	}
	if !strings.Contains(inst.stderr.String(), "the input grew while running") {
		res.problems = append(res.problems, "windowd did not warn that keys moved to the new partitions split (and record the new count with its state)")
	}
	t.Logf("%d records, %d windows in replay, %d pane records", len(recs), len(want), res.records)
	if len(res.problems) > 0 {
		t.Fatalf("after the input grew from 2 to 4 partitions:\n%s", strings.Join(res.problems, "\n"))
	}
}
