package windowing

// Prefetch reads, and changes nothing of, the state a record of key in
// partition part will read: the key's entry in the cache, its keyState,
// and each of its windows with its aggregates. A record's state is a
// chain of dependent loads, each mostly a cache miss when keys are many
// (the map's group, the key's bytes, the keyState, the window, the
// aggregates): one record at a time, the engine waits for each in turn.
// Prefetch for a batch of records first lets the processor overlap the
// chains of different records, and the records then find their state in
// the cache (BenchmarkEngine's prefetch-tumbling-10s-key against
// tumbling-10s-key, 10,000 keys: about 10% less time per record;
// docs/PERFORMANCE.md). A key not in the cache is
// not read from the store.
func (e *Engine) Prefetch(part int32, key string) {
	ks := e.cache.get(e.shard(part), key)
	if ks == nil {
		return
	}
	for _, w := range ks.windows {
		e.prefetched += w.start
		for i := range w.acc {
			e.prefetched += w.acc[i].n
		}
	}
}
