package windowing_test

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// timerCounter is a windowing.Store that counts the timers the engine
// adds and deletes.
type timerCounter struct {
	*state.DB
	added, deleted int
}

func (c *timerCounter) AddTimer(t windowing.Timer) error {
	c.added++
	return c.DB.AddTimer(t)
}

func (c *timerCounter) DeleteTimer(t windowing.Timer) error {
	c.deleted++
	return c.DB.DeleteTimer(t)
}

// TestSlidingRetiredKey follows a sliding key "k" with a record every 10 s
// for two hours of 1 h windows, while records of another key drive the
// frontier past each of k's windows before k's next record (docs/
// SEMANTICS.md, Sliding windows): k's records stay while a record within
// allowed_lateness can need them, every window reads them (its pane
// counts the hour before it, also a window opened late), and they go, with
// the key, when the frontier passes k's last time + size + lateness. A
// key's retired window keeps its timer while newer windows expire: one
// timer per window and a retirement timer set again about once per size,
// not a retirement timer added and deleted at every record. The last run
// keeps no key in the cache: each step reads k back from the store.
func TestSlidingRetiredKey(t *testing.T) {
	const (
		size     = 3600_000
		lateness = 2_000
		every    = 10_000
		records  = 720 // two hours of k
	)
	for run, mode := range []windowing.Mode{windowing.Accumulating, windowing.Retracting, windowing.Accumulating} {
		cache := 0 // the default
		if run == 2 {
			cache = 1 // every key written and read back at each step
		}
		spec := windowing.Spec{
			Window:          windowing.WindowSpec{Kind: windowing.Sliding, Size: size},
			Aggregates:      []windowing.AggSpec{{Name: "n", Op: windowing.Count}},
			Trigger:         windowing.TriggerSpec{OnTime: true, Late: true},
			AllowedLateness: lateness,
			Mode:            mode,
		}
		db, err := state.Open("db", state.Options{FS: vfs.NewMem()})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		store := &timerCounter{DB: db}
		var col collector
		eng, err := windowing.New(spec, watermark.Spec{Strategy: watermark.BoundedOutOfOrderness}, store, &col, windowing.Options{ShardByPartition: true, CacheBytes: cache})
		if err != nil {
			t.Fatal(err)
		}
		eng.Assign(0, 0, true)
		record, held := keyOps(t, &eng)
		for i := range records {
			record("k", int64(i)*every)
			record("other", int64(i)*every+every/2) // closes and expires k's window
		}
		last := int64(records-1) * every
		panes := 0
		for _, p := range col.panes {
			if p.Key != "k" {
				continue
			}
			panes++
			tm := p.End - 1
			if want := min(tm/every+1, size/every); p.Timing != windowing.OnTime || p.Values[0].Int != want {
				t.Fatalf("%v: window at %d: %v pane n = %v, want an on-time pane of %d", mode, tm, p.Timing, p.Values[0], want)
			}
		}
		if panes != records {
			t.Fatalf("%v: %d panes of k, want %d", mode, panes, records)
		}
		// Both keys: one timer per window, and retirement timers set again
		// about once per size; a retirement timer added and deleted per
		// record would double them.
		if n := max(store.added, store.deleted); n > 2*records+10 {
			t.Fatalf("%v: %d timers added and %d deleted for %d records", mode, store.added, store.deleted, 2*records)
		}
		// A record late within lateness (F = last + 5000) opens a window of
		// its own that reads the records of the hour before it.
		late := last + 3_500
		record("k", late)
		var lateN int64
		for _, p := range col.panes {
			if p.Key == "k" && p.End-1 == late && !p.Retraction {
				lateN = p.Values[0].Int
			}
		}
		if want := int64(size/every + 1); lateN != want {
			t.Fatalf("%v: late window at %d: n = %d, want %d", mode, late, lateN, want)
		}
		// k goes when F passes its last time + size + lateness.
		gone := late + size + lateness
		record("other", gone-1)
		if !held() {
			t.Fatalf("%v: key gone at F = %d, before %d", mode, gone-1, gone)
		}
		record("other", gone)
		if held() {
			t.Fatalf("%v: key still held at F = %d", mode, gone)
		}
	}
}

