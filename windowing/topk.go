package windowing

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/windowd/windowd/codec"
)

// This file holds the top_k aggregate (docs/SEMANTICS.md, Aggregates): a
// Space-Saving summary of at most Capacity counters, in the mergeable form
// of Agarwal et al. ("Mergeable summaries", 2012).
//
// Each counter holds a value, its count and its error; floor bounds the
// count of every value without a counter. Invariants, for the multiset of
// values added:
//   - count − error <= true count <= count for every counter, and true
//     count <= floor for every other value;
//   - while at most Capacity distinct values were added, floor is 0 and
//     the counters are exactly the values with their counts (error 0).
//
// A merge adds the two summaries as if each had a counter for every value
// (a value without one counts the summary's floor, as count and error),
// then keeps the Capacity counters first by (count desc, value asc),
// raising floor to the largest count dropped. An add is a merge with the
// summary of one value. The merge is commutative and deterministic, and,
// while nothing is dropped, exact and so independent of order and
// grouping; once counters are dropped, the result depends on the order of
// the input and of the merges, and only the bounds above are promised.

// topEntry is one counter.
type topEntry struct {
	v      string
	n, err uint64
}

// topK is the summary of the file comment.
type topK struct {
	e     []topEntry // sorted by value
	floor uint64
}

func (s *AggSpec) capacity() int {
	if s.Capacity > 0 {
		return s.Capacity
	}
	return DefaultCapacity(max(s.K, 1))
}

// search returns the index of the first counter whose value is >= v.
func (t *topK) search(v string) int {
	lo, hi := 0, len(t.e)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.e[m].v < v {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// add counts v once. v may point into a record's buffers: a new counter
// keeps a copy.
func (t *topK) add(spec *AggSpec, v string) {
	i := t.search(v)
	if i < len(t.e) && t.e[i].v == v {
		t.e[i].n++
		return
	}
	t.e = append(t.e, topEntry{})
	copy(t.e[i+1:], t.e[i:])
	t.e[i] = topEntry{v: strings.Clone(v), n: t.floor + 1, err: t.floor}
	if len(t.e) > spec.capacity() {
		t.dropLast()
	}
}

// topBefore reports whether a comes before b in the summary's order: count
// descending, then value ascending.
func topBefore(a, b *topEntry) bool {
	return a.n > b.n || a.n == b.n && a.v < b.v
}

// dropLast drops the counter last in (count desc, value asc) order.
func (t *topK) dropLast() {
	last := 0
	for i := 1; i < len(t.e); i++ {
		if topBefore(&t.e[last], &t.e[i]) {
			last = i
		}
	}
	t.floor = max(t.floor, t.e[last].n)
	t.e = slices.Delete(t.e, last, last+1)
}

// merge adds r to t.
func (t *topK) merge(spec *AggSpec, r *topK) {
	out := make([]topEntry, 0, len(t.e)+len(r.e))
	i, j := 0, 0
	for i < len(t.e) || j < len(r.e) {
		switch {
		case j == len(r.e) || i < len(t.e) && t.e[i].v < r.e[j].v:
			a := t.e[i]
			out = append(out, topEntry{v: a.v, n: a.n + r.floor, err: a.err + r.floor})
			i++
		case i == len(t.e) || r.e[j].v < t.e[i].v:
			b := r.e[j]
			out = append(out, topEntry{v: b.v, n: b.n + t.floor, err: b.err + t.floor})
			j++
		default:
			a, b := t.e[i], r.e[j]
			out = append(out, topEntry{v: a.v, n: a.n + b.n, err: a.err + b.err})
			i++
			j++
		}
	}
	t.e = out
	t.floor += r.floor
	t.shrink(spec.capacity())
}

// shrink keeps the first c counters in (count desc, value asc) order.
func (t *topK) shrink(c int) {
	if len(t.e) <= c {
		return
	}
	order := make([]int, len(t.e))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if topBefore(&t.e[a], &t.e[b]) {
			return -1
		}
		return 1
	})
	// order[c] is the largest count dropped.
	t.floor = max(t.floor, t.e[order[c]].n)
	drop := make([]bool, len(t.e))
	for _, i := range order[c:] {
		drop[i] = true
	}
	n := 0
	for i := range t.e {
		if !drop[i] {
			t.e[n] = t.e[i]
			n++
		}
	}
	clear(t.e[n:])
	t.e = t.e[:n]
}

func (t *topK) clone() topK {
	return topK{e: append([]topEntry(nil), t.e...), floor: t.floor}
}

// appendTopK appends the pane value of a top_k aggregate: the first K
// counters in (count desc, value asc) order, as
// [{"value":"/home","count":120,"error":0}, ...].
func appendTopK(b []byte, spec *AggSpec, t *topK) []byte {
	b = append(b, '[')
	if t == nil || len(t.e) == 0 {
		return append(b, ']')
	}
	order := make([]*topEntry, len(t.e))
	for i := range t.e {
		order[i] = &t.e[i]
	}
	slices.SortFunc(order, func(a, b *topEntry) int {
		if topBefore(a, b) {
			return -1
		}
		return 1
	})
	for i, e := range order[:min(len(order), max(spec.K, 1))] {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"value":`...)
		b = codec.AppendJSONString(b, e.v)
		b = append(b, `,"count":`...)
		b = strconv.AppendUint(b, e.n, 10)
		b = append(b, `,"error":`...)
		b = strconv.AppendUint(b, e.err, 10)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendBinary appends the summary's binary form: floor and the number of
// counters, then each counter in value order as the length of the prefix
// it shares with the previous value, the rest of the value (length and
// bytes), its count and its error, all varints.
func (t *topK) appendBinary(b []byte) []byte {
	b = binary.AppendUvarint(b, t.floor)
	b = binary.AppendUvarint(b, uint64(len(t.e)))
	prev := ""
	for _, e := range t.e {
		p := 0
		for p < len(prev) && p < len(e.v) && prev[p] == e.v[p] {
			p++
		}
		b = binary.AppendUvarint(b, uint64(p))
		b = binary.AppendUvarint(b, uint64(len(e.v)-p))
		b = append(b, e.v[p:]...)
		b = binary.AppendUvarint(b, e.n)
		b = binary.AppendUvarint(b, e.err)
		prev = e.v
	}
	return b
}

// topK reads what topK.appendBinary wrote.
func (d *decoder) topK(spec *AggSpec) (*topK, error) {
	t := &topK{floor: d.uvarint()}
	n := d.uvarint()
	if n > uint64(d.left()) {
		return nil, errCorruptState
	}
	t.e = make([]topEntry, 0, n)
	prev := ""
	for i := uint64(0); i < n && d.err() == nil; i++ {
		p := d.uvarint()
		rest := d.bytes(d.uvarint())
		if p > uint64(len(prev)) {
			return nil, fmt.Errorf("decode %s: %w", spec.Name, errCorruptState)
		}
		v := prev[:p] + string(rest)
		e := topEntry{v: v, n: d.uvarint(), err: d.uvarint()}
		if (i > 0 && v <= prev) || e.err >= e.n {
			return nil, fmt.Errorf("decode %s: %w", spec.Name, errCorruptState)
		}
		t.e = append(t.e, e)
		prev = v
	}
	// A smaller capacity than the state was written with drops counters
	// as a merge does.
	t.shrink(spec.capacity())
	return t, d.err()
}
