package repartition

import (
	"slices"
	"sort"

	"github.com/windowd/windowd/codec"
)

// Layout numbers the upstream partitions of a pipeline's input topics
// (docs/SEMANTICS.md, Several inputs): partition p of input i is upstream
// partition First(i) + p, so the upstream partitions of all inputs are
// 0..Total()-1 and a pipeline with one input keeps its partition numbers.
type Layout struct {
	first []int32 // per input: its first upstream partition
	total int32
}

// NewLayout is the layout of inputs of counts partitions each.
func NewLayout(counts []int32) Layout {
	l := Layout{first: make([]int32, len(counts))}
	for i, n := range counts {
		l.first[i] = l.total
		l.total += n
	}
	return l
}

// ID is the upstream partition of partition p of input i.
func (l Layout) ID(i int, p int32) int32 { return l.first[i] + p }

// Input returns the input and its partition of upstream partition u (in
// 0..Total()-1).
func (l Layout) Input(u int32) (i int, p int32) {
	i = sort.Search(len(l.first), func(j int) bool { return l.first[j] > u }) - 1
	return i, u - l.first[i]
}

// Has reports whether input i had partition p at start: a partition added
// since would take another input's number, and waits for a restart. With
// one input every partition has its number (stage 2 takes a new one in
// after a restart, as before).
func (l Layout) Has(i int, p int32) bool {
	if len(l.first) <= 1 {
		return true
	}
	end := l.total
	if i+1 < len(l.first) {
		end = l.first[i+1]
	}
	return p >= 0 && l.first[i]+p < end
}

// Source is the wire name of upstream partition u (in 0..Total()-1).
func (l Layout) Source(u int32) Source {
	i, p := l.Input(u)
	return Source{In: int32(i), P: p}
}

// Upstream is the upstream partition of input partition s, as this layout
// numbers it; false when the layout does not have it: an input this
// pipeline does not read, or a partition added since the layout was made
// (written by an instance started later; with one input too, unlike Has).
func (l Layout) Upstream(s Source) (int32, bool) {
	if s.In < 0 || int(s.In) >= len(l.first) || !l.Has(int(s.In), s.P) {
		return 0, false
	}
	u := l.ID(int(s.In), s.P)
	return u, u < l.total
}

// Counts is the partition count of each input, in order: NewLayout(l.Counts())
// is l.
func (l Layout) Counts() []int32 {
	out := make([]int32, len(l.first))
	for i, f := range l.first {
		end := l.total
		if i+1 < len(l.first) {
			end = l.first[i+1]
		}
		out[i] = end - f
	}
	return out
}

// Equal reports whether l and o number the same partitions of the same inputs.
func (l Layout) Equal(o Layout) bool {
	return l.total == o.total && slices.Equal(l.first, o.first)
}

// Encode writes l's encoding (its counts).
func (l Layout) Encode(w *codec.Writer) {
	w.Uvarint(uint64(len(l.first)))
	for _, n := range l.Counts() {
		w.Varint(int64(n))
	}
}

// DecodeLayout reads what Encode wrote; ok is false when r holds no valid
// layout.
func DecodeLayout(r *codec.Reader) (l Layout, ok bool) {
	counts := make([]int32, r.Count())
	for i := range counts {
		counts[i] = r.Partition()
	}
	if r.Err() != nil {
		return Layout{}, false
	}
	return NewLayout(counts), true
}

// Total is the number of upstream partitions.
func (l Layout) Total() int32 { return l.total }

// Inputs is the number of inputs.
func (l Layout) Inputs() int { return len(l.first) }
