package watermark

import "testing"

// step is one input to a frontier: a record (p, ts) at processing time now,
// a tick at now, or a partition change; want is the frontier afterwards.
type step struct {
	op   string // "rec", "tick", "assign", "revoke"
	p    int32
	ts   int64
	now  int64
	want int64
}

func runSteps(t *testing.T, spec Spec, parts []int32, steps []step) {
	t.Helper()
	f := NewFrontier(spec)
	for _, p := range parts {
		f.Assign(p, 0, true)
	}
	for i, s := range steps {
		switch s.op {
		case "rec":
			f.Observe(s.p, s.ts, s.now)
		case "tick":
			f.Tick(s.now)
		case "assign":
			f.Assign(s.p, s.now, true)
		case "revoke":
			f.Revoke(s.p)
		}
		f.Advance()
		if got := f.Value(); got != s.want {
			t.Fatalf("step %d %+v: frontier = %d, want %d", i, s, got, s.want)
		}
	}
}

func TestGenerators(t *testing.T) {
	t.Run("bounded", func(t *testing.T) {
		runSteps(t, Spec{MaxDelay: 2000, Every: 1}, []int32{0}, []step{
			{"rec", 0, 1000, 0, -1000},
			{"rec", 0, 500, 0, -1000}, // out of order: no regression
			{"rec", 0, 5000, 0, 3000},
		})
	})
	t.Run("monotonic ignores max_delay", func(t *testing.T) {
		runSteps(t, Spec{Strategy: Monotonic, MaxDelay: 2000, Every: 1}, []int32{0}, []step{
			{"rec", 0, 1000, 0, 1000},
			{"rec", 0, 900, 0, 1000},
		})
	})
	t.Run("sparse every 3", func(t *testing.T) {
		runSteps(t, Spec{Strategy: Monotonic, Every: 3}, []int32{0}, []step{
			{"rec", 0, 1000, 0, MinTime},
			{"rec", 0, 2000, 0, MinTime},
			{"rec", 0, 3000, 0, 3000},
			{"rec", 0, 4000, 0, 3000},
			{"rec", 0, 5000, 0, 3000},
			{"rec", 0, 6000, 0, 6000},
		})
	})
}

func TestFrontierMinAndIdleness(t *testing.T) {
	t.Run("min over partitions", func(t *testing.T) {
		runSteps(t, Spec{Strategy: Monotonic, Every: 1}, []int32{0, 1}, []step{
			{"rec", 0, 12000, 0, MinTime}, // p1 has no watermark yet
			{"rec", 1, 5000, 0, 5000},
			{"rec", 1, 15000, 0, 12000},
		})
	})
	t.Run("idle excluded, all idle is max", func(t *testing.T) {
		runSteps(t, Spec{Strategy: Monotonic, Every: 1, IdleTimeout: 10000}, []int32{0, 1, 2}, []step{
			{"rec", 0, 5000, 0, MinTime},
			{"rec", 1, 12000, 0, MinTime},
			{"tick", 0, 0, 9999, MinTime},
			{"rec", 0, 6000, 5000, MinTime}, // p0 active at 5000
			{"tick", 0, 0, 10000, 6000},     // p1 and p2 (no watermark ever) idle: min over {p0}
			{"tick", 0, 0, 15000, 12000},    // all idle: the largest watermark
			{"rec", 2, 1000, 16000, 12000},  // p2 active again below F: F stays
			{"rec", 2, 20000, 16000, 20000}, // p2 is the only active partition
		})
	})
}

