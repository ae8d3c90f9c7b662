package evolve_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/evolve"
	"github.com/windowd/windowd/expr"
	"github.com/windowd/windowd/windowing"
)

// Each test: a pipeline with a closed and an open window of key a, a stop,
// one change, a start on the same state, more records (docs/OPERATIONS.md,
// Changing a deployed pipeline). Before state described itself, the
// aggregate cases failed with "windowing: corrupt window state" or read
// one aggregate's state as another's, and the lateness case emitted a
// second final pane with the pane id of the first.

// before runs cfg: a@1 (v=2), a@2 (v=4) closed in [0,10) by the frontier
// at 10, and a@12 (v=6) open in [10,20).
func before(t *testing.T, fs vfs.FS, cfg *config.Pipeline, panes *[]pane, drops *int) {
	n, err := start(t, fs, cfg, panes, drops)
	if err != nil {
		t.Fatal(err)
	}
	n.rec("a", 1, 2)
	n.rec("a", 2, 4)
	n.wm(10)
	n.rec("a", 12, 6)
	n.stop()
}

func TestAddAggregateMarksOpenWindowsPartial(t *testing.T) {
	fs := vfs.NewMem()
	var panes []pane
	var drops int
	before(t, fs, tumbling(10, agg("n", windowing.Count)), &panes, &drops)
	n, err := start(t, fs, tumbling(10, agg("n", windowing.Count), agg("s", windowing.Sum)), &panes, &drops)
	if err != nil {
		t.Fatal(err)
	}
	n.rec("a", 13, 10)
	n.rec("a", 25, 1) // a new window: complete
	n.finish()
	got := fmtPanes(finals(panes))
	want := "a/0/10/0 ON_TIME final=true map[n:2] partial=\"\"\n" +
		"a/10/20/0 ON_TIME final=true map[n:2 s:10] partial=\"s\"\n" +
		"a/20/30/0 ON_TIME final=true map[n:1 s:1] partial=\"\"\n"
	if got != want {
		t.Fatalf("final panes:\n%s\nwant:\n%s", got, want)
	}
}

func TestRemoveReorderRenameKeepState(t *testing.T) {
	fs := vfs.NewMem()
	var panes []pane
	var drops int
	before(t, fs, tumbling(10, agg("n", windowing.Count), agg("s", windowing.Sum), agg("m", windowing.Max)), &panes, &drops)
	// m removed, s renamed to total, the order changed.
	n, err := start(t, fs, tumbling(10, agg("total", windowing.Sum), agg("n", windowing.Count)), &panes, &drops)
	if err != nil {
		t.Fatal(err)
	}
	n.rec("a", 13, 10)
	n.finish()
	got := fmtPanes(finals(panes))
	want := "a/0/10/0 ON_TIME final=true map[m:4 n:2 s:6] partial=\"\"\n" +
		"a/10/20/0 ON_TIME final=true map[n:2 total:16] partial=\"\"\n"
	if got != want {
		t.Fatalf("final panes:\n%s\nwant:\n%s", got, want)
	}
}

func TestRefusedChanges(t *testing.T) {
	hop := func(size, hop int64) *config.Pipeline {
		p := tumbling(size, agg("n", windowing.Count))
		p.Spec.Window = windowing.WindowSpec{Kind: windowing.Hopping, Size: size, Hop: hop}
		return p
	}
	for _, c := range []struct {
		name     string
		from, to *config.Pipeline
		mention  string
	}{
		{"op under one name", tumbling(10, agg("s", windowing.Sum)), tumbling(10, agg("s", windowing.Max)), "aggregate s"},
		{"size", tumbling(10, agg("n", windowing.Count)), tumbling(20, agg("n", windowing.Count)), "window"},
		{"hopping to tumbling", hop(10, 5), tumbling(10, agg("n", windowing.Count)), "window"},
		{"hop", hop(10, 5), hop(10, 2), "window"},
		{"tumbling to transaction", tumbling(10, agg("n", windowing.Count)), txn("value.done", agg("n", windowing.Count)), "window"},
		{"close_when", txn("value.done", agg("n", windowing.Count)), txn("value.paid", agg("n", windowing.Count)), "window"},
		{"key", tumbling(10, agg("n", windowing.Count)), func() *config.Pipeline {
			p := tumbling(10, agg("n", windowing.Count))
			p.Key.Field = "user"
			return p
		}(), "key"},
		// The state holds the old topic's offsets: read on the new one,
		// they would skip its records.
		{"input topic", tumbling(10, agg("n", windowing.Count)), func() *config.Pipeline {
			p := tumbling(10, agg("n", windowing.Count))
			p.Input.Topic = "other-events"
			return p
		}(), "input topics"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			var panes []pane
			var drops int
			before(t, fs, c.from, &panes, &drops)
			_, err := start(t, fs, c.to, &panes, &drops)
			if err == nil || !strings.Contains(err.Error(), "incompatible: "+c.mention) || !strings.Contains(err.Error(), "choices") {
				t.Fatalf("start after the change: %v; want a refusal naming %q and the choices", err, c.mention)
			}
			// The old configuration still runs on the state.
			n, err := start(t, fs, c.from, &panes, &drops)
			if err != nil {
				t.Fatal(err)
			}
			n.finish()
		})
	}
}

