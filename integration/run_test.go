package integration

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

const base = int64(1_700_000_000_000)

// stream builds a deterministic test stream in three phases, so that which
// records are late does not depend on how partitions interleave:
//
//	phase 1  per partition, event times rising ~200 ms a record with up to
//	         1.5 s of disorder (within max_delay 2s: none late), every 37th
//	         record malformed
//	phase 2  late records only (they do not move watermarks): some within
//	         allowed_lateness (LATE panes), some beyond it (dropped)
//	phase 3  more bounded-disorder records, then one far-future "flush"
//	         record per partition that closes every data window
type stream struct {
	phases [3][]input
	maxTS  []int64 // per partition, while building
	f1     int64   // the frontier after phase 1: min over partitions of max_ts - max_delay
	users  int
}

func newStream(seed int64, partitions int32, perPartition int) *stream {
	rng := rand.New(rand.NewSource(seed))
	s := &stream{maxTS: make([]int64, partitions), users: 4}
	value := func(user string, ts int64, x int) string {
		return fmt.Sprintf(`{"user":%q,"ts":%d,"x":%d}`, user, ts, x)
	}
	user := func(p int32) string { return fmt.Sprintf("u%d-%d", p, rng.Intn(s.users)) }
	emit := func(phase int, p int32, n, from int) {
		for i := from; i < from+n; i++ {
			ts := base + int64(i)*200 - int64(rng.Intn(1500))
			if ts > s.maxTS[p] {
				s.maxTS[p] = ts
			}
			u := user(p)
			v := value(u, ts, rng.Intn(100))
			if i%37 == 36 {
				v = `{"user":"` + u + `","ts":` // malformed
			}
			s.phases[phase] = append(s.phases[phase], input{partition: p, key: u, value: v})
		}
	}
	for p := int32(0); p < partitions; p++ {
		emit(0, p, perPartition, 0)
	}
	// F after phase 1 is min over partitions of (max_ts - 2000).
	f1 := s.maxTS[0]
	for _, m := range s.maxTS {
		f1 = min(f1, m)
	}
	f1 -= 2000
	s.f1 = f1
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < 3; i++ {
			u := user(p)
			s.phases[1] = append(s.phases[1],
				input{partition: p, key: u, value: value(u, f1-15000-int64(i)*700, 100+i)}, // late, within lateness
				input{partition: p, key: u, value: value(u, f1-90000, 200+i)})              // expired: dropped
		}
	}
	for p := int32(0); p < partitions; p++ {
		emit(2, p, perPartition/2, perPartition)
		s.phases[2] = append(s.phases[2], input{partition: p, key: fmt.Sprintf("flush-%d", p), value: value("flush", base+3600_000, 0)})
	}
	return s
}

func (s *stream) all() []input {
	return append(append(append([]input(nil), s.phases[0]...), s.phases[1]...), s.phases[2]...)
}

// expectedPanes replays the stream and drops the panes of the flush keys
// (replay closes them at end of input; the service never sees their end).
func expectedPanes(t *testing.T, e *env, s *stream) (panes, deadLetters []string, lateDropped int) {
	t.Helper()
	out, errs := runReplay(t, &e.cfg.Pipelines[0], s.all(), int(e.partitions))
	for _, p := range out {
		if !strings.HasPrefix(gjson.Get(p, "key").Str, "flush") {
			panes = append(panes, p)
		}
	}
	for _, l := range errs {
		if strings.HasPrefix(l, `{"dead_letter"`) {
			deadLetters = append(deadLetters, gjson.Get(l, "dead_letter.error").Str)
		}
	}
	return panes, deadLetters, lateDropped
}

// feed produces the stream phase by phase, waiting for the service to have
// consumed each phase before the next.
func feed(t *testing.T, e *env, inst *instance, s *stream) {
	t.Helper()
	total := 0
	for i, ph := range s.phases {
		produce(t, e.in, ph)
		total += len(ph)
		inst.waitRecordsIn(t, total)
		if i == 0 {
			// The frontier must have reached phase 1's end before late records arrive.
			waitFor(t, "frontier after phase 1", 30*time.Second, func() bool {
				v, ok := inst.metric(t, "windowd_frontier_ms")
				return ok && int64(v) >= s.f1
			})
		}
	}
}

func finalCount(panes []string) int {
	n := 0
	for _, p := range panes {
		if gjson.Get(p, "pane.final").Bool() {
			n++
		}
	}
	return n
}

