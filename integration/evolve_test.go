package integration

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/service"
)

// TestConfigChangeOnRestart (docs/OPERATIONS.md, Changing a deployed
// pipeline): windowd runs with aggregates n (count) and total (sum), stops
// (SIGTERM) with windows open, and starts on the same state (or, deleted,
// restored from the changelog) with total renamed sum_x, the order changed
// and max hi added. Every window's final pane is present once; n and sum_x
// equal a replay of the new configuration over every record; hi is marked
// partial exactly where it covers only the records since the change, and
// then equals their max. Before state described itself, the start failed
// ("windowing: corrupt window state") at the first open window.
func TestConfigChangeOnRestart(t *testing.T) {
	eachStateDir(t, 6*time.Second, func(t *testing.T, keepDir bool) {
		e, halves := evolveEnv(t, 5, 120)
		flush := flushRecords(e.partitions)

		a := e.startProcess()
		produce(t, e.in, halves[0])
		a.waitRecordsIn(t, len(halves[0]))
		e.waitCommitted(t, 60*time.Second)
		if err := a.signal(t, syscall.SIGTERM); err != nil {
			t.Fatalf("after SIGTERM: %v", err)
		}
		if !keepDir {
			removeStateDir(t, e.stateDir)
		}
		e.waitGroupEmpty(t, 30*time.Second)
		e.editConfig(map[string]string{
			"      - {name: n, op: count}\n      - {name: total, op: sum, field: x}\n": "      - {name: hi, op: max, field: x}\n      - {name: sum_x, op: sum, field: x}\n      - {name: n, op: count}\n",
		})
		b := e.startProcess()
		produce(t, e.in, append(append([]input(nil), halves[1]...), flush...))
		e.waitCommitted(t, 60*time.Second)

		all := append(append([]input(nil), halves[0]...), halves[1]...)
		wantAll := finalsByID(t, e, append(all, flush...))
		wantAfter := finalsByID(t, e, append(append([]input(nil), halves[1]...), flush...))
		out := e.reader(e.out)
		got := map[string]string{}
		for deadline := time.Now().Add(60 * time.Second); len(got) < len(wantAll); out.poll(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				var missing []string
				for w := range wantAll {
					found := false
					for id := range got {
						found = found || windowOf(id) == w
					}
					if !found {
						missing = append(missing, w)
					}
				}
				t.Fatalf("after 60s, %d of %d final panes; missing %v\n%s", len(got), len(wantAll), missing, stderrTail(b, 30))
			}
			for _, r := range out.got {
				if strings.HasPrefix(r.key, "flush") || !gjson.Get(r.value, "pane.final").Bool() {
					continue
				}
				id := r.headers["pane_id"]
				if prev, ok := got[id]; ok && prev != r.value {
					t.Fatalf("pane id %s twice with different content:\n%s\n%s", id, prev, r.value)
				}
				got[id] = r.value
			}
		}
		partials := 0
		for id, v := range got {
			w, ok := wantAll[windowOf(id)]
			if !ok {
				t.Fatalf("final pane %s not in replay", v)
			}
			if !gjson.Get(v, "aggregates.hi").Exists() {
				// Emitted before the change, under the old names.
				if g, x := gjson.Get(v, "aggregates.n").Raw+" "+gjson.Get(v, "aggregates.total").Raw, gjson.Get(w, "aggregates.n").Raw+" "+gjson.Get(w, "aggregates.sum_x").Raw; g != x {
					t.Errorf("%s: n, total = %s, replay of every record %s", id, g, x)
				}
				continue
			}
			for _, name := range []string{"n", "sum_x"} {
				if g, x := gjson.Get(v, "aggregates."+name).Raw, gjson.Get(w, "aggregates."+name).Raw; g != x {
					t.Errorf("%s: %s = %s, replay of every record %s", id, name, g, x)
				}
			}
			hi := gjson.Get(v, "aggregates.hi").Raw
			if p := gjson.Get(v, "partial").Raw; p != "" {
				partials++
				if p != `["hi"]` {
					t.Errorf("%s: partial %s, want [\"hi\"]", id, p)
				}
				x := "null" // no record since the change
				if a, ok := wantAfter[windowOf(id)]; ok {
					x = gjson.Get(a, "aggregates.hi").Raw
				}
				if hi != x {
					t.Errorf("%s: partial hi = %s, want the max since the change %s", id, hi, x)
				}
			} else if x := gjson.Get(w, "aggregates.hi").Raw; hi != x {
				t.Errorf("%s: hi = %s, replay of every record %s (a window open at the change must say partial)", id, hi, x)
			}
		}
		if partials == 0 {
			t.Fatalf("no pane marked partial: the test stream left no window open at the change")
		}
		if !strings.Contains(b.stderr.String(), "applying") && keepDir {
			t.Errorf("the start did not log its plan:\n%s", stderrTail(b, 20))
		}
		// Without the directory, each partition's restore adopts the
		// changelog's definition: the plan, the same for all, is logged once.
		if n := strings.Count(b.stderr.String(), "since the restored state was written"); !keepDir && n != 1 {
			t.Errorf("the restores logged the changed configuration %d times over %d partitions, want once:\n%s", n, e.partitions, stderrTail(b, 20))
		}
		t.Logf("%d final panes, %d partial", len(got), partials)
		_ = b.signal(t, syscall.SIGTERM)
	})
}

