package state

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/windowd/windowd/windowing"
)

// TestSortPendingOrders: sortPending leaves every run, short or long,
// random or already ordered, reversed or all equal, in comparePending
// order and as a permutation of what it got, across keys that share
// their 8-byte prefix, equal keys with other starts, negative deadlines,
// shards and key lengths, and dead entries; its scratch is reused. Every
// third round spreads the deadlines over a bucket's 1,024 (sliding
// windows: mostly one timer per deadline, some shared), which sorts by
// deadline first and then each run of one deadline; every seventh has
// one-letter keys (an odd number of radix passes).
func TestSortPendingOrders(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 8))
	var sc sortScratch
	deadlines, letters := 5, false
	entry := func() pendingTimer {
		key := fmt.Sprintf("u%d", rng.IntN(300))
		switch rng.IntN(4) {
		case 0:
			key = "prefix12" + key // shares the first 8 bytes
		case 1:
			key = key[:1]
		}
		shard := uint32(rng.IntN(3))
		if letters { // keys that differ in one byte: one radix pass
			key, shard = string(rune('a'+rng.IntN(26))), 0
		}
		p := pending(windowing.Timer{Kind: windowing.EventTimer, Deadline: int64(rng.IntN(deadlines)) - 2, Shard: shard, Key: key, Start: int64(rng.IntN(4))})
		p.dead = rng.IntN(10) == 0
		return p
	}
	for round := range 300 {
		n := rng.IntN(3000)
		deadlines, letters = 5, round%7 == 6
		if round%3 == 0 {
			deadlines = 1 << bucketShift
		}
		switch {
		case round < 20:
			n = sortKeyMin - 2 + round // both sides of the thresholds
		case round < 24:
			n = sortKeyMax - 2 + round - 20
		case round < 28:
			n = radixMin - 26 + round
		}
		ts := make([]pendingTimer, n)
		for i := range ts {
			ts[i] = entry()
		}
		switch round % 5 {
		case 1:
			slices.SortFunc(ts, comparePending)
		case 2:
			slices.SortFunc(ts, func(a, b pendingTimer) int { return comparePending(b, a) })
		case 3:
			for i := range ts {
				ts[i] = ts[0]
			}
		}
		want := slices.Clone(ts)
		slices.SortFunc(want, comparePending)
		sortPending(ts, &sc)
		if !slices.IsSortedFunc(ts, comparePending) {
			t.Fatalf("round %d (%d entries): not in comparePending order", round, n)
		}
		str := func(x []pendingTimer) []string {
			s := make([]string, len(x))
			for i, p := range x {
				s[i] = fmt.Sprintf("%+v", p)
			}
			sort.Strings(s)
			return s
		}
		if !slices.Equal(str(ts), str(want)) {
			t.Fatalf("round %d (%d entries): not a permutation of the input", round, n)
		}
	}
}

// BenchmarkSortPending sorts a bucket as tumbling windows by record key
// fill it (one deadline, 6,000 keys of 5 bytes in arrival order) and as
// sliding windows by record key do (about 1,000 timers over the bucket's
// 1,024 deadlines, out of order by up to 2 s of event time), with
// sortPending and with slices.SortFunc(comparePending) before it.
func BenchmarkSortPending(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	tumbling := make([]pendingTimer, 6000)
	for i := range tumbling {
		tumbling[i] = pending(windowing.Timer{Kind: windowing.EventTimer, Deadline: 1700000010000, Key: fmt.Sprintf("u%04d", rng.IntN(10000)), Start: 1700000000000})
	}
	sliding := make([]pendingTimer, 1000)
	for i := range sliding {
		t := 1700000000000 + int64(rng.IntN(1<<bucketShift))
		sliding[i] = pending(windowing.Timer{Kind: windowing.EventTimer, Deadline: t, Key: fmt.Sprintf("u%d", rng.IntN(10000)), Start: t})
	}
	for _, c := range []struct {
		name string
		in   []pendingTimer
	}{{"tumbling", tumbling}, {"sliding", sliding}} {
		ts := make([]pendingTimer, len(c.in))
		b.Run(c.name+"/keys", func(b *testing.B) {
			var sc sortScratch
			for b.Loop() {
				copy(ts, c.in)
				sortPending(ts, &sc)
			}
		})
		b.Run(c.name+"/sortfunc", func(b *testing.B) {
			for b.Loop() {
				copy(ts, c.in)
				slices.SortFunc(ts, comparePending)
			}
		})
	}
}