// TestSlidingRetiredEndSurvivesRestart: the end a retired window takes
// over from a later expired window is kept in the key's slides header
// (retireOrDelete does not read the retired window); it reaches the
// store and comes back after a restart, so the key's records stay until
// F passes the later window's time + size + lateness, not the retired
// window's own.
func TestSlidingRetiredEndSurvivesRestart(t *testing.T) {
	const size, lateness = 60_000, 1_000
	spec := windowing.Spec{
		Window:          windowing.WindowSpec{Kind: windowing.Sliding, Size: size},
		Aggregates:      []windowing.AggSpec{{Name: "n", Op: windowing.Count}},
		Trigger:         windowing.TriggerSpec{OnTime: true, Late: true},
		AllowedLateness: lateness,
		Mode:            windowing.Accumulating,
	}
	db, err := state.Open("db", state.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var col collector
	start := func() *windowing.Engine {
		eng, err := windowing.New(spec, watermark.Spec{Strategy: watermark.BoundedOutOfOrderness}, db, &col, windowing.Options{ShardByPartition: true})
		if err != nil {
			t.Fatal(err)
		}
		eng.Assign(0, 0, true)
		return eng
	}
	eng := start()
	record, held := keyOps(t, &eng)
	record("k", 0)
	record("other", 5_000) // k's window at 0 expires and retires
	record("k", 10_000)
	record("other", 12_000) // k's window at 10,000 expires and hands the retired one its end
	if !held() {
		t.Fatal("k gone after its windows expired")
	}
	eng = start() // restart from the store
	// The retired window's own deadline (0 + size + lateness) passes: it
	// must stay until 10,000 + size + lateness.
	record("other", 10_000+size+lateness-1)
	if !held() {
		t.Fatalf("k gone at F = %d, before %d", 10_000+size+lateness-1, 10_000+size+lateness)
	}
	record("other", 10_000+size+lateness)
	if held() {
		t.Fatalf("k still held at F = %d", 10_000+size+lateness)
	}
}

// keyOps returns record, which gives *eng a record of key at ts (x 1),
// and held, which checkpoints *eng and reports whether key "k" has stored
// state; *eng may be replaced between calls (a restart).
func keyOps(t *testing.T, eng **windowing.Engine) (record func(key string, ts int64), held func() bool) {
	record = func(key string, ts int64) {
		t.Helper()
		ev := rec{key: key, t: ts, x: 1}.event(1)
		if err := (*eng).Record(&ev, 0); err != nil {
			t.Fatal(err)
		}
	}
	held = func() bool {
		t.Helper()
		if err := (*eng).Checkpoint(false); err != nil {
			t.Fatal(err)
		}
		v, err := (*eng).KeyState(0, "k")
		if err != nil {
			t.Fatal(err)
		}
		return v != nil
	}
	return record, held
}

// A sliding key whose last window expires in a frontier step that also
// passes the time its records are kept until goes at once. Before, its
// window was retired with a timer at or below what the timer scan had
// passed: the timer never fired, and the key, its records and an open
// window stayed until a restart.
func TestSlidingRetiredInOneStep(t *testing.T) {
	spec := windowing.Spec{
		Window:     windowing.WindowSpec{Kind: windowing.Sliding, Size: 1000},
		Aggregates: []windowing.AggSpec{{Name: "n", Op: windowing.Count}},
		Trigger:    windowing.TriggerSpec{OnTime: true},
	}
	db, err := state.Open("db", state.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var col collector
	eng, err := windowing.New(spec, watermark.Spec{Strategy: watermark.BoundedOutOfOrderness}, db, &col, windowing.Options{ShardByPartition: true})
	if err != nil {
		t.Fatal(err)
	}
	eng.Assign(0, 0, true)
	record, held := keyOps(t, &eng)
	record("k", 0)
	record("other", 5000) // k's window expires; its records are kept until 1000 at most
	for ts := int64(10_000); ts <= 100_000; ts += 10_000 {
		record("other", ts)
	}
	if held() {
		t.Fatal("key k still held at F = 100000; its records were useless from 1000")
	}
	if n := eng.OpenWindows(); n != 1 {
		t.Fatalf("%d open windows, want other's 1", n)
	}
}
