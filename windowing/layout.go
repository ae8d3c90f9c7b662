package windowing

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// Layout is an earlier aggregate layout that stored key state may still be
// written in (docs/OPERATIONS.md, Changing a deployed pipeline): its
// aggregates in their stored order, the accumulation mode windows opened
// under it have until their next pane (bridgeMode), and for each of the pipeline's current aggregates its
// index in Aggregates (-1: the aggregate is newer than the state, which
// is then partial in that window's panes).
type Layout struct {
	Aggregates []AggSpec
	Mode       Mode
	From       []int
}

// Evolution is how the engine continues state stored under an earlier
// definition (package evolve plans it).
type Evolution struct {
	// Gen numbers the current layout: key state is written tagged with
	// it; state tagged with an earlier gen is read through Layouts[gen]
	// (gen 0: state written untagged, before any change).
	Gen     uint32
	Layouts map[uint32]*Layout
	// Sealed: every window ending at or before Sealed has expired (it
	// expired under an earlier, smaller allowed_lateness): a record never
	// reopens it. MinTime: none.
	Sealed int64
	// Rearm: allowed_lateness changed from PriorLateness; every open
	// window's expiry moves to end + the new lateness when the engine
	// starts.
	Rearm         bool
	PriorLateness int64
	// Drain: finish the windows of the previous window definition
	// (drain.go); PriorDrainEnd: the End of a drain before this one,
	// which must have finished (0: none). DrainBegins: the window changes
	// at this start (the drain is not one that runs on).
	Drain         *Drain
	PriorDrainEnd int64
	DrainBegins   bool
}

// maxPartialAggs is how many aggregates a pane can name partial: the
// bits of window.partial.
const maxPartialAggs = 64

// stateCodec reads and writes key state for the current aggregates, and
// reads state of earlier layouts.
type stateCodec struct {
	specs   []AggSpec
	mode    Mode
	gen     uint32
	layouts map[uint32]*Layout
	txn     bool // transaction windows: its keys' state is of their kind (keystate.go)
}

// layout returns the specs and mode state of tag gen is written with, and
// the layout to carry it to the current aggregates (nil: gen is current).
// State without a tag (gen 0) was written before the definition was
// stored, under its first layout: Layouts[0] when recorded, else the
// current one.
func (c *stateCodec) layout(gen uint32) ([]AggSpec, Mode, *Layout, error) {
	if gen == c.gen {
		return c.specs, c.mode, nil, nil
	}
	l := c.layouts[gen]
	if l == nil {
		if gen == 0 {
			return c.specs, c.mode, nil, nil
		}
		return nil, 0, nil, fmt.Errorf("%w: key state written under aggregate layout %08x, which the pipeline's stored definition does not record", ErrUnknownLayout, gen)
	}
	return l.Aggregates, l.Mode, l, nil
}

// ErrUnknownLayout: key state of a layout the engine does not know (yet).
var ErrUnknownLayout = errors.New("windowing: unknown state layout")

// knows reports whether state of tag gen can be read for certain: a
// restore holds back state it cannot (Engine.AddLayouts).
func (c *stateCodec) knows(gen uint32) bool {
	return gen == c.gen || c.layouts[gen] != nil
}

// tagOf returns the layout tag of an encoded key state (0: untagged).
func tagOf(b []byte) uint32 {
	if len(b) == 0 || b[0] <= keyStateTagged || b[0] == keyStateVersionCount || b[0] == keyStateVersionTxn {
		return 0
	}
	v, n := binary.Uvarint(b[1:])
	if n <= 0 || v > math.MaxUint32 {
		return 0
	}
	return uint32(v)
}

// partialBit is aggregate i's bit in a partial mask (none past the mask).
func partialBit(i int) uint64 {
	if i >= maxPartialAggs {
		return 0
	}
	return 1 << uint(i)
}

