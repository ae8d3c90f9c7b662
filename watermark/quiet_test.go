package watermark

import "testing"

// quietSpec: monotonic, idle after 10 s, quiet advance on.
var quietSpec = Spec{Strategy: Monotonic, Every: 1, IdleTimeout: 10000, QuietAdvance: true}

func TestQuietAdvance(t *testing.T) {
	t.Run("all idle: processing time moves the frontier", func(t *testing.T) {
		runSteps(t, quietSpec, []int32{0, 1}, []step{
			{"rec", 0, 5000, 0, MinTime},
			{"rec", 1, 8000, 2000, 5000},
			{"tick", 0, 0, 10000, 8000},  // p0 idle: the minimum over {p1}
			{"tick", 0, 0, 12000, 8000},  // both idle: t_quiet = 12000, W = 8000
			{"tick", 0, 0, 15000, 11000}, // W + 3000
			{"rec", 1, 9000, 16000, 11000},
			{"tick", 0, 0, 20000, 11000}, // p1 active again: no advance, F never goes back
			{"tick", 0, 0, 26000, 11000}, // p1 idle again at 26000: t_quiet = 26000, W = 9000
			{"tick", 0, 0, 28000, 11000}, // 9000 + 2000 < 11000
			{"tick", 0, 0, 30000, 13000},
		})
	})
	t.Run("off without the option", func(t *testing.T) {
		spec := quietSpec
		spec.QuietAdvance = false
		runSteps(t, spec, []int32{0}, []step{
			{"rec", 0, 5000, 0, 5000},
			{"tick", 0, 0, 10000, 5000},
			{"tick", 0, 0, 60000, 5000},
		})
	})
	t.Run("no watermark yet: nothing to advance from", func(t *testing.T) {
		runSteps(t, quietSpec, []int32{0}, []step{
			{"tick", 0, 0, 10000, MinTime},
			{"tick", 0, 0, 60000, MinTime},
		})
	})
}

func TestQuietAdvanceStops(t *testing.T) {
	// start: one partition at 5000, quiet from 10000.
	start := func(t *testing.T) *Frontier {
		f := NewFrontier(quietSpec)
		f.Assign(0, 0, true)
		f.Observe(0, 5000, 0)
		f.Tick(10000)
		f.Tick(12000)
		f.Advance()
		if f.Value() != 7000 || !f.Quiet() {
			t.Fatalf("quiet from 10000: F = %d (want 7000), quiet %v", f.Value(), f.Quiet())
		}
		return f
	}
	for _, c := range []struct {
		name   string
		change func(f *Frontier)
	}{
		{"a lagging partition", func(f *Frontier) { f.SetCaughtUp(0, false) }},
		{"a new partition", func(f *Frontier) { f.Assign(1, 12500, false) }},
		{"a restoring partition", func(f *Frontier) { f.HoldRestoring(1) }},
		{"a record", func(f *Frontier) { f.Observe(0, 6000, 12500) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := start(t)
			c.change(f)
			f.Advance()
			before := f.Value()
			f.Tick(13000)
			f.Tick(19000)
			f.Advance()
			if f.Quiet() || (f.Value() != before && c.name != "a record") {
				t.Fatalf("after %s: F %d -> %d, quiet %v: the advance did not stop", c.name, before, f.Value(), f.Quiet())
			}
		})
	}
	t.Run("a revoked partition restarts the quiet period", func(t *testing.T) {
		f := start(t)
		f.Assign(1, 0, true)
		f.Observe(1, 6000, 0)
		f.Revoke(1)
		f.Advance()
		if f.Quiet() {
			t.Fatal("still quiet after a revocation")
		}
		f.Tick(12500) // p0 idle, caught up: quiet again from 12500, W = 5000
		f.Tick(15000)
		f.Advance()
		if f.Value() != 7500 {
			t.Fatalf("F = %d, want 7500 (the earlier 7000 kept, 5000 + 2500 past it)", f.Value())
		}
	})
}

func TestQuietStep(t *testing.T) {
	f := NewFrontier(quietSpec)
	f.Assign(0, 0, true)
	f.Observe(0, 5000, 0)
	f.Advance()
	if _, quiet := f.QuietStep(); quiet {
		t.Fatal("a record's step reported quiet")
	}
	f.Tick(10000)
	f.Advance()
	f.Tick(13000)
	if !f.Advance() {
		t.Fatal("the quiet advance did not move the frontier")
	}
	if from, quiet := f.QuietStep(); !quiet || from != 5000 || f.Value() != 8000 {
		t.Fatalf("QuietStep = %d, %v; F = %d: want 5000, true; 8000", from, quiet, f.Value())
	}
	f.Advance()
	if _, quiet := f.QuietStep(); quiet {
		t.Fatal("a step that did not move reported quiet")
	}
}

// Under a Marked spec (stage 2 of a repartitioned pipeline) a step past
// what the upstream partitions' own watermarks give is a quiet one: the
// markers carried the quiet advance upstream.
func TestQuietMarked(t *testing.T) {
	u := NewUpstreams(2)
	u.Observe(0, 5000, true)
	u.ObserveQuiet(1, 9000, 4000, true) // p1 idle, its marker raised by the quiet advance
	if u.Watermark() != 9000 || u.Base() != 5000 {
		t.Fatalf("upstreams: watermark %d base %d, want 9000 and 5000", u.Watermark(), u.Base())
	}
	f := NewFrontier(Spec{Marked: true})
	f.Assign(0, 0, true)
	f.MarkQuiet(0, u.Watermark(), u.Base())
	if !f.Advance() || f.Value() != 9000 {
		t.Fatalf("F = %d, want 9000", f.Value())
	}
	if from, quiet := f.QuietStep(); !quiet || from != 5000 || !f.Quiet() {
		t.Fatalf("QuietStep = %d, %v (Quiet %v), want 5000, true", from, quiet, f.Quiet())
	}
	f.Mark(0, 12000) // a record upstream: its own watermark
	if !f.Advance() {
		t.Fatal("no step")
	}
	if _, quiet := f.QuietStep(); quiet || f.Quiet() {
		t.Fatal("a step of the upstream partitions' own watermarks reported quiet")
	}
}

// A partition forgotten while the input is quiet (stage 1's revocation)
// ends the quiet period, as a revocation does: it starts again from the
// remaining partitions' own watermarks. Before, it went on from the
// forgotten partition's watermark.
func TestQuietForgetEnds(t *testing.T) {
	f := NewFrontier(quietSpec)
	f.Assign(0, 0, true)
	f.Assign(1, 0, true)
	f.Observe(0, 5000, 0)
	f.Observe(1, 9000, 0)
	f.Tick(10000) // both idle: quiet from 10000, W = 9000
	f.Tick(12000)
	f.Advance()
	if f.Value() != 11000 {
		t.Fatalf("F = %d, want 11000", f.Value())
	}
	f.Forget(1)
	f.Tick(12500) // quiet again from 12500, W = 5000
	f.Tick(15000)
	f.Advance()
	if f.Value() != 11000 {
		t.Fatalf("F = %d after partition 1 left, want 11000 (5000 + 2500 is below it)", f.Value())
	}
}
