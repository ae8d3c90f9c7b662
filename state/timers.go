package state

import (
	"cmp"
	"encoding/binary"
	"math"
	"slices"
	"strings"

	"github.com/RaduBerinde/btreemap"

	"github.com/windowd/windowd/windowing"
)

// pendingTimer is a timer of a timerSet with the first bytes of its key as
// an integer, so that most comparisons of two timers of the same deadline
// (thousands of keys fire at one deadline) compare integers, not strings.
type pendingTimer struct {
	windowing.Timer
	prefix uint64 // the first 8 bytes of Key, big-endian, zero-padded
	dead   bool   // deleted from the set (timerBucket)
}

// pending returns t with its key prefix.
func pending(t windowing.Timer) pendingTimer {
	var b [8]byte
	copy(b[:], t.Key)
	return pendingTimer{Timer: t, prefix: binary.BigEndian.Uint64(b[:])}
}

// comparePending orders pending timers as compareTimers does: for keys of
// the same length, the prefixes order as the keys' first 8 bytes, and
// equal prefixes leave the order to the whole keys.
func comparePending(a, b pendingTimer) int {
	switch {
	case a.Kind != b.Kind:
		return cmp.Compare(a.Kind, b.Kind)
	case a.Deadline != b.Deadline:
		return cmp.Compare(a.Deadline, b.Deadline)
	case a.Shard != b.Shard:
		return cmp.Compare(a.Shard, b.Shard)
	case len(a.Key) != len(b.Key):
		return cmp.Compare(len(a.Key), len(b.Key))
	case a.prefix != b.prefix:
		return cmp.Compare(a.prefix, b.prefix)
	case a.Key != b.Key:
		return strings.Compare(a.Key, b.Key)
	}
	return cmp.Compare(a.Start, b.Start)
}

// bucketShift sets the deadlines a timerBucket holds: those with the same
// deadline>>bucketShift (about one second of milliseconds).
const bucketShift = 10

// bucketID names a timerBucket; buckets order by it as their timers do.
type bucketID struct {
	kind windowing.TimerKind
	span int64 // deadline >> bucketShift
}

func compareBuckets(a, b bucketID) int {
	if a.kind != b.kind {
		return cmp.Compare(a.kind, b.kind)
	}
	return cmp.Compare(a.span, b.span)
}

// timerBucket holds the pending timers of one bucketID, appended as they
// come and sorted only when read or searched, so that adding a timer costs
// no comparisons and the timers of a deadline, which fire in order, leave
// from the front without moving the rest. A deletion elsewhere (a session
// that grows moves its timer) searches the sorted entries and scans the
// few appended since they were sorted; more than maxUnsorted of those are
// sorted and merged into the rest first.
type timerBucket struct {
	id bucketID
	// timers[head:] are the entries: one for each timer of the set in
	// this bucket, and dead ones (a timer deleted other than from the
	// front is marked dead until the bucket is compacted; a timer added
	// back then has a dead and a live entry).
	timers []pendingTimer
	head   int
	live   int // entries not dead
	// timers[head:sorted] are in comparePending order, timers[sorted:]
	// as appended; head <= sorted.
	sorted int
}

// maxUnsorted is how many entries appended since the last sort a deletion
// scans rather than sorting them first.
const maxUnsorted = 32

// dead is the number of dead entries.
func (b *timerBucket) dead() int { return len(b.timers) - b.head - b.live }

// sort puts the entries in order: the appended ones are sorted and merged
// into the sorted ones, from the back, through scratch. The sorted entries
// after each appended one are found by binary search and moved as one
// block: a bucket the frontier has reached gets a few timers at a time
// (records out of order by less than the watermark's delay) in front of
// hundreds (sliding windows: about one timer per millisecond of the
// bucket), and each sort would otherwise compare and move them one by one.
func (b *timerBucket) sort(sc *sortScratch) {
	if b.sorted == len(b.timers) {
		return
	}
	tail := b.timers[b.sorted:]
	sortPending(tail, sc)
	scratch := &sc.timers
	if b.sorted > b.head && comparePending(b.timers[b.sorted-1], tail[0]) > 0 {
		add := append((*scratch)[:0], tail...)
		end, k := b.sorted, len(b.timers) // timers[head:end] not moved yet; timers[k:] placed
		for j := len(add) - 1; j >= 0; j-- {
			lo, hi := b.head, end // the first of timers[lo:hi] after add[j]
			for lo < hi {
				m := int(uint(lo+hi) >> 1)
				if comparePending(b.timers[m], add[j]) > 0 {
					hi = m
				} else {
					lo = m + 1
				}
			}
			n := end - lo
			copy(b.timers[k-n:k], b.timers[lo:end])
			k -= n + 1
			end = lo
			b.timers[k] = add[j]
		}
		clear(add)
		if cap(add) > maxReusedDeletes {
			add = nil // a one-off large merge: let it go
		}
		*scratch = add
	}
	b.sorted = len(b.timers)
}