// finalsByID replays recs under e's configuration and returns each final
// pane by its window (key/start/end), flush windows left out.
func finalsByID(t *testing.T, e *env, recs []input) map[string]string {
	t.Helper()
	return finalsByIDOf(t, e, &e.cfg.Pipelines[0], recs)
}

// finalsByIDOf is finalsByID under pipeline p.
func finalsByIDOf(t *testing.T, e *env, p *config.Pipeline, recs []input) map[string]string {
	t.Helper()
	panes, _ := runReplay(t, p, recs, int(e.partitions))
	out := map[string]string{}
	for _, p := range panes {
		if !gjson.Get(p, "pane.final").Bool() || strings.HasPrefix(gjson.Get(p, "key").Str, "flush") {
			continue
		}
		out[fmt.Sprintf("%s/%d/%d", gjson.Get(p, "key").Str, gjson.Get(p, "window.start").Int(), gjson.Get(p, "window.end").Int())] = p
	}
	return out
}

// windowOf is the window part of a pane id.
func windowOf(id string) string { return id[:strings.LastIndex(id, "/")] }

// TestRefusedOnRestart (docs/OPERATIONS.md, Changing a deployed pipeline):
// after a run that left windows open, a start with the input grown while
// stopped to a count that is not a multiple of the old one (keys move
// between the old partitions), with another input topic, or with the
// pipeline renamed and its group kept, is refused with the change named; the previous configuration still
// starts.
func TestRefusedOnRestart(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(t *testing.T, e *env)
		want   string
	}{
		{"input grew while stopped", func(t *testing.T, e *env) {
			addPartitions(t, e.in, 1)
		}, "incompatible: input partitions: 2 → 3: the input grew from 2 to 3 partitions, not a multiple of 2"},
		{"input grew while stopped, state dir deleted", func(t *testing.T, e *env) {
			removeStateDir(t, e.stateDir)
			addPartitions(t, e.in, 1)
		}, "incompatible: input partitions: 2 → 3: the input grew from 2 to 3 partitions, not a multiple of 2"},
		// The state holds the old topic's offsets: on the new topic they
		// would skip records.
		{"input topic changed, group kept", func(t *testing.T, e *env) {
			other := uniqueName(t, "other")
			createTopic(t, other, e.partitions)
			e.editConfig(map[string]string{"{topic: " + e.in + ",": "{topic: " + other + ","})
		}, "incompatible: input topics: "},
		{"pipeline renamed, group kept", func(t *testing.T, e *env) {
			e.editConfig(map[string]string{"  - name: p\n": "  - name: q\n"})
		}, "was the pipeline renamed with its group kept"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if os.Getenv("WINDOWD_KAFKA_BROKERS") == "" && strings.HasPrefix(c.name, "input") {
				t.Skip("needs a real broker (WINDOWD_KAFKA_BROKERS): partitions added to a topic")
			}
			parallel(t, 3*time.Second)
			e := newEnv(t, 2, "")
			var recs []input
			for p := int32(0); p < e.partitions; p++ {
				u := fmt.Sprintf("u%d", p)
				recs = append(recs, input{partition: p, key: u, value: fmt.Sprintf(`{"user":%q,"ts":%d,"x":1}`, u, base)})
			}
			a := e.startInProcess()
			produce(t, e.in, recs)
			a.waitRecordsIn(t, len(recs))
			e.waitCommitted(t, 60*time.Second)
			if err := a.stop(); err != nil {
				t.Fatal(err)
			}
			orig := readFile(t, e.cfgPath)
			c.change(t, e)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			err := service.Run(ctx, e.cfg, service.Options{Log: zap.NewNop()})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "hoices") {
				t.Fatalf("start after the change: %v; want a refusal with %q and the choices", err, c.want)
			}
			if strings.HasPrefix(c.name, "pipeline") {
				writeFile(t, e.cfgPath, orig)
				e.editConfig(map[string]string{})
				b := e.startInProcess()
				produce(t, e.in, flushRecords(e.partitions))
				e.waitCommitted(t, 60*time.Second)
				if err := b.stop(); err != nil {
					t.Fatalf("the previous configuration: %v", err)
				}
			}
		})
	}
}

