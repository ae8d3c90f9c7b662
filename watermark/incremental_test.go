package watermark

import (
	"math/rand/v2"
	"testing"
)

// The frontier that keeps Advance's minimum between calls moves exactly as
// one that recomputes it from every partition at each call, through random
// assignments, revocations, records, marks, ticks with idleness, holds,
// restores (also to a lower watermark), forgotten partitions and
// unmarshalled state, with an Advance after some of them, for several specs.
func TestFrontierIncrementalMatchesRecompute(t *testing.T) {
	specs := []Spec{
		{Strategy: BoundedOutOfOrderness, MaxDelay: 50, Every: 1, IdleTimeout: 300},
		{Strategy: Monotonic, Every: 3, IdleTimeout: 200},
		{Strategy: BoundedOutOfOrderness, MaxDelay: 20, Every: 1},
		{Strategy: BoundedOutOfOrderness, MaxDelay: 10, Every: 1, IdleTimeout: 100, Marked: true},
	}
	for si, spec := range specs {
		rng := rand.New(rand.NewPCG(uint64(si), 7))
		f, ref := NewFrontier(spec), NewFrontier(spec)
		both := func(op func(*Frontier)) { op(f); op(ref) }
		var now, ts int64
		for step := 0; step < 20000; step++ {
			p := int32(rng.IntN(6))
			switch r := rng.IntN(100); {
			case r < 50:
				ts += int64(rng.IntN(30)) - 5
				now += int64(rng.IntN(20))
				both(func(x *Frontier) { x.Observe(p, ts, now) })
			case r < 55:
				wm := ts - int64(rng.IntN(40))
				both(func(x *Frontier) { x.Mark(p, wm) })
			case r < 60:
				now += int64(rng.IntN(150))
				both(func(x *Frontier) { x.Tick(now) })
			case r < 65:
				// Every partition idle, then a record that raises nothing.
				now += 1000
				both(func(x *Frontier) { x.Tick(now) })
				both(func(x *Frontier) { x.Observe(p, ts-500, now) })
			case r < 72:
				c := rng.IntN(2) == 0
				both(func(x *Frontier) { x.Assign(p, now, c) })
			case r < 78:
				both(func(x *Frontier) { x.Revoke(p) })
			case r < 81:
				c := rng.IntN(2) == 0
				both(func(x *Frontier) { x.SetCaughtUp(p, c) })
			case r < 84:
				h := int64(rng.IntN(500))
				both(func(x *Frontier) { x.HoldRestored(now, h) })
			case r < 87:
				g := Generator{MaxTS: ts, Seen: 1, Watermark: ts - int64(rng.IntN(400))}
				both(func(x *Frontier) { x.RestoreGenerator(p, g) })
			case r < 89:
				both(func(x *Frontier) { x.Forget(p) })
			case r < 91:
				other := NewFrontier(spec)
				other.Observe(p, ts+int64(rng.IntN(200))-100, now)
				other.Observe((p+1)%6, ts+int64(rng.IntN(200))-100, now)
				other.Advance()
				b, err := other.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				both(func(x *Frontier) {
					if err := x.UnmarshalBinary(b); err != nil {
						t.Fatal(err)
					}
				})
			}
			if rng.IntN(2) == 0 {
				continue // not every change is followed by an Advance
			}
			ref.stale = true // the reference recomputes at every call
			moved, refMoved := f.Advance(), ref.Advance()
			if moved != refMoved || f.Value() != ref.Value() {
				t.Fatalf("spec %d step %d: moved %v to %d, recomputing: moved %v to %d\n%+v", si, step, moved, f.Value(), refMoved, ref.Value(), ref.Status())
			}
		}
	}
}

// With many partitions and records in rising event time, Advance passes
// over the partitions only when the partition that held the minimum moves:
// about once per round of the partitions, not once per record.
func TestFrontierAdvanceRarelyRecomputes(t *testing.T) {
	f := NewFrontier(Spec{Strategy: BoundedOutOfOrderness, MaxDelay: 1000, Every: 1})
	const parts, records = 64, 64000
	for p := int32(0); p < parts; p++ {
		f.Assign(p, 0, true)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < records; i++ {
		f.Observe(int32(rng.IntN(parts)), int64(i), 0)
		f.Advance()
	}
	if f.Value() < records-2000 {
		t.Fatalf("frontier %d, want about %d", f.Value(), records-1000)
	}
	if f.recomputes > records/8 {
		t.Fatalf("%d passes over %d partitions for %d records", f.recomputes, parts, records)
	}
}