// find returns the index of t's live entry, or -1.
func (b *timerBucket) find(t windowing.Timer, scratch *sortScratch) int {
	if len(b.timers)-b.sorted > maxUnsorted {
		b.sort(scratch)
	}
	lo := b.sorted
	sorted := b.timers[b.head:lo]
	i, _ := slices.BinarySearchFunc(sorted, pending(t), comparePending)
	for ; i < len(sorted) && sorted[i].Timer == t; i++ {
		if !sorted[i].dead {
			return b.head + i // (a timer deleted and added back has a dead entry too)
		}
	}
	for j := lo; j < len(b.timers); j++ {
		if !b.timers[j].dead && b.timers[j].Timer == t {
			return j
		}
	}
	return -1
}

// timerSet is the set of timers added since the last commit (DB.added),
// in buckets of nearby deadlines. As windowing.Store says, a timer is
// added only when it is not in the set and deleted only when it is in the
// database: the set does not look for a timer it adds. In windows of about
// one record each, every record adds a timer and a later one deletes it,
// mostly in deadline order: an ordered tree would pay a search for each
// addition and a shift of a node for each deletion, where a bucket pays an
// append, its share of one sort, and an increment.
type timerSet struct {
	n       int // timers in the set
	buckets *btreemap.BTreeMap[bucketID, *timerBucket]
	last    *timerBucket   // the bucket used last, nil: none
	free    []*timerBucket // released buckets, for reuse
	scratch sortScratch    // timerBucket.sort's
	// compactions counts compact calls (for tests).
	compactions int
}

// maxFreeBuckets bounds timerSet.free.
const maxFreeBuckets = 8

func newTimerSet() *timerSet {
	return &timerSet{
		buckets: btreemap.New[bucketID, *timerBucket](8, compareBuckets),
	}
}

// len is the number of timers in the set.
func (s *timerSet) len() int { return s.n }

// bucket returns the bucket with id, creating it when create is set;
// nil when there is none.
func (s *timerSet) bucket(id bucketID, create bool) *timerBucket {
	if s.last != nil && s.last.id == id {
		return s.last
	}
	if _, b, ok := s.buckets.Get(id); ok {
		s.last = b
		return b
	}
	if !create {
		return nil
	}
	var b *timerBucket
	if n := len(s.free); n > 0 {
		b, s.free = s.free[n-1], s.free[:n-1]
	} else {
		b = &timerBucket{}
	}
	b.id = id
	s.buckets.ReplaceOrInsert(id, b)
	s.last = b
	return b
}

func idOf(t windowing.Timer) bucketID {
	return bucketID{kind: t.Kind, span: t.Deadline >> bucketShift}
}

// add puts t, which is not in the set, in it.
func (s *timerSet) add(t windowing.Timer) {
	b := s.bucket(idOf(t), true)
	p := pending(t)
	inOrder := b.sorted == len(b.timers) && (len(b.timers) == b.head || comparePending(b.timers[len(b.timers)-1], p) <= 0)
	b.timers = append(b.timers, p)
	if inOrder {
		b.sorted = len(b.timers)
	}
	b.live++
	s.n++
}

// remove takes t out of the set and reports whether it was in it.
func (s *timerSet) remove(t windowing.Timer) bool {
	b := s.bucket(idOf(t), false)
	if b == nil {
		return false
	}
	if h := &b.timers[b.head]; !h.dead && h.Timer == t {
		// Windows fire in timer order: mostly the first entry.
		b.timers[b.head] = pendingTimer{}
		b.head++
		for b.head < len(b.timers) && b.timers[b.head].dead {
			b.timers[b.head] = pendingTimer{}
			b.head++
		}
		b.sorted = max(b.sorted, b.head)
	} else {
		i := b.find(t, &s.scratch)
		if i < 0 {
			return false
		}
		b.timers[i].dead = true
	}
	b.live--
	s.n--
	switch {
	case b.live == 0:
		s.release(b)
	case b.dead() > 64 && b.dead() > b.live:
		s.compact(b)
	}
	return true
}

// compact drops b's dead entries.
func (s *timerSet) compact(b *timerBucket) {
	s.compactions++
	b.sort(&s.scratch)
	kept := b.timers[:0]
	for _, p := range b.timers[b.head:] {
		if !p.dead {
			kept = append(kept, p)
		}
	}
	clear(b.timers[len(kept):])
	b.timers, b.head, b.sorted = kept, 0, len(kept)
}

