package watermark

import (
	"slices"
	"testing"
)

// TestAlign: a partition more than max_drift ahead of the frontier is
// paused and resumes once the frontier is back within max_drift of it; the
// partition holding the frontier is never paused; a paused partition does
// not go idle, and its idleness clock restarts when it resumes; a revoked
// paused partition resumes (docs/SEMANTICS.md, Watermark alignment).
func TestAlign(t *testing.T) {
	f := NewFrontier(Spec{Strategy: BoundedOutOfOrderness, Every: 1, IdleTimeout: 100, MaxDrift: 1000})
	for p := int32(0); p < 3; p++ {
		f.Assign(p, 0, true)
	}
	if pause, resume := f.Align(0); pause != nil || resume != nil {
		t.Fatalf("before any watermark: pause %v resume %v", pause, resume)
	}
	f.Observe(0, 5000, 1)
	f.Observe(1, 5500, 1)
	f.Observe(2, 6001, 1) // 1001 ahead of partition 0
	f.Advance()
	if f.Value() != 5000 {
		t.Fatalf("frontier %d", f.Value())
	}
	pause, resume := f.Align(1)
	if !slices.Equal(pause, []int32{2}) || resume != nil {
		t.Fatalf("pause %v resume %v, want pause [2]", pause, resume)
	}
	if pause, resume := f.Align(2); pause != nil || resume != nil {
		t.Fatalf("again: pause %v resume %v, want nothing new", pause, resume)
	}
	// Long past the idle timeout (partitions 0 and 1 keep delivering
	// records), partition 2 is paused, not idle: it still counts.
	f.Observe(0, 5000, 500)
	f.Observe(1, 5500, 500)
	f.Tick(550)
	for _, st := range f.Status() {
		if st.Partition == 2 && (st.Idle || !st.Paused) {
			t.Fatalf("paused partition: %+v", st)
		}
	}
	// The frontier moves within max_drift of partition 2: it resumes, and
	// its idleness counts from now.
	f.Observe(0, 5200, 600)
	f.Observe(1, 5300, 600)
	f.Advance()
	pause, resume = f.Align(600)
	if pause != nil || !slices.Equal(resume, []int32{2}) {
		t.Fatalf("pause %v resume %v, want resume [2]", pause, resume)
	}
	f.Tick(650)
	if f.Status()[2].Idle {
		t.Fatal("partition 2 went idle 50 ms after it resumed")
	}
	// The holder is never paused, however far the others are behind it:
	// partition 1 alone is active and far ahead of nothing.
	f.Observe(2, 20000, 700)
	f.Advance()
	if pause, _ := f.Align(700); !slices.Equal(pause, []int32{2}) {
		t.Fatalf("pause %v, want [2]", pause)
	}
	f.Revoke(2)
	if _, resume := f.Align(800); !slices.Equal(resume, []int32{2}) {
		t.Fatalf("a revoked paused partition did not resume: %v", resume)
	}
	// Without max_drift nothing is paused.
	g := NewFrontier(Spec{Strategy: BoundedOutOfOrderness, Every: 1})
	g.Assign(0, 0, true)
	g.Assign(1, 0, true)
	g.Observe(0, 0, 0)
	g.Observe(1, 1<<40, 0)
	g.Advance()
	if pause, _ := g.Align(0); pause != nil {
		t.Fatalf("paused %v without max_drift", pause)
	}
}

// TestAlignNeverPausesTheHolder: whatever the watermarks, the partition
// whose watermark is the frontier is not paused.
func TestAlignNeverPausesTheHolder(t *testing.T) {
	for seed := int64(0); seed < 200; seed++ {
		f := NewFrontier(Spec{Strategy: BoundedOutOfOrderness, Every: 1, MaxDrift: 10})
		n := int32(1 + seed%5)
		for p := int32(0); p < n; p++ {
			f.Assign(p, 0, true)
			f.Observe(p, (seed*7919+int64(p)*104729)%97*5, 0)
		}
		f.Advance()
		pause, _ := f.Align(0)
		for _, st := range f.Status() {
			if st.Watermark == f.Value() && slices.Contains(pause, st.Partition) {
				t.Fatalf("seed %d: paused the holder %d (frontier %d): %+v", seed, st.Partition, f.Value(), f.Status())
			}
		}
	}
}

// A partition that was idle when alignment pauses it is active again:
// records may come to it while it is paused, unfetched, and the frontier
// must not pass its watermark meanwhile. Before, it stayed idle, and with
// every other partition idle the frontier went to the largest watermark,
// another paused partition's, past the records to come.
func TestAlignPausesIdleActive(t *testing.T) {
	f := NewFrontier(Spec{Strategy: Monotonic, Every: 1, IdleTimeout: 10_000, MaxDrift: 60_000})
	for p := int32(0); p < 3; p++ {
		f.Assign(p, 0, true)
	}
	f.Observe(1, 1_000_000, 0)
	f.Observe(2, 2_020_000, 0)
	f.SetCaughtUp(0, false) // partition 0 lags: the frontier waits for it
	f.Tick(10_000)          // 1 and 2 idle
	f.Observe(0, 100_000, 11_000)
	f.Advance()
	if f.Value() != 100_000 {
		t.Fatalf("frontier %d, want partition 0's 100000", f.Value())
	}
	if pause, _ := f.Align(11_000); !slices.Equal(pause, []int32{1, 2}) {
		t.Fatalf("pause %v, want [1 2]", pause)
	}
	for _, st := range f.Status()[1:] {
		if st.Idle {
			t.Fatalf("partition %d paused and idle", st.Partition)
		}
	}
	f.SetCaughtUp(0, true)
	f.Tick(30_000) // partition 0 idle: 1 and 2, paused, are the active ones
	f.Advance()
	if f.Value() != 1_000_000 {
		t.Fatalf("frontier %d, want partition 1's 1000000 (not past it while it is paused)", f.Value())
	}
}