// TestRunMatchesReplay: a 4-partition input with out-of-order, late and
// malformed records; the output topic holds exactly the panes replay
// computes for the same records, the DLQ every malformed record with its
// reason, the late topic every dropped record.
func TestRunMatchesReplay(t *testing.T) {
	parallel(t, 3*time.Second)
	e := newEnv(t, 4, "")
	s := newStream(1, 4, 120)
	want, wantDead, _ := expectedPanes(t, e, s)
	if finalCount(want) < 20 || len(wantDead) == 0 {
		t.Fatalf("test stream too small: %d final panes, %d dead letters", finalCount(want), len(wantDead))
	}
	inst := e.startInProcess()
	feed(t, e, inst, s)

	out := e.reader(e.out)
	out.readUntil(t, "every expected pane", 60*time.Second, func(got []outRecord) bool { return len(got) >= len(want) })
	out.poll(time.Second) // nothing more may arrive
	got := values(out.got)
	if g, w := sorted(got), sorted(want); strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Fatalf("output panes differ from replay: got %d, want %d\n%s", len(g), len(w), diff(g, w))
	}
	// Pane records carry the headers of docs/SEMANTICS.md, Output, in batches of
	// kafka.compression's default codec.
	for _, r := range out.got {
		if r.codec != 3 {
			t.Fatalf("pane record in a batch of codec %d, want 3 (lz4, kafka.compression's default)", r.codec)
		}
		v := gjson.Parse(r.value)
		id := fmt.Sprintf("%s/%d/%d/%d", v.Get("key").Str, v.Get("window.start").Int(), v.Get("window.end").Int(), v.Get("pane.index").Int())
		if r.key != v.Get("key").Str || r.headers["pane_id"] != id || r.headers["timing"] != v.Get("pane.timing").Str ||
			r.headers["final"] != v.Get("pane.final").Raw || r.headers["window_start"] != v.Get("window.start").Raw {
			t.Fatalf("record key/headers do not match its pane: key %q headers %v value %s", r.key, r.headers, r.value)
		}
	}

	dlq := e.reader(e.dlq)
	dlq.readUntil(t, "every dead letter", 30*time.Second, func(got []outRecord) bool { return len(got) >= len(wantDead) })
	dlq.poll(500 * time.Millisecond)
	var gotDead []string
	for _, r := range dlq.got {
		if r.headers["error"] == "" || r.headers["source_topic"] != e.in || r.headers["source_offset"] == "" || !strings.HasPrefix(r.value, `{"user":`) {
			t.Fatalf("dead letter without its reason, source or original bytes: %+v", r)
		}
		gotDead = append(gotDead, r.headers["error"])
	}
	if g, w := sorted(gotDead), sorted(wantDead); strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Fatalf("dead letters differ: got %d, want %d\n%s", len(g), len(w), diff(g, w))
	}

	late := e.reader(e.late)
	wantLate := 3 * int(e.partitions)
	late.readUntil(t, "late records", 30*time.Second, func(got []outRecord) bool { return len(got) >= wantLate })
	late.poll(500 * time.Millisecond)
	if len(late.got) != wantLate {
		t.Fatalf("late topic has %d records, want %d", len(late.got), wantLate)
	}
	if v, _ := inst.metric(t, "windowd_late_dropped_total"); int(v) != wantLate {
		t.Fatalf("windowd_late_dropped_total = %v, want %d", v, wantLate)
	}
	if err := inst.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// TestRunSinglePartitionEveryPane: with one partition and no
// processing-time triggers, every pane matches replay in order. The window
// cache never passes its budget: no eviction is counted.
func TestRunSinglePartitionEveryPane(t *testing.T) {
	parallel(t, 2*time.Second)
	runSinglePartition(t, 0, 0)
}

// TestRunOneWorkerEveryPane: the same with workers: 1, where the poll
// loop decodes every record and writes every pane itself.
func TestRunOneWorkerEveryPane(t *testing.T) {
	parallel(t, 2*time.Second)
	runSinglePartition(t, 0, 1)
}

// TestRunTinyCacheEveryPane: the same with a one-byte window cache, so
// that every record's step flushes and empties the cache and keys are read
// back from Pebble: the panes do not change, and the evictions are counted
// in windowd_cache_evictions_total.
func TestRunTinyCacheEveryPane(t *testing.T) {
	parallel(t, 2*time.Second)
	runSinglePartition(t, 1, 0)
}

// runSinglePartition runs the single-partition pipeline with the cache
// budget cacheBytes (0: the default) and workers (0: unset) against
// replay's panes (default cache, one worker).
func runSinglePartition(t *testing.T, cacheBytes int64, workers int) {
	e := newEnv(t, 1, "")
	s := newStream(2, 1, 150)
	want, _, _ := expectedPanes(t, e, s)
	if cacheBytes > 0 {
		e.cfg.State.CacheBytes = cacheBytes // below config's 1 MiB minimum: set after replay ran
	}
	e.cfg.Pipelines[0].Workers = workers
	inst := e.startInProcess()
	feed(t, e, inst, s)
	out := e.reader(e.out)
	out.readUntil(t, "every expected pane", 60*time.Second, func(got []outRecord) bool { return len(got) >= len(want) })
	out.poll(time.Second)
	if g := values(out.got); strings.Join(g, "\n") != strings.Join(want, "\n") {
		t.Fatalf("output differs from replay (in order): got %d, want %d\n%s", len(g), len(want), diff(g, want))
	}
	evictions, found := inst.metric(t, "windowd_cache_evictions_total", "pipeline", "p")
	if !found || (cacheBytes > 0) != (evictions > 0) {
		t.Fatalf("windowd_cache_evictions_total = %v (found %v) with a cache of %d bytes (0: default)", evictions, found, cacheBytes)
	}
	if _, found := inst.metric(t, "windowd_cache_bytes", "pipeline", "p"); !found {
		t.Fatal("/metrics has no windowd_cache_bytes")
	}
	if err := inst.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// diff lists the lines only one side has (for failure messages).
func diff(got, want []string) string {
	count := map[string]int{}
	for _, g := range got {
		count[g]++
	}
	for _, w := range want {
		count[w]--
	}
	var b strings.Builder
	n := 0
	for line, c := range count {
		if c != 0 && n < 20 {
			fmt.Fprintf(&b, "%+d %s\n", c, line)
			n++
		}
	}
	return b.String()
}