// txn is a pipeline of transaction windows that close_when closes, with a
// 10 ms timeout.
func txn(closeWhen string, aggs ...windowing.AggSpec) *config.Pipeline {
	p := tumbling(10, aggs...)
	p.Spec.Window = windowing.WindowSpec{Kind: windowing.Transaction, Gap: 10}
	prg, errs := expr.Compile(closeWhen, expr.Bool)
	if errs != nil {
		panic(fmt.Sprint(errs))
	}
	p.CloseWhen = prg
	return p
}

func TestLatenessGrownNeverReopensAClosedWindow(t *testing.T) {
	fs := vfs.NewMem()
	var panes []pane
	var drops int
	before(t, fs, tumbling(10, agg("n", windowing.Count)), &panes, &drops) // L = 0: [0,10) final at 10
	cfg := tumbling(10, agg("n", windowing.Count))
	cfg.Spec.AllowedLateness = 5
	n, err := start(t, fs, cfg, &panes, &drops)
	if err != nil {
		t.Fatal(err)
	}
	n.rec("a", 3, 1) // F = 10 < 10 + 5, but [0,10) expired under L = 0
	n.finish()
	ids := map[string]int{}
	for _, p := range panes {
		ids[p.id]++
		if ids[p.id] > 1 {
			t.Fatalf("pane id %s emitted twice:\n%s", p.id, fmtPanes(panes))
		}
	}
	if drops != 1 {
		t.Fatalf("%d records dropped as late, want 1 (the record for the closed window)", drops)
	}
}

func TestLatenessShrunkClosesAtOnce(t *testing.T) {
	fs := vfs.NewMem()
	var panes []pane
	var drops int
	cfg := tumbling(10, agg("n", windowing.Count))
	cfg.Spec.AllowedLateness = 20
	n, err := start(t, fs, cfg, &panes, &drops)
	if err != nil {
		t.Fatal(err)
	}
	n.rec("a", 1, 1)
	n.wm(12) // [0,10) on time, open until 30
	n.stop()
	cfg2 := tumbling(10, agg("n", windowing.Count))
	n, err = start(t, fs, cfg2, &panes, &drops)
	if err != nil {
		t.Fatal(err)
	}
	n.wm(13) // the next frontier step: [0,10) is past 10 + 0
	var closing []pane
	for _, p := range finals(panes) {
		if strings.HasPrefix(p.id, "a/0/10/") {
			closing = append(closing, p)
		}
	}
	if len(closing) != 1 {
		t.Fatalf("want the closing pane of [0,10) at the first frontier step after the change:\n%s", fmtPanes(panes))
	}
	n.finish()
}

