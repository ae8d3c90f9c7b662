package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// quietStream: two partitions, keys u0..u3, event times up to
// base+59999, the last instant of the window [50000,60000), out of order
// within jitter ms.
func quietStream(n int, jitter int64) []input {
	var recs []input
	for i := 0; i < n; i++ {
		ts := base + int64(i)*59999/int64(n-1)
		if i%3 == 1 && i < n-1 {
			ts -= jitter
		}
		u := fmt.Sprintf("u%d", i%4)
		recs = append(recs, input{partition: int32(i % 2), key: u, value: fmt.Sprintf(`{"user":%q,"ts":%d,"x":%d}`, u, ts, i%10)})
	}
	return recs
}

// quietEnv is a pipeline with quiet_advance, idle_timeout 2s,
// allowed_lateness 0s (no late trigger then) and maxDelay.
func quietEnv(t *testing.T, maxDelay string) *env {
	e := newEnv(t, 2, ", idle_timeout: 2s, quiet_advance: true")
	e.editConfig(map[string]string{"allowed_lateness: 30s": "allowed_lateness: 0s", "      late: {every: 0s}\n": "",
		"max_delay: 2s": "max_delay: " + maxDelay})
	return e
}

// finalPanes are the values of the final panes among recs (or among
// replay's lines), without the quiet flag, sorted; quiet counts the final
// panes marked quiet.
func finalPanes(values []string) (finals []string, quiet int) {
	for _, v := range values {
		if !gjson.Get(v, "pane.final").Bool() {
			continue
		}
		if gjson.Get(v, "pane.quiet").Bool() {
			quiet++
		}
		finals = append(finals, strings.Replace(v, `,"quiet":true`, "", 1))
	}
	slices.Sort(finals)
	return finals, quiet
}

// TestQuietInput (docs/SEMANTICS.md, Quiet inputs): a topic that goes
// silent gets every final pane within idle_timeout + 2 s, marked quiet
// where the quiet advance closed the window; a backlog read from the start
// closes no window early. Both with allowed_lateness 0s: nothing is dropped
// as late, and the final panes equal replay's.
func TestQuietInput(t *testing.T) {
	parallel(t, 10*time.Second)
	t.Run("silent topic", func(t *testing.T) {
		t.Parallel()
		// In order, max_delay 0s: the watermark reaches the last instant
		// of the last window, which the quiet advance then closes at once.
		e := quietEnv(t, "0s")
		inst := e.startInProcess()
		waitFor(t, "both partitions assigned", 30*time.Second, func() bool {
			v, _ := inst.metric(t, "windowd_assigned_partitions")
			return v == 2
		})
		recs := quietStream(400, 0)
		produce(t, e.in, recs)
		silent := time.Now()
		want, _ := runReplay(t, &e.cfg.Pipelines[0], recs, 2)
		wantFinal, _ := finalPanes(want)
		out := e.reader(e.out)
		out.readUntil(t, "every final pane", 30*time.Second, func(got []outRecord) bool {
			f, _ := finalPanes(values(got))
			return len(f) >= len(wantFinal)
		})
		took := time.Since(silent)
		t.Logf("the last final pane came %s after the input went silent", took)
		gotFinal, quiet := finalPanes(values(out.got))
		if !slices.Equal(gotFinal, wantFinal) {
			t.Fatalf("final panes differ from replay's:\ngot  %q\nwant %q", gotFinal, wantFinal)
		}
		if quiet == 0 {
			t.Fatal("no final pane is marked quiet: the last windows closed some other way")
		}
		for _, r := range out.got {
			if gjson.Get(r.value, "pane.quiet").Bool() != (r.headers["quiet"] == "true") {
				t.Fatalf("pane and header disagree on quiet: %s %v", r.value, r.headers)
			}
		}
		if limit := 2*time.Second + 2*time.Second; took > limit {
			t.Fatalf("the last final pane came %s after the input went silent, want within idle_timeout + 2 s = %s", took, limit)
		}
		// The metrics and the status snapshot are updated by the poll
		// loop after its step (the pane writer may produce the panes
		// before): they follow within a poll or two.
		waitFor(t, "windowd_quiet_advances_total > 0", 5*time.Second, func() bool {
			v, _ := inst.metric(t, "windowd_quiet_advances_total")
			return v > 0
		})
		waitFor(t, "/api/status showing the pipeline as quiet", 5*time.Second, func() bool {
			_, body := httpGet(t, "http://"+inst.httpAddr+"/api/status")
			return gjson.Get(body, "pipelines.0.quiet").Bool()
		})
		e.expectNothingLate(inst)
		if err := inst.stop(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("backlog from the start", func(t *testing.T) {
		t.Parallel()
		e := quietEnv(t, "2s")
		recs := quietStream(20000, 1500)
		produce(t, e.in, recs)
		want, _ := runReplay(t, &e.cfg.Pipelines[0], recs, 2)
		wantFinal, _ := finalPanes(want)
		inst := e.startInProcess()
		out := e.reader(e.out)
		out.readUntil(t, "every final pane", 60*time.Second, func(got []outRecord) bool {
			f, _ := finalPanes(values(got))
			return len(f) >= len(wantFinal)
		})
		gotFinal, _ := finalPanes(values(out.got))
		if !slices.Equal(gotFinal, wantFinal) {
			t.Fatalf("final panes differ from replay's:\ngot  %q\nwant %q", gotFinal, wantFinal)
		}
		e.expectNothingLate(inst)
		if err := inst.stop(); err != nil {
			t.Fatal(err)
		}
	})
}