// release removes b, which holds no timer of the set, and keeps it for reuse.
func (s *timerSet) release(b *timerBucket) {
	s.buckets.Delete(b.id)
	if s.last == b {
		s.last = nil
	}
	clear(b.timers)
	b.timers, b.head, b.live, b.sorted = b.timers[:0], 0, 0, 0
	if len(s.free) < maxFreeBuckets && cap(b.timers) <= maxReusedDeletes {
		s.free = append(s.free, b)
	}
}

// firstAt is the lowest possible timer of kind with deadline from: it
// orders before every timer of kind due at or after from.
func firstAt(kind windowing.TimerKind, from int64) pendingTimer {
	return pending(windowing.Timer{Kind: kind, Deadline: from, Start: math.MinInt64})
}

// ascend calls fn with the timers of kind with from <= deadline <= upTo,
// after after when it is set, in order, until fn returns false.
func (s *timerSet) ascend(kind windowing.TimerKind, from, upTo int64, after *windowing.Timer, fn func(windowing.Timer) bool) {
	lo := firstAt(kind, from)
	gt := false
	if after != nil {
		lo, gt = pending(*after), true
	}
	s.buckets.AscendFunc(btreemap.GE(bucketID{kind, lo.Deadline >> bucketShift}), btreemap.Max[bucketID](), func(id bucketID, b *timerBucket) bool {
		if id.kind != kind || id.span > upTo>>bucketShift {
			return false
		}
		b.sort(&s.scratch)
		entries := b.timers[b.head:]
		i, found := slices.BinarySearchFunc(entries, lo, comparePending)
		for found && gt && i < len(entries) && entries[i].Timer == lo.Timer {
			i++ // after itself, and its dead entries
		}
		return emit(b, b.head+i, upTo, fn)
	})
}

// next returns the earliest deadline at or after from of the timers of
// kind, and whether there is one. It does not sort: the first bucket with
// such a timer holds the earliest, found by a binary search when the
// bucket is sorted and by a scan otherwise (the bucket still filling,
// which a sort would only leave to be merged again).
func (s *timerSet) next(kind windowing.TimerKind, from int64) (next int64, found bool) {
	s.buckets.AscendFunc(btreemap.GE(bucketID{kind, from >> bucketShift}), btreemap.Max[bucketID](), func(id bucketID, b *timerBucket) bool {
		if id.kind != kind {
			return false
		}
		if b.sorted == len(b.timers) {
			entries := b.timers[b.head:]
			i, _ := slices.BinarySearchFunc(entries, firstAt(kind, from), comparePending)
			for ; i < len(entries); i++ {
				if !entries[i].dead {
					next, found = entries[i].Deadline, true
					break
				}
			}
			return !found
		}
		for j := b.head; j < len(b.timers); j++ {
			if p := &b.timers[j]; !p.dead && p.Deadline >= from && (!found || p.Deadline < next) {
				next, found = p.Deadline, true
			}
		}
		return !found
	})
	return next, found
}

// each calls fn with every timer of the set, in order, until fn returns false.
func (s *timerSet) each(fn func(windowing.Timer) bool) {
	s.buckets.AscendFunc(btreemap.Min[bucketID](), btreemap.Max[bucketID](), func(_ bucketID, b *timerBucket) bool {
		b.sort(&s.scratch)
		return emit(b, b.head, math.MaxInt64, fn)
	})
}

// emit calls fn with the timers of the sorted bucket b from its entry i on,
// while their deadline is at most upTo, skipping dead entries. It reports whether fn wants more.
func emit(b *timerBucket, i int, upTo int64, fn func(windowing.Timer) bool) bool {
	for j := i; j < len(b.timers); j++ {
		t := &b.timers[j]
		if t.Deadline > upTo {
			return false
		}
		if t.dead {
			continue
		}
		if !fn(t.Timer) {
			return false
		}
	}
	return true
}

// clear empties the set.
func (s *timerSet) clear() {
	s.buckets.AscendFunc(btreemap.Min[bucketID](), btreemap.Max[bucketID](), func(_ bucketID, b *timerBucket) bool {
		clear(b.timers)
		b.timers, b.head, b.live, b.sorted = b.timers[:0], 0, 0, 0
		if len(s.free) < maxFreeBuckets && cap(b.timers) <= maxReusedDeletes {
			s.free = append(s.free, b)
		}
		return true
	})
	s.buckets.Clear(true)
	s.last, s.n = nil, 0
}
