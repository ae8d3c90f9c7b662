package windowing

import (
	"maps"
	"strconv"
)

// This file answers what a key's windows hold now (docs/OPERATIONS.md,
// Querying windows), for readers on other goroutines than the engine's:
// the service reads a key's stored state under a snapshot of the last
// checkpoint and gives it to a Reader, which never touches the engine.

// WindowState is one window a key holds, as a query shows it.
type WindowState struct {
	// Pane carries the window's bounds and its current aggregate values
	// as its next pane would show them (Key, Start, End, Zone, Records,
	// FirstTime, LastTime, Values, Partial, HasPartition, Partition); its
	// Timing, Index, Final and Mode are not set.
	Pane
	// OnTimeDone: the window's on-time step has run (or it was born late).
	OnTimeDone bool
	// Final: no later pane can change its value; the frontier has passed
	// its end plus allowed_lateness and its closing step is due.
	Final bool
	// Panes is how many panes (retractions not counted) it has emitted;
	// the last one's index is Panes-1 and its timing LastTiming.
	Panes      uint32
	LastTiming Timing
}

// Reader decodes stored key states of one engine's pipeline into
// WindowStates. It is a copy of what the engine decodes with, taken by
// Engine.Reader on the engine's goroutine, and is safe for concurrent use.
type Reader struct {
	spec   Spec
	opts   Options
	codec  stateCodec
	sealed int64
}

// Reader returns a Reader of the engine's state as it is now encoded. Call
// it again after AddLayouts or Seal.
func (e *Engine) Reader() *Reader {
	r := &Reader{spec: e.spec, opts: e.opts, codec: e.codec, sealed: e.sealed}
	r.codec.layouts = maps.Clone(e.codec.layouts)
	return r
}

// Windows appends to dst the windows of key in shard whose range
// intersects [from, to), decoded from stored (the store's value of the
// key; nil: no window), judged at frontier f, in start order. A count
// window's range is its first to its last record's event time. Windows
// that will emit nothing more are left out: a sliding key's retired
// window, a discarded transaction window.
func (r *Reader) Windows(dst []WindowState, shard uint32, key string, stored []byte, f, from, to int64) ([]WindowState, error) {
	if stored == nil {
		return dst, nil
	}
	ks := newKeyState(&r.spec, r.codec.txn, shard, key)
	if err := r.codec.decode(stored, ks); err != nil {
		return dst, err
	}
	specs := r.spec.Aggregates
	var merged []accum
	for _, w := range ks.windows {
		if w.retired || w.ended == Discards {
			continue
		}
		lo, hi := w.start, w.end
		if ks.counting {
			lo, hi = w.firstTime(), w.lastTime()+1
		}
		if lo >= to || hi <= from {
			continue
		}
		acc := w.acc
		if ks.sliced {
			merged = make([]accum, len(specs))
			for _, sl := range slicesOf(ks, w) {
				if err := mergeAccums(merged, sl.acc, specs); err != nil {
					return dst, err
				}
			}
			acc = merged
		}
		s := WindowState{OnTimeDone: w.onTimeDone, Panes: w.nextIndex}
		p := &s.Pane
		p.Values = make([]Value, len(specs))
		windowPane(p, ks, w, acc, specs, partitionInID(&r.opts, shard))
		if r.spec.Window.Calendar != nil {
			p.Zone = r.spec.Window.Calendar.Zone
		}
		if w.nextIndex > 0 {
			s.LastTiming = w.lastTiming()
		}
		s.Final = !ks.counting && expiredOrSealed(f, w.end, r.spec.AllowedLateness, r.sealed)
		dst = append(dst, s)
	}
	return dst, nil
}

// lastTiming is the timing of the window's last pane, when it has one:
// EARLY until an ON_TIME or LATE pane settled it.
func (w *window) lastTiming() Timing {
	switch {
	case !w.settled:
		return Early
	case w.lastLate:
		return Late
	}
	return OnTime
}

// windowPane sets what pane p shows of window w of ks with the
// aggregates acc: its key and bounds, a count window's record times, the
// partition in its id, the partial mask and the values (p.Values has
// one slot per aggregate).
func windowPane(p *Pane, ks *keyState, w *window, acc []accum, specs []AggSpec, hasPartition bool) {
	p.Key, p.Start, p.End = ks.key, w.start, w.end
	p.HasPartition, p.Partition = hasPartition, int32(ks.shard)
	p.Partial = ratioPartial(specs, partialOf(ks, w))
	p.Records, p.FirstTime, p.LastTime = ks.counting, w.firstTime(), w.lastTime()
	for i := range specs {
		p.Values[i] = acc[i].result(&specs[i])
	}
	for i := range specs {
		if s := &specs[i]; s.Op == Ratio {
			p.Values[i] = ratio(p.Values[s.Of], p.Values[s.To])
		}
	}
}

// slicesOf returns the slices of sliced key ks that window w covers.
func slicesOf(ks *keyState, w *window) []*slice {
	lo, hi := 0, len(ks.slices)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if ks.slices[m].start < w.start {
			lo = m + 1
		} else {
			hi = m
		}
	}
	n := lo
	for n < len(ks.slices) && ks.slices[n].start < w.end {
		n++
	}
	return ks.slices[lo:n]
}

// AppendQueryWindow appends the JSON object of s for a query answer
// (docs/OPERATIONS.md, Querying windows): the window as a pane shows it,
// the state of its steps and panes, and its aggregates as a pane shows
// them, named by specs.
func AppendQueryWindow(b []byte, s *WindowState, specs []AggSpec) []byte {
	b = append(b, '{')
	b = appendWindow(b, &s.Pane)
	b = append(b, `,"on_time_done":`...)
	b = strconv.AppendBool(b, s.OnTimeDone)
	b = append(b, `,"final":`...)
	b = strconv.AppendBool(b, s.Final)
	if s.HasPartition {
		b = append(b, `,"partition":`...)
		b = strconv.AppendInt(b, int64(s.Partition), 10)
	}
	b = append(b, `,"panes":`...)
	b = strconv.AppendUint(b, uint64(s.Panes), 10)
	if s.Panes > 0 {
		b = append(b, `,"last_pane":{"index":`...)
		b = strconv.AppendUint(b, uint64(s.Panes-1), 10)
		b = append(b, `,"timing":"`...)
		b = append(b, s.LastTiming.String()...)
		b = append(b, `"}`...)
	} else {
		b = append(b, `,"last_pane":null`...)
	}
	b = append(b, `,"aggregates":{`...)
	b = appendAggregates(b, &s.Pane, specs)
	return appendPartial(b, s.Partial, specs)
}
