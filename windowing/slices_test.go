package windowing_test

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// slicedSpec returns a random hopping spec that slicing applies to: sizes
// that are and are not multiples of the hop, accumulating or retracting,
// every closing policy, with and without allowed lateness.
func slicedSpec(rng *rand.Rand) windowing.Spec {
	hop := int64(1+rng.Intn(8)) * 100
	size := hop * int64(2+rng.Intn(8))
	if rng.Intn(3) == 0 {
		size += int64(1+rng.Intn(3)) * 50 // not a multiple: slices of gcd(size, hop)
	}
	spec := windowing.Spec{
		Window:          windowing.WindowSpec{Kind: windowing.Hopping, Size: size, Hop: hop, Offset: int64(rng.Intn(16)) * 25},
		Mode:            []windowing.Mode{windowing.Accumulating, windowing.Retracting}[rng.Intn(2)],
		Aggregates:      testAggregates(),
		AllowedLateness: []int64{0, 300, 2000}[rng.Intn(3)],
		Trigger:         windowing.TriggerSpec{OnTime: rng.Intn(2) != 0, Closing: windowing.ClosingPolicy(rng.Intn(3))},
	}
	if !spec.Trigger.OnTime && spec.Trigger.Closing == windowing.ClosingNever {
		spec.Trigger.Closing = windowing.ClosingAlways
	}
	return spec
}

// lateStream returns records whose time mostly advances within delay of
// their partition's largest time so far, and one in six goes back up to 4 s:
// late, within allowed lateness or beyond it.
func lateStream(rng *rand.Rand, parts, n int, delay int64) []rec {
	maxTS := make([]int64, parts)
	for p := range maxTS {
		maxTS[p] = int64(rng.Intn(2000)) - 1000
	}
	keys := 1 + rng.Intn(5)
	out := make([]rec, 0, n)
	for i := 0; i < n; i++ {
		p := rng.Intn(parts)
		t := maxTS[p] - rng.Int63n(delay+1) + int64(rng.Intn(160))
		if rng.Intn(6) == 0 {
			t = maxTS[p] - rng.Int63n(4000)
		}
		t -= floorMod25(t) // on a 25 ms grid, like the windows: frontiers hit window ends exactly
		maxTS[p] = max(maxTS[p], t)
		out = append(out, rec{part: int32(p), key: fmt.Sprintf("k%d-%d", p, rng.Intn(keys)), t: t, x: float64(rng.Intn(200) - 100)})
	}
	return out
}

func floorMod25(t int64) int64 { return ((t % 25) + 25) % 25 }

// slicingRun is one engine over an in-memory Pebble, sliced or not.
type slicingRun struct {
	db  *state.DB
	eng *windowing.Engine
	col collector
}

func newSlicingRun(t *testing.T, spec windowing.Spec, wm watermark.Spec, cache int, noSlicing bool) *slicingRun {
	t.Helper()
	db, err := state.Open("db", state.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	r := &slicingRun{db: db}
	r.eng, err = windowing.New(spec, wm, db, &r.col, windowing.Options{CacheBytes: cache, NoSlicing: noSlicing})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSlicedHoppingEqualsPerWindow: hopping windows by slicing emit exactly
// the panes, byte for byte and in the same order, and drop exactly the
// records that aggregating every window for itself does, on random streams
// with late records beyond the bound (some within allowed lateness, some
// not), a tiny cache (every key's state goes through the store's encoding)
// and checkpoints along the way. The x values are integers, so sums are
// exact in either grouping.
func TestSlicedHoppingEqualsPerWindow(t *testing.T) {
	for seed := int64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewSource(seed))
		spec := slicedSpec(rng)
		// The stream's disorder exceeds the watermark's bound: late records.
		delay := int64(rng.Intn(24)) * 25
		recs := lateStream(rng, 1+rng.Intn(3), 200+rng.Intn(400), delay)
		wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, MaxDelay: delay}
		cache := 1 + rng.Intn(4000)
		t.Run(fmt.Sprintf("seed%d-%dby%d-%s-late%d", seed, spec.Window.Size, spec.Window.Hop, spec.Mode, spec.AllowedLateness), func(t *testing.T) {
			runs := []*slicingRun{newSlicingRun(t, spec, wm, cache, false), newSlicingRun(t, spec, wm, cache, true)}
			for _, r := range runs {
				for p := int32(0); p < 3; p++ {
					r.eng.Assign(p, 0, true)
				}
				now := int64(0)
				for i, x := range recs {
					ev := x.event(len(spec.Aggregates))
					if err := r.eng.Record(&ev, now); err != nil {
						t.Fatal(err)
					}
					if i%11 == 0 {
						now += 30
						if err := r.eng.Tick(now); err != nil {
							t.Fatal(err)
						}
					}
					if i%97 == 0 {
						if err := r.eng.Checkpoint(false); err != nil {
							t.Fatal(err)
						}
					}
				}
				if err := r.eng.Finish(); err != nil {
					t.Fatal(err)
				}
				if n := r.eng.OpenWindows(); n != 0 {
					t.Fatalf("%d windows open after the end", n)
				}
			}
			sliced, perWindow := paneLines(spec, runs[0].col.panes), paneLines(spec, runs[1].col.panes)
			if len(perWindow) == 0 {
				t.Fatal("no pane: the test shows nothing")
			}
			samePanes(t, "sliced against per window", sliced, perWindow)
			if runs[0].col.dropped != runs[1].col.dropped {
				t.Fatalf("dropped: sliced %d, per window %d", runs[0].col.dropped, runs[1].col.dropped)
			}
		})
	}
}

// TestSlicingTakesOverPerWindowState: state written without slicing (an
// earlier version, or NoSlicing) is read by an engine that slices: keys
// with per-window aggregates go on per window until their windows are gone,
// and the panes equal those of an engine that never slices.
func TestSlicingTakesOverPerWindowState(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewSource(seed))
		spec := slicedSpec(rng)
		delay := int64(rng.Intn(24)) * 25
		recs := lateStream(rng, 1+rng.Intn(3), 300+rng.Intn(300), delay)
		wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, MaxDelay: delay}
		cut := len(recs) / 2
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			var got [2][]string
			for i, sliceLater := range []bool{true, false} {
				db, err := state.Open("db", state.Options{FS: vfs.NewMem()})
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				for half, part := range [][]rec{recs[:cut], recs[cut:]} {
					var col collector
					eng, err := windowing.New(spec, wm, db, &col, windowing.Options{NoSlicing: half == 0 || !sliceLater})
					if err != nil {
						t.Fatal(err)
					}
					for p := int32(0); p < 3; p++ {
						eng.Assign(p, 0, true)
					}
					for _, x := range part {
						ev := x.event(len(spec.Aggregates))
						if err := eng.Record(&ev, 0); err != nil {
							t.Fatal(err)
						}
					}
					if half == 1 {
						if err := eng.Finish(); err != nil {
							t.Fatal(err)
						}
						got[i] = paneLines(spec, col.panes)
					}
					if err := eng.Checkpoint(false); err != nil {
						t.Fatal(err)
					}
				}
			}
			if len(got[1]) == 0 {
				t.Fatal("no pane after the switch: the test shows nothing")
			}
			samePanes(t, "after the switch to slicing against without it", got[0], got[1])
		})
	}
}
