package state

import (
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/windowd/windowd/windowing"
)

// timerSet against a model set: random additions and deletions (in order
// from the front, as windows fire, and anywhere, as sessions move their
// timers) among a few thousand timers of a few buckets, enough for stale
// entries, repeated entries and compactions. Every read must be the model's
// timers in compareTimers order.
func TestTimerSetMatchesModel(t *testing.T) {
	for seed := int64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewSource(seed))
		var universe []windowing.Timer
		for _, kind := range []windowing.TimerKind{windowing.EventTimer, windowing.ProcTimer} {
			for _, deadline := range []int64{-1025, -1024, -1, 0, 1023, 1024, 5000} {
				for k := 0; k < 150; k++ {
					key := string(rune('a'+k%26)) + string(rune('a'+k/26))
					if k%7 == 0 {
						key = "abcdefgh" + key // shares the integer prefix
					}
					universe = append(universe, windowing.Timer{Kind: kind, Deadline: deadline, Shard: uint32(k % 3), Key: key, Start: int64(k % 2)})
				}
			}
		}
		s := newTimerSet()
		model := map[windowing.Timer]bool{}
		want := func(kind windowing.TimerKind, from, upTo int64) []windowing.Timer {
			var out []windowing.Timer
			for tm := range model {
				if tm.Kind == kind && tm.Deadline >= from && tm.Deadline <= upTo {
					out = append(out, tm)
				}
			}
			slices.SortFunc(out, compareTimers)
			return out
		}
		for step := 0; step < 20000; step++ {
			switch r := rng.Intn(10); {
			case r < 5:
				// Only a timer not in the set is added (windowing.Store).
				if tm := universe[rng.Intn(len(universe))]; !model[tm] {
					s.add(tm)
					model[tm] = true
				}
			case r < 8:
				// Fire from the front, as the engine does.
				kind := windowing.TimerKind(1 + rng.Intn(2))
				if all := want(kind, math.MinInt64, math.MaxInt64); len(all) > 0 {
					if !s.remove(all[0]) {
						t.Fatalf("seed %d step %d: first timer %+v not removed", seed, step, all[0])
					}
					delete(model, all[0])
				}
			default:
				tm := universe[rng.Intn(len(universe))]
				if got := s.remove(tm); got != model[tm] {
					t.Fatalf("seed %d step %d: remove(%+v) = %v, want %v", seed, step, tm, got, model[tm])
				}
				delete(model, tm)
			}
			if s.len() != len(model) {
				t.Fatalf("seed %d step %d: len %d, want %d", seed, step, s.len(), len(model))
			}
			if step%50 != 0 {
				continue
			}
			// next first: the reads below sort the buckets.
			for _, kind := range []windowing.TimerKind{windowing.EventTimer, windowing.ProcTimer} {
				from := int64(rng.Intn(8000) - 3000)
				w := want(kind, from, math.MaxInt64)
				if d, ok := s.next(kind, from); ok != (len(w) > 0) || (ok && d != w[0].Deadline) {
					t.Fatalf("seed %d step %d: next(%d, %d) = %d %v, want %v", seed, step, kind, from, d, ok, w[:min(len(w), 1)])
				}
			}
			var all []windowing.Timer
			s.each(func(tm windowing.Timer) bool { all = append(all, tm); return true })
			wantAll := append(want(windowing.EventTimer, math.MinInt64, math.MaxInt64), want(windowing.ProcTimer, math.MinInt64, math.MaxInt64)...)
			if !slices.Equal(all, wantAll) {
				k := 0
				for k < len(all) && k < len(wantAll) && all[k] == wantAll[k] {
					k++
				}
				t.Fatalf("seed %d step %d: each: %d timers, want %d; first difference at %d:\n got  %v\n want %v", seed, step, len(all), len(wantAll), k, all[k:min(k+3, len(all))], wantAll[k:min(k+3, len(wantAll))])
			}
			kind := windowing.TimerKind(1 + rng.Intn(2))
			from, upTo := int64(rng.Intn(8000)-3000), int64(rng.Intn(8000)-2000)
			chunk := 1 + rng.Intn(50)
			var got []windowing.Timer
			var after *windowing.Timer
			for {
				n := len(got)
				s.ascend(kind, from, upTo, after, func(tm windowing.Timer) bool {
					got = append(got, tm)
					return len(got)-n < chunk
				})
				if len(got)-n < chunk {
					break
				}
				last := got[len(got)-1]
				after = &last
			}
			if w := want(kind, from, upTo); !slices.Equal(got, w) {
				t.Fatalf("seed %d step %d: ascend(%d, %d, %d) by %d:\n got  %v\n want %v", seed, step, kind, from, upTo, chunk, got, w)
			}
		}
		if s.compactions == 0 {
			t.Errorf("seed %d: no bucket was compacted", seed)
		}
		s.clear()
		if s.len() != 0 || s.buckets.Len() != 0 {
			t.Fatalf("seed %d: %d timers, %d buckets after clear", seed, s.len(), s.buckets.Len())
		}
	}
}
