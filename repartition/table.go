package repartition

import (
	"github.com/windowd/windowd/codec"
	"github.com/windowd/windowd/watermark"
)

// Table is what stage 2 knows of the input partitions that feed one
// repartition partition: their last markers and the next upstream offset
// of each not yet processed.
type Table struct {
	marks *watermark.Upstreams
	next  []int64
}

// NewTable is the table of a repartition partition fed by inputs input
// partitions, none heard from.
func NewTable(inputs int) *Table {
	return &Table{marks: watermark.NewUpstreams(inputs), next: make([]int64, inputs)}
}

// Inputs is the number of input partitions the table covers.
func (t *Table) Inputs() int { return t.marks.Len() }

// Apply takes a marker; false when its input partition is not in the
// table (the input grew since the table was made).
func (t *Table) Apply(m Marker) bool {
	base := m.Watermark
	if m.Quiet {
		base = m.Base
	}
	return t.marks.ObserveQuiet(m.Upstream, m.Watermark, base, m.Idle)
}

// Watermark is the repartition partition's watermark: the minimum over the
// input partitions' markers (watermark.Upstreams).
func (t *Table) Watermark() int64 { return t.marks.Watermark() }

// Base is what Watermark would be without the quiet advance upstream
// (watermark.Upstreams.Base).
func (t *Table) Base() int64 { return t.marks.Base() }

// Upstream is input partition p's last marker.
func (t *Table) Upstream(p int32) (wm int64, idle, seen bool) { return t.marks.Upstream(p) }

// Accept reports whether the record of input partition up at offset off
// is new, and if so records it: a record below the next offset of its
// input partition was processed already (records of one input partition
// reach a repartition partition in offset order). False too when up is
// not in the table.
func (t *Table) Accept(up int32, off int64) bool {
	if up < 0 || int(up) >= len(t.next) || off < t.next[up] {
		return false
	}
	t.next[up] = off + 1
	return true
}

// Next is the next upstream offset of input partition up not processed.
func (t *Table) Next(up int32) int64 { return t.next[up] }

// SetNext sets it (tests, and a restore that knows better).
func (t *Table) SetNext(up int32, off int64) { t.next[up] = off }

// Encode writes the table: the markers, then the next offsets.
func (t *Table) Encode(w *codec.Writer) {
	t.marks.Encode(w)
	for _, n := range t.next {
		w.Varint(n)
	}
}

// Remap is the table renumbered from layout from, which it was made under,
// to layout to: each input partition keeps its marker and next offset
// under its new number (a layout shifts the numbers of an input when an
// earlier one gains partitions); a partition to has and from had not is
// not heard from yet, one from had and to has not is left out.
func (t *Table) Remap(from, to Layout) *Table {
	n := &Table{marks: watermark.NewUpstreams(int(to.Total())), next: make([]int64, to.Total())}
	for u := range min(from.Total(), int32(len(t.next))) {
		if v, ok := to.Upstream(from.Source(u)); ok {
			n.marks.Take(v, t.marks, u)
			n.next[v] = t.next[u]
		}
	}
	return n
}

// DecodeTable reads what Encode wrote; nil when r holds no valid table.
func DecodeTable(r *codec.Reader) *Table {
	marks := watermark.DecodeUpstreams(r)
	if marks == nil {
		return nil
	}
	t := &Table{marks: marks, next: make([]int64, marks.Len())}
	for i := range t.next {
		t.next[i] = r.Varint()
	}
	if r.Err() != nil {
		return nil
	}
	return t
}