func TestFrontierIdleRules(t *testing.T) {
	f := NewFrontier(Spec{Strategy: Monotonic, Every: 1, IdleTimeout: 10000})
	f.Assign(0, 0, true)
	f.Assign(1, 0, true)
	f.Observe(0, 5000, 0)
	f.Observe(1, 12000, 0)
	f.Advance()
	if f.Value() != 5000 {
		t.Fatalf("F = %d, want 5000", f.Value())
	}
	f.Observe(1, 13000, 6000) // p1 active at 6000
	f.Tick(10000)             // p0 silent 10 s: idle, p1 not
	f.Advance()
	if f.Value() != 13000 {
		t.Fatalf("idle p0 left out: F = %d, want 13000", f.Value())
	}
	f.Tick(16000) // p1 idle too: all idle -> largest watermark
	f.Advance()
	if f.Value() != 13000 {
		t.Fatalf("all idle: F = %d, want 13000", f.Value())
	}
	// A record on an idle partition makes it active again; the frontier does not go back.
	f.Observe(0, 7000, 17000)
	f.Advance()
	if f.Value() != 13000 {
		t.Fatalf("reactivated p0 moved F back: %d", f.Value())
	}
	st := f.Status()
	if st[0].Idle || !st[1].Idle {
		t.Fatalf("status = %+v", st)
	}
	// A lagging partition is slow, not idle.
	f.SetCaughtUp(0, false)
	f.Tick(100000)
	if f.Status()[0].Idle {
		t.Fatal("a partition that is not caught up became idle")
	}
}

// A partition that waits with a record it has not observed (the schema
// registry's wait) holds the frontier as the record would have: an idle
// one is active again at its watermark, and it does not turn idle while
// it waits, so the other partitions cannot carry the frontier past the
// record. Once the record is observed it counts as usual.
func TestFrontierWait(t *testing.T) {
	f := NewFrontier(Spec{Strategy: Monotonic, Every: 1, IdleTimeout: 10000})
	f.Assign(0, 0, true)
	f.Assign(1, 0, true)
	f.Observe(0, 5000, 0)
	f.Observe(1, 4000, 0)
	f.Tick(10000) // both idle: the largest watermark
	f.Advance()
	if f.Value() != 5000 {
		t.Fatalf("all idle: F = %d, want 5000", f.Value())
	}
	f.Wait(1) // p1's next record waits
	f.Observe(0, 60000, 11000)
	f.Advance()
	if f.Value() != 5000 {
		t.Fatalf("p1 waits at 4000: F = %d, want 5000 (it never goes back)", f.Value())
	}
	for now := int64(20000); now <= 100000; now += 10000 {
		f.Observe(0, 60000+now, now)
		f.Tick(now)
		f.Advance()
		if f.Value() != 5000 || f.Status()[1].Idle {
			t.Fatalf("at %d, p1 still waiting: F = %d, idle %v; want 5000, not idle", now, f.Value(), f.Status()[1].Idle)
		}
	}
	f.Observe(1, 21000, 101000) // the record that waited: on time
	f.Advance()
	if f.Value() != 21000 {
		t.Fatalf("after the record: F = %d, want 21000", f.Value())
	}
	f.Wait(7) // not a partition of the frontier: nothing happens
	if len(f.Status()) != 2 {
		t.Fatalf("Wait of an unknown partition added one: %+v", f.Status())
	}
}

func TestFrontierNeverGoesBack(t *testing.T) {
	f := NewFrontier(Spec{Every: 1})
	f.Assign(0, 0, true)
	f.Observe(0, 10000, 0)
	f.Advance()
	// A partition joining with no (or a lower) watermark does not move F back.
	f.Assign(1, 0, true)
	f.Advance()
	if f.Value() != 10000 {
		t.Fatalf("F = %d after a join, want 10000", f.Value())
	}
	f.Revoke(0)
	f.Revoke(1)
	if f.Advance() || f.Value() != 10000 {
		t.Fatalf("F = %d with no partitions, want 10000", f.Value())
	}
}

func TestFrontierPersistence(t *testing.T) {
	f := NewFrontier(Spec{MaxDelay: 100, Every: 2})
	f.Assign(0, 0, true)
	f.Assign(3, 0, true)
	f.Observe(0, 1000, 0)
	f.Observe(0, 2000, 0)
	f.Observe(3, 5000, 0)
	f.Observe(3, 6000, 0)
	f.Observe(3, 7000, 0) // seen 3: not yet emitted
	f.Advance()
	b, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	g := NewFrontier(Spec{MaxDelay: 100, Every: 2})
	if err := g.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if g.Value() != f.Value() || g.Value() != 1900 {
		t.Fatalf("restored F = %d, want %d", g.Value(), f.Value())
	}
	g.Assign(0, 0, true)
	g.Assign(3, 0, true)
	g.Observe(3, 7500, 0) // 4th record of p3: emits 7400
	g.Observe(0, 2500, 0) // 3rd of p0: not emitted
	g.Advance()
	if g.Value() != 1900 {
		t.Fatalf("F = %d, want 1900 (p0's sparse count resumed)", g.Value())
	}
	g.Observe(0, 2600, 0)
	g.Advance()
	if g.Value() != 2500 {
		t.Fatalf("F = %d, want 2500", g.Value())
	}
	for cut := 0; cut < len(b); cut++ {
		if err := NewFrontier(Spec{}).UnmarshalBinary(b[:cut]); err == nil {
			t.Fatalf("truncated encoding of %d bytes accepted", cut)
		}
	}
}

