package evolve_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/windowing"
)

// drained is cfg (a new window) draining the tumbling 10 windows that
// before() leaves, until cut.
func drained(cfg *config.Pipeline, cut int64) *config.Pipeline {
	cfg.Drain = &config.Drain{Window: windowing.WindowSpec{Kind: windowing.Tumbling, Size: 10, Hop: 10}, Until: cut}
	return cfg
}

// TestDrainFinishesOldWindows: a window change with a drain (the previous
// window and a cut) is applied: records before the cut go to the previous
// windows, records from the cut on to the new ones; a window spanning the
// cut that only one definition has names its aggregates partial; windows
// both definitions have are one window, complete. Without the drain the
// change is refused (TestRefusedChanges), and before, it mixed old and new
// windows: [10,20) and [0,20) both emitted.
func TestDrainFinishesOldWindows(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  *config.Pipeline
		recs []int64
		want string
	}{
		{"tumbling 10s → 20s at a common boundary", drained(tumbling(20, agg("n", windowing.Count)), 20), []int64{13, 25, 33},
			"a/0/10/0 ON_TIME final=true map[n:2] partial=\"\"\n" +
				"a/10/20/0 ON_TIME final=true map[n:2] partial=\"\"\n" +
				"a/20/40/0 ON_TIME final=true map[n:2] partial=\"\"\n"},
		{"tumbling 10s → tumbling 10s offset 5s, cut inside a new window", drained(offset(tumbling(10, agg("n", windowing.Count)), 5), 20), []int64{13, 17, 22, 27},
			"a/0/10/0 ON_TIME final=true map[n:2] partial=\"\"\n" +
				"a/10/20/0 ON_TIME final=true map[n:3] partial=\"\"\n" +
				"a/15/25/0 ON_TIME final=true map[n:1] partial=\"n\"\n" + // a@17 went to [10,20)
				"a/25/35/0 ON_TIME final=true map[n:1] partial=\"\"\n"},
		{"tumbling 10s → hopping 10s/5s", drained(hopping(10, 5, agg("n", windowing.Count)), 15), []int64{13, 17},
			"a/0/10/0 ON_TIME final=true map[n:2] partial=\"\"\n" +
				"a/10/20/0 ON_TIME final=true map[n:3] partial=\"\"\n" + // both have it: a@12, a@13, a@17
				"a/15/25/0 ON_TIME final=true map[n:1] partial=\"\"\n"}, // it starts at the cut
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			var panes []pane
			var drops int
			before(t, fs, tumbling(10, agg("n", windowing.Count)), &panes, &drops)
			n, err := start(t, fs, c.cfg, &panes, &drops)
			if err != nil {
				t.Fatal(err)
			}
			for _, ts := range c.recs {
				n.rec("a", ts, 1)
			}
			if !n.eng.Draining() {
				t.Error("no drain running before the frontier passed the old windows")
			}
			n.finish()
			if !n.eng.Drained() {
				t.Error("the drain did not finish")
			}
			if got := fmtPanes(finals(panes)); got != c.want {
				t.Fatalf("final panes:\n%s\nwant:\n%s", got, c.want)
			}
			if drops != 0 {
				t.Fatalf("%d records dropped", drops)
			}
		})
	}
}

// TestDrainNeedsItsWindowWhileRunning: a drain runs until the frontier
// passes its last old window; a start without drain in the configuration
// before then is refused (it could not place a late record before the
// cut), one after it is not; a second window change waits for the first
// drain too.
func TestDrainNeedsItsWindowWhileRunning(t *testing.T) {
	fs := vfs.NewMem()
	var panes []pane
	var drops int
	before(t, fs, tumbling(10, agg("n", windowing.Count)), &panes, &drops)
	n, err := start(t, fs, drained(tumbling(20, agg("n", windowing.Count)), 40), &panes, &drops)
	if err != nil {
		t.Fatal(err)
	}
	n.rec("a", 13, 1)
	n.wm(30)
	n.stop()
	if _, err := start(t, fs, tumbling(20, agg("n", windowing.Count)), &panes, &drops); !errors.Is(err, windowing.ErrDrain) || !strings.Contains(err.Error(), "keep drain") {
		t.Fatalf("a start without the drain while it runs: %v, want a refusal to keep drain", err)
	}
	again := drained(tumbling(30, agg("n", windowing.Count)), 60)
	again.Drain.Window = windowing.WindowSpec{Kind: windowing.Tumbling, Size: 20, Hop: 20}
	if _, err := start(t, fs, again, &panes, &drops); !errors.Is(err, windowing.ErrDrain) || !strings.Contains(err.Error(), "previous drain has not finished") {
		t.Fatalf("a second window change while the first drain runs: %v, want a refusal", err)
	}
	if n, err = start(t, fs, drained(tumbling(20, agg("n", windowing.Count)), 40), &panes, &drops); err != nil {
		t.Fatal(err)
	}
	n.wm(40) // the last old window, [30,40), has closed
	n.stop()
	if n, err = start(t, fs, tumbling(20, agg("n", windowing.Count)), &panes, &drops); err != nil {
		t.Fatalf("a start without the drain after it ended: %v", err)
	}
	n.finish()
}

