package state

import (
	"slices"
	"strings"
)

// sortScratch is the reused memory of timerBucket.sort.
type sortScratch struct {
	timers []pendingTimer
	keys   []pendingKey
	radix  []pendingKey // radixKeys' second buffer
}

// sortKeyMin is the fewest appended entries sortPending sorts by keys:
// below it slices.SortFunc costs less than building them. Above
// sortKeyMax it sorts in place too: the keys and the copy take 96 bytes
// per entry, and a bucket of millions of timers (millions of open windows
// that end together) must not need that much memory on top.
//
// From radixMin entries the keys are sorted by radix (radixKeys): the
// quicksort's comparisons of random keys mispredict about every other
// branch, and a bucket of a tumbling pipeline by record key holds one
// timer per key.
const (
	sortKeyMin = 64
	radixMin   = 256
	sortKeyMax = 1 << 16
)

// pendingKey is an entry's comparePending fields as integers, and where
// it is: with one kind per bucket, entries order as (deadline, shardLen,
// prefix), then as their whole keys and starts (comparePending) when
// those are equal.
type pendingKey struct {
	// words are prefix, shardLen and deadline, least significant first:
	// deadline is Deadline with the sign bit flipped (unsigned order is
	// signed order), shardLen is Shard << 32 | len(Key).
	words [3]uint64
	at    int
}

// Indexes of pendingKey.words.
const (
	wordPrefix = iota
	wordShardLen
	wordDeadline
)

// sortPending sorts ts (entries of one bucket, so of one kind) into
// comparePending order. Large runs are sorted as 32-byte keys (with
// inlined comparisons, or by radix from radixMin entries), then moved
// into place through sc: against slices.SortFunc over the 64-byte entries
// with comparePending that saves the indirect call per comparison and
// most of the moving.
func sortPending(ts []pendingTimer, sc *sortScratch) {
	if len(ts) < sortKeyMin || len(ts) > sortKeyMax {
		slices.SortFunc(ts, comparePending)
		return
	}
	ks := sc.keys[:0]
	for i := range ts {
		t := &ts[i]
		ks = append(ks, pendingKey{[3]uint64{t.prefix, uint64(t.Shard)<<32 | uint64(len(t.Key)), uint64(t.Deadline) ^ 1<<63}, i})
	}
	sorted := ks
	if len(ks) < radixMin {
		sortKeys(ks, ts)
	} else {
		sc.radix = slices.Grow(sc.radix[:0], len(ks))
		sorted = radixKeys(ks, sc.radix[:len(ks)], ts)
	}
	out := append(sc.timers[:0], ts...)
	for i, k := range sorted {
		ts[i] = out[k.at]
	}
	clear(out)
	sc.keys, sc.timers = ks[:0], out[:0]
	if cap(ks) > maxReusedDeletes {
		sc.keys, sc.timers, sc.radix = nil, nil, nil // a one-off large sort: let them go
	}
}

// radixKeys sorts ks into lessKey order, through tmp (as long as ks), and
// returns whichever of the two holds the result. It is a stable radix
// sort by (deadline, shardLen, prefix), least significant byte first,
// that skips every byte all keys share (a bucket's one deadline, the
// bytes past the longest key's); runs of keys equal in all three words
// are then ordered by sortKeys (whole keys, then starts).
//
// When the deadlines differ the keys are sorted by deadline alone first
// and only each run of one deadline by the rest: a bucket of sliding
// windows holds about one timer per deadline (a record's time), so most
// runs are one entry long and the key's bytes, five radix passes of a
// short key, are never looked at.
func radixKeys(ks, tmp []pendingKey, ts []pendingTimer) []pendingKey {
	var differ [3]uint64 // the bits in which some key differs from the first
	first := ks[0].words
	for i := range ks {
		for w, v := range ks[i].words {
			differ[w] |= v ^ first[w]
		}
	}
	if differ[wordDeadline] == 0 || differ[wordPrefix]|differ[wordShardLen] == 0 {
		src := radixPasses(ks, tmp, differ)
		sortRuns(src, ts)
		return src
	}
	src := radixPasses(ks, tmp, [3]uint64{wordDeadline: differ[wordDeadline]})
	other := tmp
	if &src[0] == &tmp[0] {
		other = ks
	}
	for i := 0; i < len(src); {
		j := i + 1
		for j < len(src) && src[j].words[wordDeadline] == src[i].words[wordDeadline] {
			j++
		}
		switch {
		case j-i >= radixMin:
			if r := radixKeys(src[i:j], other[i:j], ts); &r[0] != &src[i] {
				copy(src[i:j], r)
			}
		case j-i > 1:
			sortKeys(src[i:j], ts)
		}
		i = j
	}
	return src
}

