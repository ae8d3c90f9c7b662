package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// TestRunExpressionsMatchReplay: a pipeline with a filter, a key
// expression and an expression sum (docs/SEMANTICS.md, Expressions) gives
// in run what it gives in replay: the same panes, the same dead letters
// with their reasons, and the filtered records counted, not dead-lettered;
// repartitioned too, where stage 1 applies the filter and the key.
func TestRunExpressionsMatchReplay(t *testing.T) {
	parallel(t, 10*time.Second)
	t.Run("direct", func(t *testing.T) { runExpressions(t, false) })
	t.Run("repartition", func(t *testing.T) { runExpressions(t, true) })
}

func runExpressions(t *testing.T, repartition bool) {
	e := newEnv(t, 2, "")
	edits := map[string]string{
		"    key: {field: user}\n":                   "    filter: 'value.user == \"flush\" || value.x >= 20'\n    key: {expr: 'value.user'}\n",
		"      - {name: total, op: sum, field: x}\n": "      - {name: total, op: sum, expr: 'value.x * 2.0'}\n",
	}
	if repartition {
		edits["    commit_interval: 200ms\n"] = "    commit_interval: 200ms\n    repartition: true\n"
	}
	e.editConfig(edits)

	s := newStream(7, 2, 300)
	s.phases[1] = nil // records within the bound only: the frontier does not depend on interleaving
	// A record whose x is a string: the filter cannot compare it.
	s.phases[0] = append(s.phases[0], input{partition: 0, key: "u0-0", value: `{"user":"u0-0","ts":` + gjson.Get(s.phases[0][0].value, "ts").Raw + `,"x":"7"}`})
	filtered := 0
	for _, in := range s.all() {
		v := gjson.Parse(in.value)
		if gjson.Valid(in.value) && v.Get("user").Str != "flush" && v.Get("x").Type == gjson.Number && v.Get("x").Num < 20 {
			filtered++
		}
	}
	want, wantDead, _ := expectedPanes(t, e, s)
	if finalCount(want) < 10 || filtered == 0 {
		t.Fatalf("test stream too small: %d final panes, %d filtered", finalCount(want), filtered)
	}
	found := false
	for _, d := range wantDead {
		found = found || d == "filter: no such overload"
	}
	if !found {
		t.Fatalf("replay did not dead-letter the record the filter cannot evaluate: %v", wantDead)
	}

	inst := e.startInProcess()
	total := 0
	for _, ph := range s.phases {
		produce(t, e.in, ph)
		total += len(ph)
	}
	if repartition {
		// Stage 2 counts what stage 1 wrote: neither filtered records
		// nor dead letters.
		inst.waitRecordsIn(t, total-filtered-len(wantDead))
	} else {
		inst.waitRecordsIn(t, total)
	}

	out := e.reader(e.out)
	if repartition {
		// Stage 2 sees the input partitions' records in another order
		// than replay, so early and late panes differ; the final ones
		// do not (docs/SEMANTICS.md, Repartitioning).
		want = finalContents(want)
		out.readUntil(t, "every final pane", 60*time.Second, func(got []outRecord) bool {
			return len(finalContents(values(got))) >= len(want)
		})
		out.poll(time.Second)
		if g, w := sorted(finalContents(values(out.got))), sorted(want); strings.Join(g, "\n") != strings.Join(w, "\n") {
			t.Fatalf("final panes differ from replay: got %d, want %d\n%s", len(g), len(w), diff(g, w))
		}
	} else {
		out.readUntil(t, "every expected pane", 60*time.Second, func(got []outRecord) bool { return len(got) >= len(want) })
		out.poll(time.Second)
		if g, w := sorted(values(out.got)), sorted(want); strings.Join(g, "\n") != strings.Join(w, "\n") {
			t.Fatalf("output panes differ from replay: got %d, want %d\n%s", len(g), len(w), diff(g, w))
		}
	}
	dlq := e.reader(e.dlq)
	dlq.readUntil(t, "every dead letter", 30*time.Second, func(got []outRecord) bool { return len(got) >= len(wantDead) })
	dlq.poll(500 * time.Millisecond)
	var gotDead []string
	for _, r := range dlq.got {
		gotDead = append(gotDead, r.headers["error"])
	}
	if g, w := sorted(gotDead), sorted(wantDead); strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Fatalf("dead letters differ: got %d, want %d\n%s", len(g), len(w), diff(g, w))
	}
	if v, _ := inst.metric(t, "windowd_filtered_total"); int(v) != filtered {
		t.Fatalf("windowd_filtered_total = %v, want %d", v, filtered)
	}
	if err := inst.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// finalContents are the key, window and aggregates of the final panes.
func finalContents(panes []string) []string {
	var out []string
	for _, p := range panes {
		v := gjson.Parse(p)
		if v.Get("pane.final").Bool() {
			out = append(out, v.Get("key").Str+" "+v.Get("window").Raw+" "+v.Get("aggregates").Raw)
		}
	}
	return out
}
