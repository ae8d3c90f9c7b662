package windowing

// PrefetchBatch is how many keys PrefetchKeys reads in one set of stages.
const PrefetchBatch = 32

// PrefetchKeys reads, and changes nothing of, the state records of keys in
// partition part will read: each key's entry in the cache, its keyState,
// and each of its windows with its aggregates. A record's state is a chain
// of dependent loads, each mostly a cache miss when keys are many (the
// map's group and the key's bytes, the keyState, the window, the
// aggregates): one record at a time, the engine waits for each in turn.
// PrefetchKeys walks the chains of up to PrefetchBatch keys a link at a
// time, every key's first link, then every key's second, and so on: the
// loads of one stage do not depend on each other, so the processor has
// many misses in flight at once, and the records then find their state in
// the cache (BenchmarkEngine's prefetch-tumbling-10s-key against
// tumbling-10s-key, 10,000 keys; docs/PERFORMANCE.md). A key not in the
// cache is not read from the store.
func (e *Engine) PrefetchKeys(part int32, keys []string) {
	if len(keys) == 0 {
		return
	}
	m := e.cache.shard(e.shard(part), false)
	if m == nil {
		return
	}
	for len(keys) > 0 {
		n := min(len(keys), PrefetchBatch)
		e.prefetchStages(m, keys[:n])
		keys = keys[n:]
	}
}

// prefetchStages is PrefetchKeys for at most PrefetchBatch keys of the
// cache's shard m.
func (e *Engine) prefetchStages(m map[string]*keyState, keys []string) {
	var found [PrefetchBatch]*keyState
	n := 0
	for _, k := range keys { // the map: group, slot, the key's bytes
		if ks := m[k]; ks != nil {
			found[n] = ks
			n++
		}
	}
	kss := found[:n]
	var sum int64
	for _, ks := range kss { // the keyState
		sum += int64(len(ks.windows))
	}
	for _, ks := range kss { // each window's first line
		for _, w := range ks.windows {
			sum += w.start
		}
	}
	for _, ks := range kss { // its aggregates
		for _, w := range ks.windows {
			for i := range w.acc {
				sum += w.acc[i].n
			}
		}
	}
	e.prefetched += sum
}