// radixPasses sorts ks by the bytes of its words set in differ, through
// tmp, and returns whichever of the two holds the result.
func radixPasses(ks, tmp []pendingKey, differ [3]uint64) []pendingKey {
	src, dst := ks, tmp
	var count [256]int
	for w := range differ {
		for shift := 0; shift < 64; shift += 8 {
			if byte(differ[w]>>shift) == 0 {
				continue
			}
			count = [256]int{}
			for i := range src {
				count[byte(src[i].words[w]>>shift)]++
			}
			sum := 0
			for v, n := range count {
				count[v] = sum
				sum += n
			}
			for i := range src {
				v := byte(src[i].words[w] >> shift)
				dst[count[v]] = src[i]
				count[v]++
			}
			src, dst = dst, src
		}
	}
	return src
}

// sortRuns orders each run of keys equal in all three words by sortKeys.
func sortRuns(ks []pendingKey, ts []pendingTimer) {
	for i := 0; i < len(ks); {
		j := i + 1
		for j < len(ks) && ks[j].words == ks[i].words {
			j++
		}
		if j-i > 1 {
			sortKeys(ks[i:j], ts)
		}
		i = j
	}
}

// lessKey reports whether the entry of a orders before that of b.
func lessKey(a, b *pendingKey, ts []pendingTimer) bool {
	switch {
	case a.words[wordDeadline] != b.words[wordDeadline]:
		return a.words[wordDeadline] < b.words[wordDeadline]
	case a.words[wordShardLen] != b.words[wordShardLen]:
		return a.words[wordShardLen] < b.words[wordShardLen]
	case a.words[wordPrefix] != b.words[wordPrefix]:
		return a.words[wordPrefix] < b.words[wordPrefix]
	}
	x, y := &ts[a.at], &ts[b.at]
	if c := strings.Compare(x.Key, y.Key); c != 0 {
		return c < 0
	}
	return x.Start < y.Start
}

// sortKeys sorts ks by lessKey: quicksort with the median of three,
// insertion sort for short runs, and heapsort past a depth bound (no
// quadratic inputs).
func sortKeys(ks []pendingKey, ts []pendingTimer) {
	depth := 0
	for n := len(ks); n > 0; n >>= 1 {
		depth += 2
	}
	quickKeys(ks, ts, depth)
}

func quickKeys(ks []pendingKey, ts []pendingTimer, depth int) {
	for len(ks) > 12 {
		if depth == 0 {
			heapKeys(ks, ts)
			return
		}
		depth--
		// Median of first, middle and last to ks[0], as the pivot.
		m, l := len(ks)/2, len(ks)-1
		if lessKey(&ks[m], &ks[0], ts) {
			ks[m], ks[0] = ks[0], ks[m]
		}
		if lessKey(&ks[l], &ks[0], ts) {
			ks[l], ks[0] = ks[0], ks[l]
		}
		if lessKey(&ks[l], &ks[m], ts) {
			ks[l], ks[m] = ks[m], ks[l]
		}
		ks[0], ks[m] = ks[m], ks[0] // the median
		// Hoare partition around ks[0].
		i, j := 1, l
		for {
			for i <= j && lessKey(&ks[i], &ks[0], ts) {
				i++
			}
			for i <= j && lessKey(&ks[0], &ks[j], ts) {
				j--
			}
			if i >= j {
				break
			}
			ks[i], ks[j] = ks[j], ks[i]
			i++
			j--
		}
		ks[0], ks[j] = ks[j], ks[0]
		// Recurse into the shorter side, loop on the longer.
		if j < len(ks)-1-j {
			quickKeys(ks[:j], ts, depth)
			ks = ks[j+1:]
		} else {
			quickKeys(ks[j+1:], ts, depth)
			ks = ks[:j]
		}
	}
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && lessKey(&ks[j], &ks[j-1], ts); j-- {
			ks[j], ks[j-1] = ks[j-1], ks[j]
		}
	}
}

func heapKeys(ks []pendingKey, ts []pendingTimer) {
	n := len(ks)
	down := func(i, n int) {
		for {
			c := 2*i + 1
			if c >= n {
				return
			}
			if c+1 < n && lessKey(&ks[c], &ks[c+1], ts) {
				c++
			}
			if !lessKey(&ks[i], &ks[c], ts) {
				return
			}
			ks[i], ks[c] = ks[c], ks[i]
			i = c
		}
	}
	for i := n/2 - 1; i >= 0; i-- {
		down(i, n)
	}
	for end := n - 1; end > 0; end-- {
		ks[0], ks[end] = ks[end], ks[0]
		down(0, end)
	}
}