// TestDrainFinishedStaysFinished: a drain that has finished stays
// finished when allowed_lateness grows later: its old windows expired
// under the lateness it ran with and are sealed. Before, the larger
// lateness made them look open again, and the start was refused ("keep
// drain") for as long as the frontier could not move: a crash loop.
func TestDrainFinishedStaysFinished(t *testing.T) {
	fs := vfs.NewMem()
	var panes []pane
	var drops int
	before(t, fs, tumbling(10, agg("n", windowing.Count)), &panes, &drops)
	n, err := start(t, fs, drained(tumbling(20, agg("n", windowing.Count)), 40), &panes, &drops)
	if err != nil {
		t.Fatal(err)
	}
	n.rec("a", 13, 1)
	n.wm(50) // the drain's last old window, [30,40), has closed
	n.stop()
	if n, err = start(t, fs, tumbling(20, agg("n", windowing.Count)), &panes, &drops); err != nil {
		t.Fatalf("a start without the drain after it ended: %v", err)
	}
	n.stop()
	later := tumbling(20, agg("n", windowing.Count))
	later.Spec.AllowedLateness = 30
	if n, err = start(t, fs, later, &panes, &drops); err != nil {
		t.Fatalf("allowed_lateness 0 → 30 after the drain ended: %v", err)
	}
	n.finish()
}

// TestDrainCutAfterRecordsRead: a drain's cut must be after every record
// the state has read: records from the cut on belong to the new windows,
// and those already read sit in windows of the previous definition, which
// a window lookup by start would then share with the new windows'
// records. Before, such a drain was accepted, and with records at 21 and
// 25 read under tumbling 10s, a cut at 20 into tumbling 20s gave one pane
// [20,30) of four records, 33 among them, and no [20,40).
func TestDrainCutAfterRecordsRead(t *testing.T) {
	fs := vfs.NewMem()
	var panes []pane
	var drops int
	n, err := start(t, fs, tumbling(10, agg("n", windowing.Count)), &panes, &drops)
	if err != nil {
		t.Fatal(err)
	}
	n.rec("a", 21, 1)
	n.rec("a", 25, 1)
	n.wm(22)
	n.stop()
	_, err = start(t, fs, drained(tumbling(20, agg("n", windowing.Count)), 20), &panes, &drops)
	if !errors.Is(err, windowing.ErrDrain) || !strings.Contains(err.Error(), "not after every record already read") {
		t.Fatalf("a drain cut at 20 after a record at 25 was read: %v, want a refusal", err)
	}
	if n, err = start(t, fs, drained(tumbling(20, agg("n", windowing.Count)), 40), &panes, &drops); err != nil {
		t.Fatalf("a drain cut at 40: %v", err)
	}
	n.rec("a", 27, 1)
	n.rec("a", 43, 1)
	n.finish()
	want := "a/20/30/0 ON_TIME final=true map[n:3] partial=\"\"\n" +
		"a/40/60/0 ON_TIME final=true map[n:1] partial=\"\"\n"
	if got := fmtPanes(finals(panes)); got != want {
		t.Fatalf("final panes:\n%s\nwant:\n%s", got, want)
	}
}

func hopping(size, hop int64, aggs ...windowing.AggSpec) *config.Pipeline {
	p := tumbling(size, aggs...)
	p.Spec.Window = windowing.WindowSpec{Kind: windowing.Hopping, Size: size, Hop: hop}
	return p
}

func offset(p *config.Pipeline, off int64) *config.Pipeline {
	p.Spec.Window.Offset = off
	return p
}