func TestHoldRestored(t *testing.T) {
	f := NewFrontier(Spec{Every: 1})
	f.Assign(0, 0, true)
	f.Assign(1, 0, true)
	f.Observe(0, 10000, 0)
	f.Observe(1, 5000, 0)
	f.Advance()
	b, _ := f.MarshalBinary()

	// Restart: only p0 comes back at first.
	g := NewFrontier(Spec{Every: 1})
	if err := g.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if held := g.HoldRestored(1000, 60000); len(held) != 2 {
		t.Fatalf("held %v, want both restored partitions", held)
	}
	g.Assign(0, 1000, true)
	g.Observe(0, 30000, 2000)
	g.Advance()
	if g.Value() != 5000 {
		t.Fatalf("F = %d: held p1 (wm 5000) must hold it", g.Value())
	}
	if st := g.Status(); !st[1].Held || st[0].Held {
		t.Fatalf("status %+v", st)
	}
	// p1 assigned again: normal minimum.
	g.Assign(1, 3000, true)
	g.Observe(1, 20000, 3000)
	g.Advance()
	if g.Value() != 20000 {
		t.Fatalf("F = %d after p1 returned, want 20000", g.Value())
	}

	// A held partition that never returns stops holding at the deadline.
	h := NewFrontier(Spec{Every: 1})
	_ = h.UnmarshalBinary(b)
	h.HoldRestored(0, 60000)
	h.Assign(0, 0, true)
	h.Observe(0, 30000, 0)
	h.Tick(59999)
	h.Advance()
	if h.Value() != 5000 {
		t.Fatalf("F = %d before the hold ends, want 5000", h.Value())
	}
	h.Tick(60000)
	h.Advance()
	if h.Value() != 30000 {
		t.Fatalf("F = %d after the hold ended, want 30000", h.Value())
	}
}

// TestHoldRestoring: a partition whose state restores in the background
// keeps the frontier where it is until it is assigned (or revoked), while
// the other partitions' watermarks run on.
func TestHoldRestoring(t *testing.T) {
	f := NewFrontier(Spec{Every: 1})
	f.Assign(0, 0, true)
	f.Assign(1, 0, true)
	f.Observe(0, 10000, 0)
	f.Observe(1, 10000, 0)
	f.Advance()
	f.HoldRestoring(2)
	if !f.Restoring(2) || f.Restoring(0) {
		t.Fatal("Restoring: want only partition 2")
	}
	f.Observe(0, 20000, 1)
	f.Observe(1, 25000, 1)
	f.Advance()
	if f.Value() != 10000 {
		t.Fatalf("F = %d while partition 2 restores, want 10000", f.Value())
	}
	if st := f.Status(); len(st) != 3 || !st[2].Restoring || st[2].Assigned {
		t.Fatalf("status %+v", st)
	}
	// Restored with a lower watermark: assigned, it holds the frontier
	// (which does not go back) until it passes the others.
	f.RestoreGenerator(2, Generator{MaxTS: 5000, Watermark: 5000})
	f.Assign(2, 2, false)
	f.Advance()
	if f.Value() != 10000 || f.Restoring(2) {
		t.Fatalf("F = %d, restoring %v after the restore, want 10000, false", f.Value(), f.Restoring(2))
	}
	f.Observe(2, 30000, 3)
	f.Advance()
	if f.Value() != 20000 {
		t.Fatalf("F = %d, want 20000", f.Value())
	}
	// A restore cut short by a revoke stops holding.
	f.HoldRestoring(3)
	f.Observe(0, 40000, 4)
	f.Observe(1, 40000, 4)
	f.Observe(2, 40000, 4)
	f.Advance()
	if f.Value() != 20000 {
		t.Fatalf("F = %d while partition 3 restores, want 20000", f.Value())
	}
	f.Revoke(3)
	f.Advance()
	if f.Value() != 40000 {
		t.Fatalf("F = %d after partition 3 was revoked, want 40000", f.Value())
	}
}