// TestAccumulationChangeBridgesAtNextPane: a window open at a change of
// accumulation mode emits its next pane in the mode it opened under and
// continues in the new one after it (a window without a pane yet takes the
// new mode at once); a discarding window that has emitted a pane stays
// discarding until it closes. Before, every window open at the change kept
// its old mode to the end.
func TestAccumulationChangeBridgesAtNextPane(t *testing.T) {
	for _, c := range []struct {
		from, to windowing.Mode
		want     []string // panes of [10,20) after the change: ~ a retraction
	}{
		// [10,20) had EARLY pane 0 (n=1) before the change; a@13 fires
		// pane 1 (the bridge, in the old mode), the frontier pane 2.
		{windowing.Accumulating, windowing.Discarding, []string{
			"a/10/20/1 accumulating n=2", "a/10/20/2 discarding n=0"}},
		{windowing.Accumulating, windowing.Retracting, []string{
			"a/10/20/1 accumulating n=2", "~a/10/20/1 accumulating n=2", "a/10/20/2 retracting n=2"}},
		{windowing.Retracting, windowing.Accumulating, []string{
			"~a/10/20/0 retracting n=1", "a/10/20/1 retracting n=2", "a/10/20/2 accumulating n=2"}},
		{windowing.Retracting, windowing.Discarding, []string{
			"~a/10/20/0 retracting n=1", "a/10/20/1 retracting n=2", "a/10/20/2 discarding n=0"}},
		{windowing.Discarding, windowing.Accumulating, []string{
			"a/10/20/1 discarding n=1", "a/10/20/2 discarding n=0"}},
	} {
		t.Run(c.from.String()+"-"+c.to.String(), func(t *testing.T) {
			fs := vfs.NewMem()
			var panes []pane
			var drops int
			cfg := tumbling(10, agg("n", windowing.Count))
			cfg.Spec.Trigger.EarlyCount = 1
			cfg.Spec.Mode = c.from
			before(t, fs, cfg, &panes, &drops)
			panes = panes[:0]
			cfg2 := tumbling(10, agg("n", windowing.Count))
			cfg2.Spec.Trigger.EarlyCount = 1
			cfg2.Spec.Mode = c.to
			n, err := start(t, fs, cfg2, &panes, &drops)
			if err != nil {
				t.Fatal(err)
			}
			n.rec("a", 13, 1)
			n.rec("a", 21, 1) // [20,30) opens after the change: the new mode
			n.finish()
			var got []string
			for _, p := range panes {
				id := p.id
				if p.retract {
					id = "~" + id
				}
				if strings.HasPrefix(p.id, "a/10/20/") {
					got = append(got, id+" "+p.mode.String()+" n="+p.values["n"])
				} else if strings.HasPrefix(p.id, "a/20/30/") && p.mode != c.to {
					t.Errorf("pane %s of a window opened after the change is %v, want %v", id, p.mode, c.to)
				}
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Fatalf("panes of [10,20) after the change:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// TestHoppingSlicesGiveWayToTriggerOrMode: hopping windows are computed by
// shared slices while the trigger, mode and aggregates allow it; a change
// that does not (an early trigger, discarding) turns a key's slices into
// its windows' own aggregates when the key is next read. Before, the key
// went to the slicing path with a slice length of 0: integer divide by
// zero in floorMod.
func TestHoppingSlicesGiveWayToTriggerOrMode(t *testing.T) {
	hop := func() *config.Pipeline {
		p := tumbling(10, agg("n", windowing.Count), agg("s", windowing.Sum))
		p.Spec.Window = windowing.WindowSpec{Kind: windowing.Hopping, Size: 10, Hop: 5}
		p.Spec.Trigger.Late = false // sliced: no early or late trigger
		return p
	}
	for _, c := range []struct {
		name string
		edit func(*config.Pipeline)
	}{
		{"early trigger added", func(p *config.Pipeline) { p.Spec.Trigger.EarlyCount = 2 }},
		{"discarding", func(p *config.Pipeline) { p.Spec.Mode = windowing.Discarding }},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			var panes []pane
			var drops int
			n, err := start(t, fs, hop(), &panes, &drops)
			if err != nil {
				t.Fatal(err)
			}
			n.rec("a", 3, 1)
			n.rec("a", 7, 2)
			n.rec("a", 12, 4) // windows [0,10), [5,15), [10,20) open
			n.stop()
			cfg := hop()
			c.edit(cfg)
			if n, err = start(t, fs, cfg, &panes, &drops); err != nil {
				t.Fatal(err)
			}
			n.rec("a", 8, 8)
			n.rec("a", 14, 16)
			n.finish()
			// The last pane of each window: its whole content. None
			// had a pane before the change, so each pane is in the
			// configuration's mode (docs/OPERATIONS.md).
			last := map[string]pane{}
			for _, p := range panes {
				if p.final {
					last[windowOf(p.id)] = p
				}
			}
			want := map[string]string{"a/0/10": "n=3 s=11", "a/5/15": "n=4 s=30", "a/10/20": "n=2 s=20"}
			for w, x := range want {
				p, ok := last[w]
				if !ok {
					t.Fatalf("no final pane of %s:\n%s", w, fmtPanes(panes))
				}
				if got := "n=" + p.values["n"] + " s=" + p.values["s"]; got != x || p.mode != cfg.Spec.Mode {
					t.Errorf("%s: final %s (%v), want %s %v:\n%s", w, got, p.mode, x, cfg.Spec.Mode, fmtPanes(panes))
				}
			}
		})
	}
}

func windowOf(id string) string { return id[:strings.LastIndex(id, "/")] }

// TestInputGrowth: partitions added to the input are applied by rule when
// the count stays a multiple of the count before the first growth (a key
// then stays on its original partition or moves to an added one, whose
// panes carry the partition in their pane id); any other count moves keys
// between the original partitions and is refused.
func TestInputGrowth(t *testing.T) {
	for _, c := range []struct {
		partitions, grewFrom, to int32
		ok                       bool
		idsFrom                  int32
	}{
		{2, 0, 4, true, 2},
		{2, 0, 6, true, 2},
		{2, 0, 3, false, 2},
		{4, 2, 6, true, 2},
		{4, 2, 5, false, 2},
		{4, 0, 2, false, 4},
		{3, 0, 3, true, 3},
	} {
		old := &evolve.Definition{Pipeline: "p", Window: "tumbling 10ms", Key: "field user", Partitions: c.partitions, GrewFrom: c.grewFrom}
		cur := *old
		cur.Partitions, cur.GrewFrom = c.to, 0
		plan := evolve.Compare(old, &cur)
		if plan.Refused() == c.ok {
			t.Errorf("%d (grew from %d) → %d: refused %t, want %t:\n%s", c.partitions, c.grewFrom, c.to, plan.Refused(), !c.ok, plan.Text())
			continue
		}
		if c.ok && plan.Next.PaneIDPartitionsFrom() != c.idsFrom {
			t.Errorf("%d (grew from %d) → %d: pane ids carry partitions from %d, want %d", c.partitions, c.grewFrom, c.to, plan.Next.PaneIDPartitionsFrom(), c.idsFrom)
		}
	}
}

// TestJoinChanges: a join's held records were taken and matched under
// its join: another kind, interval, window or side is refused; its early
// rows and allowed_lateness change as a pane pipeline's trigger and
// lateness do; the same join plans no change.
func TestJoinChanges(t *testing.T) {
	parse := func(join, extra string) *evolve.Definition {
		t.Helper()
		cfg, err := config.Parse("c.yaml", []byte(`pipelines:
  - name: unpaid
    inputs: [{topic: orders}, {topic: payments, as: paid}]
    key: {field: id}
    timestamp: {field: ts}
    repartition: true
    join: `+join+`
    output: {topic: out}
`+extra))
		if err != nil {
			t.Fatal(err)
		}
		return evolve.Of(&cfg.Pipelines[0], 0)
	}
	base := parse("{type: interval, left: orders, right: paid, between: [0s, 15m], kind: left}", "")
	for _, c := range []struct {
		name, join, extra string
		what              string
		class             evolve.Class
	}{
		{"same", "{type: interval, left: orders, right: paid, between: [0s, 15m], kind: left}", "", "", 0},
		{"kind", "{type: interval, left: orders, right: paid, between: [0s, 15m], kind: full}", "", "join", evolve.Incompatible},
		{"interval", "{type: interval, left: orders, right: paid, between: [0s, 30m], kind: left}", "", "join", evolve.Incompatible},
		{"sides", "{type: interval, left: paid, right: orders, between: [0s, 15m], kind: left}", "", "join", evolve.Incompatible},
		{"window join", "{type: window, left: orders, right: paid, kind: left}", "    window: {type: tumbling, size: 15m}\n", "join", evolve.Incompatible},
		{"early", "{type: interval, left: orders, right: paid, between: [0s, 15m], kind: left}", "    trigger: {early: {every: 1m}}\n", "trigger", evolve.Applied},
		{"lateness", "{type: interval, left: orders, right: paid, between: [0s, 15m], kind: left}", "    allowed_lateness: 1m\n", "allowed_lateness", evolve.Rule},
	} {
		t.Run(c.name, func(t *testing.T) {
			plan := evolve.Compare(base, parse(c.join, c.extra))
			if c.what == "" {
				if len(plan.Changes) != 0 {
					t.Fatalf("changes %+v, want none", plan.Changes)
				}
				return
			}
			if len(plan.Changes) != 1 || plan.Changes[0].What != c.what || plan.Changes[0].Class != c.class {
				t.Fatalf("changes %+v, want one %s change, %s", plan.Changes, c.what, c.class)
			}
		})
	}
}

// A processing-time timer armed under early.every fires nothing once the
// configuration drops early.every: the window's panes are the new
// trigger's. Before, the pending timer fired one more EARLY pane after the
// restart.
func TestTriggerEveryRemovedFiresNoPane(t *testing.T) {
	fs := vfs.NewMem()
	var panes []pane
	var drops int
	early := tumbling(10, agg("n", windowing.Count))
	early.Spec.Trigger.EarlyEvery = 50
	n, err := start(t, fs, early, &panes, &drops)
	if err != nil {
		t.Fatal(err)
	}
	n.rec("a", 1, 1) // arms an early timer, due at 50
	n.stop()
	if n, err = start(t, fs, tumbling(10, agg("n", windowing.Count)), &panes, &drops); err != nil {
		t.Fatal(err)
	}
	n.rec("a", 2, 1)
	if err := n.eng.Tick(100); err != nil {
		t.Fatal(err)
	}
	for _, p := range panes {
		if strings.Contains(fmtPanes([]pane{p}), "EARLY") {
			t.Fatalf("an EARLY pane after early.every was removed: %s", fmtPanes([]pane{p}))
		}
	}
	n.finish()
}
