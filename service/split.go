package service

import (
	"hash/maphash"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// splitDetector notices, without repartitioning, a key.field value seen on
// two input partitions: its windows are then split between the partitions'
// states. It remembers the last partition of a bounded number of key hashes
// (a sketch: it can miss a split, never invents one).
type splitDetector struct {
	seed    maphash.Seed
	slots   []splitSlot
	lastLog time.Time
	count   prometheus.Counter
}

type splitSlot struct {
	hash uint64
	part int32 // partition + 1; 0: empty
}

const splitSlots = 1 << 16

func newSplitDetector(c prometheus.Counter) *splitDetector {
	return &splitDetector{seed: maphash.MakeSeed(), slots: make([]splitSlot, splitSlots), count: c}
}

// see records key on part and reports whether it was last seen on another partition.
func (d *splitDetector) see(key string, part int32) bool {
	h := maphash.String(d.seed, key)
	s := &d.slots[h&(splitSlots-1)]
	split := s.part != 0 && s.hash == h && s.part != part+1
	s.hash, s.part = h, part+1
	if split {
		d.count.Inc()
	}
	return split
}

// startSplitDetectorLocked makes the pipeline notice keys seen on two input
// partitions (once started, it stays): for a key from the value, and
// after partitions were added to the input (definition.go).
func (p *pipeline) startSplitDetectorLocked() {
	if p.mu.split == nil {
		p.mu.split = newSplitDetector(p.m.splitKeys.WithLabelValues(p.cfg.Name))
	}
}
