package windowing

import "sort"

// LiveEstimate recomputes the estimate from what the cache holds: each
// key's own share and, per window and slice it holds now, what adding them
// counted. It equals CacheEstimate while every cached key was created in
// memory (keys loaded from the store also count their stored bytes).
func (e *Engine) LiveEstimate() int {
	n := 0
	_ = e.cache.each(func(ks *keyState) error {
		n += keyBaseSize + len(ks.key) + len(ks.windows)*e.windowBytes(ks) + len(ks.slices)*e.sliceBytes()
		return nil
	})
	return n
}

// EmptiedKeySlots is the largest capacity of a window or slice list that
// a cached key holds with no window or slice in it.
func (e *Engine) EmptiedKeySlots() int {
	n := 0
	_ = e.cache.each(func(ks *keyState) error {
		if len(ks.windows) == 0 {
			n = max(n, cap(ks.windows))
		}
		if len(ks.slices) == 0 {
			n = max(n, cap(ks.slices))
		}
		return nil
	})
	return n
}

// Prefetched is what PrefetchKeys has read, summed.
func (e *Engine) Prefetched() int64 { return e.prefetched }

// KeptSlots is keptSlots.
const KeptSlots = keptSlots

// WindowView is one open window as the timeline tests draw it.
type WindowView struct {
	Shard      uint32
	Key        string
	Start, End int64
	OnTimeDone bool   // the on-time step ran (or the window was born late)
	NextIndex  uint32 // index of its next pane
	Sliced     bool   // its aggregates live in slices: Pending and Values are not kept
	Pending    int64  // records since its last pane
	Values     []Value
}

// Windows returns every open window held in the cache, by shard, key and
// start, and false when the cache evicted keys (it may then hold only some).
func (e *Engine) Windows() ([]WindowView, bool) {
	var out []WindowView
	_ = e.cache.each(func(ks *keyState) error {
		for _, w := range ks.windows {
			v := WindowView{Shard: ks.shard, Key: ks.key, Start: w.start, End: w.end, OnTimeDone: w.onTimeDone, NextIndex: w.nextIndex, Sliced: ks.sliced}
			if !ks.sliced {
				v.Pending = w.sincePane
				for i := range e.spec.Aggregates {
					v.Values = append(v.Values, w.acc[i].result(&e.spec.Aggregates[i]))
				}
			}
			out = append(out, v)
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Shard != b.Shard {
			return a.Shard < b.Shard
		}
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		return a.Start < b.Start
	})
	return out, e.stats.Evictions == 0
}

// ExpiryTimers is the number of expiry timers j keeps (TestJoinRestoreKeyTimersBounded).
func (j *Joiner) ExpiryTimers() int {
	n := 0
	for _, sh := range j.shards {
		n += len(sh.expiry)
	}
	return n
}

// EarlyTimers is the number of early-row timers j keeps (TestJoinEarlyTimersBounded).
func (j *Joiner) EarlyTimers() int {
	n := 0
	for _, sh := range j.shards {
		n += len(sh.early)
	}
	return n
}