// carry moves a key state decoded in l's layout to the current aggregates:
// aggregates kept move to their new place, those removed are dropped, and
// those added start empty and are marked partial in the key's windows
// (and its slices, and for a sliding key in the windows that start at or
// before its last record so far).
func (c *stateCodec) carry(ks *keyState, l *Layout) {
	n := len(c.specs)
	var added uint64
	for i, j := range l.From {
		if j < 0 {
			added |= partialBit(i)
		}
	}
	// A mask of the stored layout's aggregates, in the current order, with
	// the added ones.
	mask := func(old uint64) uint64 {
		m := added
		for i, j := range l.From {
			if j >= 0 && j < maxPartialAggs && old&(1<<uint(j)) != 0 {
				m |= partialBit(i)
			}
		}
		return m
	}
	move := func(acc []accum) []accum {
		out := make([]accum, n)
		for i, j := range l.From {
			if j >= 0 && j < len(acc) {
				out[i] = acc[j]
			}
		}
		return out
	}
	for _, w := range ks.windows {
		if !ks.sliced {
			w.acc = move(w.acc)
		}
		w.partial = mask(w.partial)
		if w.last != nil {
			vals := make([]Value, n)
			for i, j := range l.From {
				if j >= 0 && j < len(w.last.values) {
					vals[i] = w.last.values[j]
				}
			}
			w.last.values = vals
		}
	}
	for _, sl := range ks.slices {
		sl.acc = move(sl.acc)
		sl.partial = mask(sl.partial)
	}
	if ks.slide != nil {
		ns := newSlides(c.specs)
		if c.txn {
			ns = newTxnSlides(c.specs)
		}
		ns.partial, ns.partialTo = mask(ks.slide.partial)&^added, ks.slide.partialTo
		ns.retired, ns.retiredEnd = ks.slide.retired, ks.slide.retiredEnd
		last := int64(math.MinInt64)
		_ = ks.slide.each(func(t int64, acc []accum) error {
			ns.load(t, move(acc))
			last = t
			return nil
		})
		ks.slide = ns
		if added != 0 && last != math.MinInt64 {
			if ns.partial == 0 || last > ns.partialTo {
				ns.partialTo = last
			}
			ns.partial |= added
		}
	}
}

// ratioPartial returns mask with each ratio aggregate's bit set when the
// aggregate it divides or the one it divides by is partial, and clear
// otherwise: a ratio keeps no state, so it is as complete as they are.
func ratioPartial(specs []AggSpec, mask uint64) uint64 {
	if mask == 0 {
		return 0
	}
	for i := range specs {
		if s := &specs[i]; s.Op == Ratio {
			mask &^= partialBit(i)
			if mask&(partialBit(s.Of)|partialBit(s.To)) != 0 {
				mask |= partialBit(i)
			}
		}
	}
	return mask
}

// partialOf returns the partial mask of w's next pane: w's own, its
// slices' for a sliced key, and its key's for a sliding window that may
// hold records from before an aggregate was added.
func partialOf(ks *keyState, w *window) uint64 {
	p := w.partial
	if ks.sliced {
		for _, sl := range ks.slices {
			if sl.start >= w.start && sl.start < w.end {
				p |= sl.partial
			}
		}
	}
	if ks.slide != nil && ks.slide.partial != 0 && w.start <= ks.slide.partialTo {
		p |= ks.slide.partial
	}
	return p
}

// partialNames appends the names of the aggregates in mask.
func partialNames(dst []string, mask uint64, specs []AggSpec) []string {
	for mask != 0 {
		i := bits.TrailingZeros64(mask)
		mask &^= 1 << uint(i)
		if i < len(specs) {
			dst = append(dst, specs[i].Name)
		}
	}
	return dst
}

// pendingKey is a restored key state held back until its layout is known.
type pendingKey struct {
	part  int32
	key   string
	value []byte
}

// AddLayouts makes state of more layouts readable (a restore read their
// definition from the changelog), and restores the keys held back for
// them.
func (e *Engine) AddLayouts(ls map[uint32]*Layout) error {
	if e.codec.layouts == nil {
		e.codec.layouts = map[uint32]*Layout{}
	}
	for t, l := range ls {
		if t == e.codec.gen {
			continue
		}
		l.Aggregates = prepareAggregates(l.Aggregates)
		e.codec.layouts[t] = l
	}
	return e.restorePending(func(gen uint32) bool { return e.codec.knows(gen) })
}

// SetPartitionIDsFrom changes Options.PartitionIDsFrom: a restore learnt
// an earlier count before the input's first growth.
func (e *Engine) SetPartitionIDsFrom(from int32) { e.opts.PartitionIDsFrom = from }

// Seal raises the end at or before which every window has expired
// (Evolution.Sealed).
func (e *Engine) Seal(end int64) { e.sealed = max(e.sealed, end) }

// FinishLayouts ends a restore of partition p: keys held back without a
// tag are read as the first layout (state written before definitions were
// stored), and a key of a layout still unknown is an error.
func (e *Engine) FinishLayouts(p int32) error {
	return e.restorePending(func(gen uint32) bool {
		return gen == 0 || e.codec.knows(gen)
	}, p)
}

func (e *Engine) restorePending(ready func(uint32) bool, only ...int32) error {
	// restoreKey changes e.pending (it forgets the key's held-back
	// value first): walk a list of its own.
	list := e.pending
	e.pending = nil
	var keep []pendingKey
	var err error
	for _, k := range list {
		if err != nil || !ready(tagOf(k.value)) || (len(only) > 0 && k.part != only[0]) {
			keep = append(keep, k)
			continue
		}
		err = e.restoreKey(k.part, k.key, k.value, false)
	}
	e.pending = append(keep, e.pending...)
	if err != nil {
		return err
	}
	for _, k := range e.pending {
		if len(only) > 0 && k.part == only[0] {
			return fmt.Errorf("restore key %q: %w: layout %08x", k.key, ErrUnknownLayout, tagOf(k.value))
		}
	}
	return nil
}
