package integration

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// TestDrainOnRestart (docs/OPERATIONS.md, Draining): windowd runs tumbling
// 10s windows and stops (SIGTERM) with windows open; it starts on the same
// state with tumbling 20s windows and a drain of the 10s windows until a
// cut after the last record read. Every record before the cut is in the 10s
// windows and every later one in the 20s windows: each window's final pane
// is present once and equals a replay of its definition over its side of
// the cut, and nothing is dropped as late (allowed_lateness 0s). Without
// the drain the start is refused (TestResetAfterRefusedChange).
func TestDrainOnRestart(t *testing.T) {
	eachStateDir(t, 6*time.Second, drainOnRestart)
}

func drainOnRestart(t *testing.T, keepDir bool) {
	e, halves := evolveEnv(t, 11, 80)
	runAndStop(t, e, halves[0])
	if !keepDir {
		removeStateDir(t, e.stateDir)
	}

	old := e.cfg.Pipelines[0] // tumbling 10s
	cut := base + 40_000      // the first half ends before it; a boundary of both windows
	e.editConfig(map[string]string{
		"    window: {type: tumbling, size: 10s}\n": "    window: {type: tumbling, size: 20s}\n" +
			"    drain: {window: {type: tumbling, size: 10s}, until: \"" + time.UnixMilli(cut).UTC().Format(time.RFC3339) + "\"}\n",
	})
	b := e.startProcess()
	logTroubles(t, map[*instance]string{b: "windowd (restarted)"})
	flush := flushRecords(e.partitions)
	produce(t, e.in, append(append([]input(nil), halves[1]...), flush...))
	e.waitCommitted(t, 60*time.Second)

	var before, after []input
	for _, r := range append(append([]input(nil), halves[0]...), halves[1]...) {
		if gjson.Get(r.value, "ts").Int() < cut {
			before = append(before, r)
		} else {
			after = append(after, r)
		}
	}
	if len(before) == 0 || len(after) == 0 || len(before) < len(halves[0]) {
		t.Fatalf("%d records before the cut, %d after: the stream does not span it", len(before), len(after))
	}
	old.Drain = nil
	want := finalsByIDOf(t, e, &old, append(before, flush...))
	for w, p := range finalsByID(t, e, append(after, flush...)) {
		want[w] = p
	}
	out := e.reader(e.out)
	got := map[string]string{}
	for deadline := time.Now().Add(60 * time.Second); len(got) < len(want); out.poll(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 60s, %d of %d final panes\n%s", len(got), len(want), stderrTail(b, 30))
		}
		for _, r := range out.got {
			if strings.HasPrefix(r.key, "flush") || !gjson.Get(r.value, "pane.final").Bool() {
				continue
			}
			w := windowOf(r.headers["pane_id"])
			if prev, ok := got[w]; ok && prev != r.value {
				t.Fatalf("window %s has two final panes:\n%s\n%s", w, prev, r.value)
			}
			got[w] = r.value
		}
	}
	for w, v := range got {
		x, ok := want[w]
		if !ok {
			t.Errorf("final pane %s is not a window of either definition's replay", v)
			continue
		}
		if g, r := gjson.Get(v, "aggregates").Raw, gjson.Get(x, "aggregates").Raw; g != r {
			t.Errorf("%s: %s, replay %s", w, g, r)
		}
		if gjson.Get(v, "partial").Exists() {
			t.Errorf("%s: partial at a cut on a boundary of both windows: %s", w, v)
		}
	}
	if late, _ := b.metric(t, "windowd_late_dropped_total"); late != 0 {
		t.Errorf("%.0f records dropped as late", late)
	}
	for _, s := range []string{"compatible, by rule: window", "drain finished"} {
		if !strings.Contains(b.stderr.String(), s) {
			t.Errorf("the start did not log %q:\n%s", s, stderrTail(b, 20))
		}
	}
	_ = b.signal(t, syscall.SIGTERM)
}