func TestRestoreGeneratorAndForget(t *testing.T) {
	spec := Spec{Strategy: BoundedOutOfOrderness, MaxDelay: 10}
	f := NewFrontier(spec)
	f.Assign(0, 0, true)
	f.Assign(1, 0, true)
	f.Observe(0, 100, 0)
	f.Observe(1, 200, 0)
	f.Advance()
	if f.Value() != 90 {
		t.Fatalf("frontier %d, want 90", f.Value())
	}
	// Partition 2 arrives from another instance with a lower watermark: it
	// holds the frontier but never moves it back.
	f.Assign(2, 0, true)
	f.RestoreGenerator(2, Generator{MaxTS: 60, Seen: 7, Watermark: 50})
	if f.Advance() || f.Value() != 90 {
		t.Fatalf("frontier %d after a lower restored partition, want 90", f.Value())
	}
	g, ok := f.Generator(2)
	if !ok || g != (Generator{MaxTS: 60, Seen: 7, Watermark: 50}) {
		t.Fatalf("generator %+v %v", g, ok)
	}
	f.Observe(0, 300, 0)
	f.Observe(1, 300, 0)
	if f.Advance() {
		t.Fatalf("frontier moved to %d while partition 2 holds it at 50", f.Value())
	}
	f.Observe(2, 400, 0)
	if !f.Advance() || f.Value() != 290 {
		t.Fatalf("frontier %d, want 290", f.Value())
	}
	f.Forget(2)
	if _, ok := f.Generator(2); ok || len(f.Status()) != 2 {
		t.Fatalf("partition 2 not forgotten: %+v", f.Status())
	}
	b, _ := f.MarshalBinary()
	g2 := NewFrontier(spec)
	if err := g2.UnmarshalBinary(b); err != nil || len(g2.Status()) != 2 {
		t.Fatalf("round trip after Forget: %v %+v", err, g2.Status())
	}
}

// part finds each partition by its id, also when ids have gaps (a
// partition forgotten, ids not from 0) so that a partition's index in the
// id-ordered list is not its id: the list holds exactly the partitions
// assigned and not forgotten (forgetting an unknown id removes nothing), in
// order, lookup finds each and no forgotten one, and a record observed for
// one id moves that partition only.
func TestFrontierPartWithGaps(t *testing.T) {
	f := NewFrontier(Spec{MaxDelay: 0})
	ops := []struct {
		forget bool
		p      int32
	}{{false, 3}, {false, 0}, {false, 5}, {false, 1}, {true, 0}, {true, 4}, {false, 2}, {true, 3}, {false, 7}, {false, 0}, {true, 1}, {true, 9}}
	known := map[int32]bool{}
	for step, op := range ops {
		if op.forget {
			f.Forget(op.p)
			delete(known, op.p)
		} else {
			f.Assign(op.p, 0, true)
			known[op.p] = true
		}
		if len(f.sorted) != len(known) {
			t.Fatalf("step %d: %d partitions listed, want %v", step, len(f.sorted), known)
		}
		for i, st := range f.sorted {
			if f.lookup(st.id) != st || (i > 0 && f.sorted[i-1].id >= st.id) {
				t.Fatalf("step %d: list %v out of order, or lookup finds another partition", step, f.sorted)
			}
		}
		if op.forget && f.lookup(op.p) != nil {
			t.Fatalf("step %d: forgotten partition %d still found", step, op.p)
		}
		for _, st := range f.sorted {
			ts := int64(1000*step) + int64(st.id)
			f.Observe(st.id, ts, 0)
			if got := f.part(st.id); got != st || got.gen.MaxTS != ts {
				t.Fatalf("step %d: partition %d: got %d with max ts %d, want %d", step, st.id, got.id, got.gen.MaxTS, ts)
			}
		}
	}
}
