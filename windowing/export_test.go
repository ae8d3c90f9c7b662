package windowing

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

// KeptSlots is keptSlots.
const KeptSlots = keptSlots
