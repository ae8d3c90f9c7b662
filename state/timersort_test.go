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
// shards and key lengths, and dead entries; its scratch is reused.
func TestSortPendingOrders(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 8))
	var sc sortScratch
	entry := func() pendingTimer {
		key := fmt.Sprintf("u%d", rng.IntN(300))
		switch rng.IntN(4) {
		case 0:
			key = "prefix12" + key // shares the first 8 bytes
		case 1:
			key = key[:1]
		}
		p := pending(windowing.Timer{Kind: windowing.EventTimer, Deadline: int64(rng.IntN(5)) - 2, Shard: uint32(rng.IntN(3)), Key: key, Start: int64(rng.IntN(4))})
		p.dead = rng.IntN(10) == 0
		return p
	}
	for round := range 300 {
		n := rng.IntN(3000)
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
// fill it (one deadline, 6,000 keys of 5 bytes in arrival order), with
// sortPending and with slices.SortFunc(comparePending) before it.
func BenchmarkSortPending(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	in := make([]pendingTimer, 6000)
	for i := range in {
		in[i] = pending(windowing.Timer{Kind: windowing.EventTimer, Deadline: 1700000010000, Key: fmt.Sprintf("u%04d", rng.IntN(10000)), Start: 1700000000000})
	}
	ts := make([]pendingTimer, len(in))
	b.Run("keys", func(b *testing.B) {
		var sc sortScratch
		for b.Loop() {
			copy(ts, in)
			sortPending(ts, &sc)
		}
	})
	b.Run("sortfunc", func(b *testing.B) {
		for b.Loop() {
			copy(ts, in)
			slices.SortFunc(ts, comparePending)
		}
	})
}