// TestResetAfterRefusedChange: a window change is refused; `windowd reset
// --to earliest` (the group stopped) deletes the changelog and the local
// state and moves the group's offsets to the start; the changed pipeline
// then computes every window of the input under the new definition, with
// nothing of the old state in its panes.
func TestResetAfterRefusedChange(t *testing.T) {
	parallel(t, 5*time.Second)
	e, halves := evolveEnv(t, 9, 80)
	runAndStop(t, e, halves[0])

	out2 := uniqueName(t, "out2")
	e.editConfig(map[string]string{
		"    window: {type: tumbling, size: 10s}\n": "    window: {type: tumbling, size: 20s}\n",
		"    output: {topic: " + e.out + "}\n":      "    output: {topic: " + out2 + "}\n",
	})
	e.out = out2
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := service.Run(ctx, e.cfg, service.Options{Log: zap.NewNop()}); err == nil || !strings.Contains(err.Error(), "incompatible: window") {
		t.Fatalf("start with the window resized: %v; want a refusal naming the window", err)
	}
	out, err := exec.Command(windowdBinary(t), "reset", "--config", e.cfgPath, "--to", "earliest").CombinedOutput()
	if err != nil {
		t.Fatalf("windowd reset: %v\n%s", err, out)
	}

	b := e.startProcess()
	flush := flushRecords(e.partitions)
	produce(t, e.in, append(append([]input(nil), halves[1]...), flush...))
	e.waitCommitted(t, 60*time.Second)
	all := append(append(append([]input(nil), halves[0]...), halves[1]...), flush...)
	panes, errs := runReplay(t, &e.cfg.Pipelines[0], all, int(e.partitions))
	if len(errs) > 0 {
		t.Fatalf("replay: %v", errs)
	}
	var want []string
	for _, p := range panes {
		if !strings.HasPrefix(gjson.Get(p, "key").Str, "flush") {
			want = append(want, p)
		}
	}
	checkAgainstReplay(t, e, want)
	_ = b.signal(t, syscall.SIGTERM)
}

// evolveEnv is a two-partition pipeline with allowed_lateness 0s and no
// late firing, and its input in two halves: perPart records per partition
// in event-time order over keys u<p>-0..2, from the random source seed.
func evolveEnv(t *testing.T, seed int64, perPart int) (*env, [2][]input) {
	e := newEnv(t, 2, "")
	e.zeroLateness("")
	rng := rand.New(rand.NewSource(seed))
	var halves [2][]input
	for p := int32(0); p < e.partitions; p++ {
		for i := 0; i < perPart; i++ {
			u := fmt.Sprintf("u%d-%d", p, rng.Intn(3))
			ts := base + int64(i)*1000 + int64(rng.Intn(900))
			halves[i*2/perPart] = append(halves[i*2/perPart], input{partition: p, key: u, value: fmt.Sprintf(`{"user":%q,"ts":%d,"x":%d}`, u, ts, rng.Intn(100))})
		}
	}
	return e, halves
}

// runAndStop runs windowd over recs until they are committed and stops it
// (SIGTERM) with its windows open, the group left empty.
func runAndStop(t *testing.T, e *env, recs []input) {
	t.Helper()
	a := e.startProcess()
	produce(t, e.in, recs)
	a.waitRecordsIn(t, len(recs))
	e.waitCommitted(t, 60*time.Second)
	if err := a.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("after SIGTERM: %v", err)
	}
	e.waitGroupEmpty(t, 30*time.Second)
}

// finalsByWindow reads out until enough holds of what it has read, or d
// has passed, and returns the final panes by window: key/start/end, with
// the pane id's @partition when it has one; each as its pane id and its
// aggregates object, space-separated (finalAggregate reads one).
func finalsByWindow(out *topicReader, d time.Duration, enough func(map[string][]string) bool) map[string][]string {
	var finals map[string][]string
	for deadline := time.Now().Add(d); ; {
		out.poll(500 * time.Millisecond)
		finals = map[string][]string{}
		for _, r := range out.got {
			if id := r.headers["pane_id"]; gjson.Get(r.value, "pane.final").Bool() {
				w := windowOf(id)
				if at := strings.IndexByte(id, '@'); at >= 0 {
					w += id[at:]
				}
				finals[w] = append(finals[w], id+" "+gjson.Get(r.value, "aggregates").Raw)
			}
		}
		if enough(finals) || time.Now().After(deadline) {
			return finals
		}
	}
}

// finalAggregate is aggregate name of a final pane of finalsByWindow.
func finalAggregate(pane, name string) int64 {
	return gjson.Get(pane[strings.IndexByte(pane, ' ')+1:], name).Int()
}

