package integration

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// TestInputPartitionsAdded (docs/OPERATIONS.md): partitions added to the
// input while windowd runs (kafka-topics --alter --partitions) are consumed
// from their start, get watermark generators and join the frontier, and the
// changelog grows to match; with allowed_lateness 0 every final pane is
// replay's and nothing is dropped as late. Key "moved" goes the way the
// producer's partitioner moves a key: its window [6s,7s) gets records on
// partition 0 and on added partition 2. Each partition emits its own final
// pane of it, the added partition's with @2 in its pane id, and the split
// is warned about and counted. Before, both final panes had one pane id.
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
	moved := func(p int32, ts int64) input {
		return input{partition: p, key: "moved", value: fmt.Sprintf(`{"user":"moved","ts":%d,"x":1}`, base+ts)}
	}
	recs := batch([]int32{0, 1}, 0, 5000)
	produce(t, e.in, append(recs, moved(0, 6050)))
	inst.waitRecordsIn(t, len(recs)+1)

	addPartitions(t, e.in, 2)
	e.partitions = 4
	// Records on the new partitions before windowd has seen them: they
	// must be consumed from the partitions' start.
	more := batch([]int32{0, 1, 2, 3}, 5000, 6000)
	produce(t, e.in, more)
	recs = append(recs, more...)
	waitFor(t, "windowd to notice the added partitions", 60*time.Second, func() bool {
		return strings.Contains(inst.stderr.String(), "the input grew while running")
	})
	// The producer's partitioner now puts "moved" on partition 2; a
	// producer that has not refreshed its metadata yet still on 0.
	produce(t, e.in, []input{moved(2, 6150), moved(0, 6250)})
	more = batch([]int32{0, 1, 2, 3}, 6000, 10000)
	produce(t, e.in, more)
	recs = append(recs, more...)
	flush := flushRecords(4)
	produce(t, e.in, flush)
	recs = append(recs, flush...)
	e.waitCommitted(t, 90*time.Second)

	want := replayFinals(t, e, recs) // without "moved": checked below
	out := e.reader(e.out)
	readFinals(out, want, 30*time.Second)
	lateDropped, _ := inst.metric(t, "windowd_late_dropped_total")
	splits, _ := inst.metric(t, "windowd_split_keys_total")
	if err := inst.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("after SIGTERM: %v\n%s", err, stderrTail(inst, 20))
	}
	late := e.reader(e.late)
	late.poll(time.Second)
	var others []outRecord
	movedFinals := map[string]string{} // pane id -> count
	for _, r := range out.got {
		if r.key != "moved" {
			others = append(others, r)
		} else if r.headers["final"] == "true" {
			movedFinals[r.headers["pane_id"]] = gjson.Get(r.value, "aggregates.n").Raw
		}
	}
	res := checkDelivery(e, want, others, late.got, false)
	w := fmt.Sprintf("moved/%d/%d/0", base+6000, base+7000)
	if len(movedFinals) != 2 || movedFinals[w] != "2" || movedFinals[w+"@2"] != "1" {
		res.problems = append(res.problems, fmt.Sprintf("final panes of %s: %v, want the count 2 from partition 0 as %s and 1 from partition 2 as %s@2", w, movedFinals, w, w))
	}
	if splits < 1 || !strings.Contains(inst.stderr.String(), "key seen on two input partitions") {
		res.problems = append(res.problems, fmt.Sprintf("windowd_split_keys_total %.0f and no split-key warning: the moved key was not reported", splits))
	}
	if lateDropped != 0 {
		res.problems = append(res.problems, fmt.Sprintf("%.0f records dropped as late", lateDropped))
	}
	if n := partitionCount(t, e.group+"-p-changelog"); n != 4 {
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

// TestInputGrewWhileStopped (docs/OPERATIONS.md, Changing a deployed
// pipeline): the input grows from 2 to 4 partitions while windowd is
// stopped with window [6s,7s) of key "moved" open on partition 0; after
// the restart the producer's partitioner puts "moved" on partition 2. As
// when the input grows while running (TestInputPartitionsAdded), each
// partition emits its own final pane of the window, the added partition's
// with @2 in its pane id, on the same state directory and on state
// restored from the changelog alone. Before, the restart without a state
// directory took 4 for the input's first count, and both final panes had
// one pane id.
func TestInputGrewWhileStopped(t *testing.T) {
	if os.Getenv("WINDOWD_KAFKA_BROKERS") == "" {
		t.Skip("needs a real broker (WINDOWD_KAFKA_BROKERS): partitions added to a topic")
	}
	eachStateDir(t, 6*time.Second, grewWhileStopped)
}

func grewWhileStopped(t *testing.T, keepDir bool) {
	windowdBinary(t)
	de := newDeliveryEnvWith(t, 2, "at_least_once", "6s", "0s")
	e := de.env
	rec := func(p int32, key string, ts int64) input {
		return input{partition: p, key: key, value: fmt.Sprintf(`{"user":%q,"ts":%d,"x":1}`, key, base+ts)}
	}
	var first []input
	for ts := int64(0); ts < 6500; ts += 500 {
		first = append(first, rec(0, "k0", ts), rec(1, "k1", ts))
	}
	first = append(first, rec(0, "moved", 6050))
	runAndStop(t, e, first)
	if !keepDir {
		removeStateDir(t, e.stateDir)
	}
	addPartitions(t, e.in, 2)
	e.partitions = 4
	b := e.spawn(nil)
	logTroubles(t, map[*instance]string{b: "windowd (restarted)"})
	b.waitListening(t)
	second := []input{rec(2, "moved", 6150), rec(0, "moved", 6250)}
	for ts := int64(6500); ts < 10000; ts += 500 {
		for p := int32(0); p < 4; p++ {
			second = append(second, rec(p, fmt.Sprintf("k%d", p), ts))
		}
	}
	produce(t, e.in, append(second, flushRecords(4)...))
	e.waitCommitted(t, 60*time.Second)

	w := fmt.Sprintf("moved/%d/%d", base+6000, base+7000)
	finals := finalsByWindow(e.reader(e.out), 30*time.Second, func(f map[string][]string) bool { return len(f[w]) > 0 && len(f[w+"@2"]) > 0 })
	problems := repeatedFinals(finals)
	if len(finals[w]) != 1 || finalAggregate(finals[w][0], "n") != 2 || strings.Contains(finals[w][0], "@") {
		problems = append(problems, fmt.Sprintf("%s: final panes %v, want one of n=2 (partition 0) without a partition in its id", w, finals[w]))
	}
	if len(finals[w+"@2"]) != 1 || finalAggregate(finals[w+"@2"][0], "n") != 1 {
		problems = append(problems, fmt.Sprintf("%s@2: final panes %v, want one of n=1 (added partition 2)", w, finals[w+"@2"]))
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		t.Fatalf("after the input grew from 2 to 4 partitions during a stop:\n%s", strings.Join(problems, "\n"))
	}
	t.Logf("%d windows with a final pane", len(finals))
	_ = b.signal(t, syscall.SIGTERM)
}
