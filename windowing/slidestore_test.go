package windowing

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"
)

// Both slide stores against a brute-force list of records: random adds
// (new times in any order, ties), range merges and drops, over many
// seeds (some long enough for hundreds of times), with the tree's
// freed nodes reused. Odd seeds add mostly in time
// order, as streams do (the tree's tail fills and goes into the tree),
// and merge ranges near the newest time.
func TestSlideStores(t *testing.T) {
	specs := []AggSpec{{Name: "n", Op: Count}, {Name: "s", Op: Sum}, {Name: "lo", Op: Min}, {Name: "hi", Op: Max}, {Name: "a", Op: Avg}}
	type rec struct {
		t int64
		x float64
	}
	for seed := range 300 {
		rng := rand.New(rand.NewSource(int64(seed)))
		stores := map[string]slideStore{"tree": newSlideTree(specs), "flat": &slideFlat{specs: specs}}
		var recs []rec
		dropped := int64(-1 << 62)
		ordered := seed%2 == 1
		last := dropped + 1
		steps, span, dropStep := 400, int64(200), int64(40)
		if seed%25 == 0 || seed%25 == 1 {
			steps, span, dropStep = 2000, 2000, 4 // hundreds of times: many chunks
		}
		for step := range steps {
			switch op := rng.Intn(10); {
			case op < 6:
				r := rec{t: dropped + 1 + rng.Int63n(span), x: float64(rng.Intn(100) - 30)}
				if ordered {
					r.t = max(dropped+1, last+rng.Int63n(5)-1)
					last = r.t
				}
				if len(recs) > 0 && rng.Intn(4) == 0 {
					r.t = recs[rng.Intn(len(recs))].t // a tie
				}
				fresh := true
				for _, o := range recs {
					fresh = fresh && o.t != r.t
				}
				in := make([]Input, len(specs))
				for i := range in {
					in[i].Num = r.x
				}
				for name, s := range stores {
					if got := s.add(r.t, in); got != fresh {
						t.Fatalf("seed %d step %d: %s.add(%d) fresh %v, want %v", seed, step, name, r.t, got, fresh)
					}
				}
				recs = append(recs, r)
			case op < 9:
				lo := dropped + rng.Int63n(220) - 10
				if ordered {
					lo = last - rng.Int63n(80)
				}
				hi := lo + rng.Int63n(120)
				var want [5]accum
				for _, r := range recs {
					if lo <= r.t && r.t <= hi {
						for i := range specs {
							want[i].add(&specs[i], &Input{Num: r.x})
						}
					}
				}
				for name, s := range stores {
					got := make([]accum, len(specs))
					s.rangeInto(lo, hi, got)
					for i := range specs {
						if got[i].n != want[i].n || got[i].f != want[i].f {
							t.Fatalf("seed %d step %d: %s.rangeInto(%d, %d) %s = %+v, want %+v", seed, step, name, lo, hi, specs[i].Name, got[i], want[i])
						}
					}
				}
			default:
				dropped += rng.Int63n(dropStep)
				if ordered {
					dropped = min(dropped, last+2)
				}
				times := map[int64]bool{}
				kept := recs[:0]
				for _, r := range recs {
					if r.t <= dropped {
						times[r.t] = true
					} else {
						kept = append(kept, r)
					}
				}
				recs = kept
				for name, s := range stores {
					if n := s.dropThrough(dropped); n != len(times) {
						t.Fatalf("seed %d step %d: %s.dropThrough dropped %d times, want %d", seed, step, name, n, len(times))
					}
				}
			}
			distinct := map[int64]bool{}
			newest := int64(math.MinInt64)
			for _, r := range recs {
				distinct[r.t] = true
				newest = max(newest, r.t)
			}
			for name, s := range stores {
				if s.len() != len(distinct) {
					t.Fatalf("seed %d step %d: %s.len() = %d, want %d", seed, step, name, s.len(), len(distinct))
				}
				if s.len() > 0 && s.newest() != newest {
					t.Fatalf("seed %d step %d: %s.newest() = %d, want %d", seed, step, name, s.newest(), newest)
				}
			}
			if err := checkTreap(stores["tree"].(*slideTree)); err != "" {
				t.Fatalf("seed %d step %d: %s", seed, step, err)
			}
		}
		// each and load round-trip the tree.
		tree := stores["tree"]
		copyOf := newSlideTree(specs)
		var prev int64 = -1 << 62
		if err := tree.each(func(t0 int64, acc []accum) error {
			if t0 <= prev {
				t.Fatalf("seed %d: each out of order: %d after %d", seed, t0, prev)
			}
			prev = t0
			copyOf.load(t0, acc)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := checkTreap(copyOf); err != "" {
			t.Fatalf("seed %d: loaded copy: %s", seed, err)
		}
		a, b := make([]accum, len(specs)), make([]accum, len(specs))
		tree.rangeInto(-1<<62, 1<<62, a)
		copyOf.rangeInto(-1<<62, 1<<62, b)
		for i := range a {
			if a[i].n != b[i].n || a[i].f != b[i].f {
				t.Fatalf("seed %d: loaded copy differs: %+v against %+v", seed, b, a)
			}
		}
	}
}

// checkTreap returns what breaks x's invariants ("" when none): times in
// order, each node's priority at least its children's, each subtree's
// merge the merge of its nodes, minT and maxT the tree's ends, the tail
// after them.
func checkTreap(x *slideTree) string {
	var times []int64
	var walk func(i int32) ([]cheapAcc, string)
	walk = func(i int32) ([]cheapAcc, string) {
		sum := make([]cheapAcc, len(x.specs))
		if i == 0 {
			return sum, ""
		}
		nd := *x.node(i)
		for _, c := range []int32{nd.left, nd.right} {
			if c != 0 && x.node(c).prio > nd.prio {
				return nil, fmt.Sprintf("node %d (t %d): a child's priority above its own", i, nd.t)
			}
		}
		l, err := walk(nd.left)
		if err != "" {
			return nil, err
		}
		times = append(times, nd.t)
		r, err := walk(nd.right)
		if err != "" {
			return nil, err
		}
		for j, a := range x.specs {
			op := a.Op
			sum[j].merge(op, l[j])
			sum[j].merge(op, x.own(i)[j])
			sum[j].merge(op, r[j])
			if sum[j] != x.sub(i)[j] {
				return nil, fmt.Sprintf("node %d (t %d): subtree merge %+v, its nodes %+v", i, nd.t, x.sub(i)[j], sum[j])
			}
		}
		return sum, ""
	}
	all, err := walk(x.root)
	if err != "" {
		return err
	}
	if !slices.Equal(all, x.rootAll()) {
		return fmt.Sprintf("rootAll %+v, the tree's merge %+v", x.rootAll(), all)
	}
	for i := 1; i < len(times); i++ {
		if times[i] <= times[i-1] {
			return fmt.Sprintf("times out of order: %v", times)
		}
	}
	if len(times) != x.n {
		return fmt.Sprintf("%d nodes, n = %d", len(times), x.n)
	}
	if len(times) > 0 && (x.minT != times[0] || x.maxT != times[len(times)-1]) {
		return fmt.Sprintf("minT, maxT = %d, %d; the tree's ends %d, %d", x.minT, x.maxT, times[0], times[len(times)-1])
	}
	for i := range x.tailN {
		if (i > 0 && x.tailT[i] <= x.tailT[i-1]) || (len(times) > 0 && x.tailT[i] <= times[len(times)-1]) {
			return fmt.Sprintf("tail %v not after the tree's times %v", x.tailT[:x.tailN], times)
		}
	}
	return ""
}

// TestSlidingKeyDecodesIntoOwnStore: a key of a sliding pipeline comes
// with its slide tree in the same allocation (slidingKey), and decoding
// the key's stored state fills that tree; a store that holds records, or
// one of other specs, is replaced.
func TestSlidingKeyDecodesIntoOwnStore(t *testing.T) {
	specs := []AggSpec{{Name: "n", Op: Count}, {Name: "s", Op: Sum, Field: "x"}}
	e := &Engine{spec: Spec{Window: WindowSpec{Kind: Sliding, Size: 1000}, Aggregates: specs}}
	src := e.newKeyState(0, "k")
	src.sliding = true
	for _, tm := range []int64{5, 7, 7} {
		src.slide.add(tm, []Input{{Num: 1}, {Num: 2}})
	}
	c := stateCodec{specs: specs}
	b, err := c.encode(nil, src)
	if err != nil {
		t.Fatal(err)
	}
	ks := e.newKeyState(0, "k")
	own := ks.slide
	if err := c.decode(b, ks); err != nil {
		t.Fatal(err)
	}
	if ks.slide != own {
		t.Fatal("decoding replaced the key's own store")
	}
	var got []string
	_ = ks.slide.each(func(tm int64, acc []accum) error {
		got = append(got, fmt.Sprintf("%d:%d/%g", tm, acc[0].n, acc[1].f))
		return nil
	})
	if want := []string{"5:1/2", "7:2/4"}; !slices.Equal(got, want) {
		t.Fatalf("decoded times %v, want %v", got, want)
	}
	if err := c.decode(b, ks); err != nil {
		t.Fatal(err)
	}
	if ks.slide == own || ks.slide.len() != 2 {
		t.Fatalf("decoded into a store that held records (len %d)", ks.slide.len())
	}
	other := stateCodec{specs: slices.Clone(specs)}
	ks = e.newKeyState(0, "k")
	own = ks.slide
	if err := other.decode(b, ks); err != nil {
		t.Fatal(err)
	}
	if ks.slide == own || ks.slide.len() != 2 {
		t.Fatalf("decoded into a store of other specs (len %d)", ks.slide.len())
	}
}