// repeatedFinals lists each window of finalsByWindow with more than one
// final pane.
func repeatedFinals(finals map[string][]string) []string {
	var out []string
	for w, panes := range finals {
		if len(panes) > 1 {
			out = append(out, fmt.Sprintf("window %s has %d final panes: %v", w, len(panes), panes))
		}
	}
	return out
}

// TestLatenessRaisedStateRestored (docs/OPERATIONS.md, Changing a deployed
// pipeline): allowed_lateness goes from 0s to 30s across a restart whose
// state comes only from the changelog (the state directory deleted, as on
// a pod without a volume). As on a start on the state directory, windows
// that had expired at the old frontier stay closed (their late records
// go to the late topic), and an open window takes the new lateness. Before,
// the restore kept neither: a late record reopened a closed window, and an
// open one closed on its old deadline and reopened for a record within
// the new lateness, each emitting a second final pane.
//
// Under exactly_once every other of the first transactions aborts: the
// rollback's new engine must keep what the restore sealed.
func TestLatenessRaisedStateRestored(t *testing.T) {
	for _, delivery := range []string{"at_least_once", "exactly_once"} {
		t.Run(delivery, func(t *testing.T) {
			parallel(t, 3*time.Second)
			latenessRaisedRestored(t, delivery)
		})
	}
}

func latenessRaisedRestored(t *testing.T, delivery string) {
	e, _ := evolveEnv(t, 1, 0)
	e.editConfig(map[string]string{"    commit_interval: 200ms\n": "    commit_interval: 200ms\n    delivery: " + delivery + "\n"})
	at := func(p int32, sec float64) input {
		k := fmt.Sprintf("k%d", p)
		return input{partition: p, key: k, value: fmt.Sprintf(`{"user":%q,"ts":%d,"x":1}`, k, base+int64(sec*1000))}
	}
	var first []input
	for p := int32(0); p < e.partitions; p++ {
		for s := 0; s <= 58; s++ {
			first = append(first, at(p, float64(s)))
		}
	}
	// Frontier 56 s (max_delay 2 s): windows up to [40 s, 50 s) final,
	// [50 s, 60 s) open with nine records.
	runAndStop(t, e, first)
	removeStateDir(t, e.stateDir)
	e.editConfig(map[string]string{"    allowed_lateness: 0s\n": "    allowed_lateness: 30s\n"})
	var b *instance
	var calls, aborts atomic.Int64
	tail := func() string { return stderrTail(b, 20) }
	if delivery == "exactly_once" {
		b = e.startInProcessWith(service.Faults{AbortTxn: abortEveryOther(20, &calls, &aborts)})
		tail = func() string { return fmt.Sprintf("the service: %v", b.stop()) }
	} else {
		b = e.startProcess()
	}
	var second []input
	for p := int32(0); p < e.partitions; p++ {
		second = append(second, at(p, 45), at(p, 55.5), at(p, 70), at(p, 72), at(p, 57))
	}
	produce(t, e.in, append(second, flushRecords(e.partitions)...))
	e.waitCommitted(t, 60*time.Second)

	keyed := func(finals map[string][]string) int { // windows of the keys k<p>, not of the flush records
		n := 0
		for w := range finals {
			if !strings.HasPrefix(w, "flush") {
				n++
			}
		}
		return n
	}
	finals := finalsByWindow(e.reader(e.out), 30*time.Second, func(f map[string][]string) bool { return keyed(f) >= 14 }) // 7 windows of each key
	late := e.reader(e.late)
	late.poll(2 * time.Second)
	problems := repeatedFinals(finals)
	for p := int32(0); p < e.partitions; p++ {
		w := fmt.Sprintf("k%d/%d/%d", p, base+50_000, base+60_000)
		if panes := finals[w]; len(panes) != 1 || finalAggregate(panes[0], "n") != 11 {
			problems = append(problems, fmt.Sprintf("%s: final %v, want n 11 (nine records, then 55.5 s and 57 s within the new lateness)", w, panes))
		}
	}
	lateTS := 0
	for _, r := range late.got {
		if gjson.Get(r.value, "ts").Int() == base+45_000 {
			lateTS++
		}
	}
	if lateTS != int(e.partitions) {
		problems = append(problems, fmt.Sprintf("%d records of 45 s in the late topic, want %d (their windows had closed under 0s)", lateTS, e.partitions))
	}
	if delivery == "exactly_once" && aborts.Load() == 0 {
		problems = append(problems, "no transaction aborted: the rollback path was not reached")
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		t.Fatalf("%s\n%s", strings.Join(problems, "\n"), tail())
	}
	t.Logf("%d windows with a final pane, %d records in the late topic, %d of %d transactions aborted", keyed(finals), len(late.got), aborts.Load(), calls.Load())
	if delivery == "exactly_once" {
		if err := b.stop(); err != nil {
			t.Fatalf("the service: %v", err)
		}
		return
	}
	_ = b.signal(t, syscall.SIGTERM)
}
