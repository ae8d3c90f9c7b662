package windowing

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/windowd/windowd/watermark"
)

// This file holds what the Kafka service needs to move a partition's state
// between instances (docs/SEMANTICS.md, State follows partitions): dropping a
// shard, restoring keys from a changelog, and skipping records whose effect
// a restored key already holds. Replay never calls it.

// Flush writes every changed key of the cache to the store (uncommitted),
// so that the store holds the current value of every key.
func (e *Engine) Flush() error { return e.flush() }

// KeyState returns the encoded windows of (partition p, key) as the store
// would hold them after Flush, or nil when the key has no window.
func (e *Engine) KeyState(p int32, key string) ([]byte, error) {
	b, err := e.store.GetKey(e.shard(p), key)
	if err != nil || b == nil {
		return nil, err
	}
	return append([]byte(nil), b...), nil
}

// DropShard removes every key and timer of partition p's shard and p's
// generator: the partition's state now lives elsewhere (or will be
// restored from its changelog). The cache is flushed first. A partition
// that follows a lead (followsLead) takes only its generator: the shard
// is its lead's.
func (e *Engine) DropShard(p int32) error {
	if followsLead(p, e.opts.ShardByPartition, e.opts.Shards) {
		e.wm.Drop(p) // the shard's state is its lead's to drop
		return nil
	}
	shard := e.shard(p)
	if err := e.flush(); err != nil {
		return err
	}
	e.cacheBytes -= e.cache.dropShard(shard)
	var keys []string
	var timers []Timer
	ks := &keyState{shard: shard}
	err := e.store.ScanShard(shard, func(key string, value []byte) error {
		ks.key, ks.windows = key, ks.windows[:0]
		if err := e.codec.decode(value, ks); err != nil {
			return fmt.Errorf("key %q: %w", key, err)
		}
		keys = append(keys, key)
		timers = appendTimers(timers, ks, e.byEnd)
		e.open -= int64(len(ks.windows))
		return nil
	})
	if err != nil {
		return err
	}
	for _, t := range timers {
		if err := e.store.DeleteTimer(t); err != nil {
			return err
		}
	}
	for _, k := range keys {
		if err := e.store.DeleteKey(shard, k); err != nil {
			return err
		}
	}
	// A restore from scratch drops the shard first: a partition whose
	// restore holds the frontier (HoldRestoring) goes on holding it until
	// its state is back. Forgetting the hold let the frontier jump to the
	// other partitions' watermarks meanwhile, expiring their windows in
	// one step (TestDropShardKeepsRestoringHold).
	e.wm.Drop(p)
	e.HoldTimers(p)
	return nil
}

// timerIndex answers whether a timer is in ts: a scan of a key's few
// timers (one or two per window), a map when it has many (hopping windows
// of many hops).
type timerIndex struct {
	ts  []Timer
	set map[Timer]struct{}
}

func newTimerIndex(ts []Timer) timerIndex {
	x := timerIndex{ts: ts}
	if len(ts) > 64 {
		x.set = make(map[Timer]struct{}, len(ts))
		for _, t := range ts {
			x.set[t] = struct{}{}
		}
	}
	return x
}

func (x timerIndex) has(t Timer) bool {
	if x.set != nil {
		_, ok := x.set[t]
		return ok
	}
	for i := range x.ts {
		if x.ts[i] == t {
			return true
		}
	}
	return false
}

// appendTimers appends the timers of every window of ks (byEnd: as
// Engine.byEnd).
func appendTimers(dst []Timer, ks *keyState, byEnd bool) []Timer {
	for _, w := range ks.windows {
		if !ks.counting { // count windows have no event-time timer (count.go)
			dst = append(dst, timerOf(EventTimer, w.timer, ks, w, byEnd))
		}
		if w.hasProc {
			dst = append(dst, timerOf(ProcTimer, w.proc, ks, w, byEnd))
		}
	}
	return dst
}

// timerOf is w's timer of kind with deadline. A timer names its window by
// the window's start, or by its end when byEnd (cumulating windows share
// their start; the ends of a key's windows are distinct).
func timerOf(kind TimerKind, deadline int64, ks *keyState, w *window, byEnd bool) Timer {
	name := w.start
	if byEnd {
		name = w.end
	}
	return Timer{Kind: kind, Deadline: deadline, Shard: ks.shard, Key: ks.key, Start: name}
}

// RestoreKey replaces the windows of (partition p, key) with value, as
// KeyState returned it on the instance that wrote it (nil: no window),
// timers included. A restored timer that is already due fires at the next
// step or FireDue.
func (e *Engine) RestoreKey(p int32, key string, value []byte) error {
	return e.restoreKey(p, key, value, false)
}

// RestoreNewKey is RestoreKey for a key that has no state in p's shard,
// which the caller knows (a restore into a shard it dropped, the key's
// first record in it): the state is not looked up.
func (e *Engine) RestoreNewKey(p int32, key string, value []byte) error {
	return e.restoreKey(p, key, value, true)
}

func (e *Engine) restoreKey(p int32, key string, value []byte, fresh bool) error {
	e.unpend(p, key)
	if value != nil && !e.codec.knows(tagOf(value)) {
		// Its layout's definition comes later in the changelog (or, for
		// untagged state, not at all): held back (AddLayouts,
		// FinishLayouts), the key has no state meanwhile.
		if err := e.restoreKey(p, key, nil, fresh); err != nil {
			return err
		}
		e.pending = append(e.pending, pendingKey{part: p, key: strings.Clone(key), value: bytes.Clone(value)})
		return nil
	}
	shard := e.shard(p)
	nks := e.newKeyState(shard, key)
	if value != nil {
		if err := e.codec.decode(value, nks); err != nil {
			return fmt.Errorf("restore key %q: %w", key, err)
		}
	}
	old := &e.noState
	if !fresh {
		var err error
		if old, err = e.keyState(shard, key); err != nil {
			return err
		}
		e.cacheBytes -= old.size
		e.cache.delete(shard, key)
	}
	// A changelog holds a key once per commit cycle that changed it, and
	// a window's timer does not change with its aggregates: only the
	// timers the old state has and the new one lacks are deleted, and
	// only those it adds are added. Deleting and adding back every timer
	// cost the timer set a sort of its pending additions per key restored
	// again (BenchmarkRestoreKeyRepeated: 34k records/s before).
	e.oldTimers = appendTimers(e.oldTimers[:0], old, e.byEnd)
	e.timers = appendTimers(e.timers[:0], nks, e.byEnd)
	inOld, inNew := newTimerIndex(e.oldTimers), newTimerIndex(e.timers)
	for _, t := range e.oldTimers {
		if !inNew.has(t) {
			if err := e.store.DeleteTimer(t); err != nil {
				return err
			}
		}
	}
	e.open += int64(len(nks.windows) - len(old.windows))
	for _, t := range e.timers {
		if !inOld.has(t) {
			if err := e.store.AddTimer(t); err != nil {
				return err
			}
		}
		if t.Kind == EventTimer {
			e.rewind(&e.doneEvent, &e.nextEvent, t.Deadline)
		} else {
			e.rewind(&e.doneProc, &e.nextProc, t.Deadline)
		}
	}
	if value == nil {
		return e.store.DeleteKey(shard, key)
	}
	return e.store.PutKey(shard, key, value)
}

// unpend forgets a held-back state of (p, key): a later value replaces it.
func (e *Engine) unpend(p int32, key string) {
	for i, k := range e.pending {
		if k.part == p && k.key == key {
			e.pending = append(e.pending[:i], e.pending[i+1:]...)
			return
		}
	}
}

// rewind makes a timer at deadline visible to the next scan even when the
// scans already passed it.
func (e *Engine) rewind(done, next *int64, deadline int64) {
	if deadline <= *done {
		*done = before(deadline)
	}
	if deadline < *next {
		*next = deadline
	}
}

// HoldTimers keeps the timers of partition p's shard from firing until
// ReleaseTimers, while p stays in the frontier (ShardByPartition only): the
// state of a partition that is not assigned waits.
func (e *Engine) HoldTimers(p int32) {
	if e.opts.ShardByPartition {
		delete(e.owned, e.shard(p))
		delete(e.catching, e.shard(p))
	}
}

// CatchUp runs assigned partition p, which joins with a watermark below the
// frontier, on its own frontier until ReleaseTimers(p) (ShardByPartition
// only): the minimum of the frontier and p's watermark. Its records are on
// time or late against it, and its windows fire as p's watermark passes
// them, as they did on its previous owner, whose frontier was never ahead
// of p's watermark. So the records that owner processed but did not log are
// processed again into the same panes, and its restored windows fire with
// the records it had seen, not before them. Processing-time timers of p
// wait for the release.
func (e *Engine) CatchUp(p int32) {
	if !e.opts.ShardByPartition {
		return
	}
	delete(e.owned, e.shard(p))
	e.catching[e.shard(p)] = watermark.MinTime
}

// ReleaseTimers lets partition p's timers fire again at the frontier,
// firing those already due. While p caught up, its records could open
// windows that its own frontier had not passed but the engine's timer scan
// had (their deadlines are at or below doneEvent): the next scan starts
// again from where p's own frontier stopped, so that they fire too.
func (e *Engine) ReleaseTimers(p int32) error {
	shard := e.shard(p)
	if done, ok := e.catching[shard]; ok {
		e.rewind(&e.doneEvent, &e.nextEvent, after(done))
	}
	delete(e.catching, shard)
	e.owned[shard] = true
	return e.FireDue()
}

// catchingFrontier is the frontier of a shard that is catching up.
func (e *Engine) catchingFrontier(shard uint32) int64 {
	wm, ok := shardWatermark(e.wm, shard, e.opts.Shards)
	if !ok {
		return watermark.MinTime
	}
	return min(e.f, wm)
}

// fireCatching runs the on-time and expiry steps of the windows of a
// catching-up shard that its own frontier has passed since the last call.
// Other shards' timers up to it have fired (it is at most the frontier),
// apart from those of shards that wait too: the scan skips them.
func (e *Engine) fireCatching(shard uint32) error {
	done := e.catching[shard]
	upTo := e.catchingFrontier(shard)
	if upTo <= done || upTo == watermark.MinTime {
		return nil
	}
	f := e.f
	e.f = upTo
	defer func() { e.f = f }()
	err := e.eachDue(EventTimer, after(done), upTo, func(t Timer, ks *keyState) error {
		if t.Shard != shard {
			return nil
		}
		return e.fireWindow(t, ks)
	})
	if err != nil {
		return err
	}
	e.catching[shard] = upTo
	return nil
}

// FireDue fires every event-time timer due at the current frontier (after
// RestoreKey brought in windows the frontier has already passed). The
// frontier first takes in the generators restored with them
// (watermark.Frontier.RestoreGenerator): the next record is judged against
// the frontier the partition's old owner had, not against an engine's
// first −∞.
func (e *Engine) FireDue() error {
	if err := e.advance(); err != nil {
		return err
	}
	if e.f == watermark.MinTime {
		return nil
	}
	if err := e.fireEvent(e.f); err != nil {
		return err
	}
	return e.maybeEvict()
}

// Skip runs the watermark steps of a record whose effect on its windows a
// restored key already holds (its changelog value covered the record's
// offset): the generator sees it, no window changes.
func (e *Engine) Skip(ev *Event, now int64) error {
	e.stats.Records++
	e.wm.Observe(ev.Partition, ev.Time, now)
	if err := e.advance(); err != nil {
		return err
	}
	if len(e.catching) > 0 {
		if _, ok := e.catching[e.shard(ev.Partition)]; ok {
			if err := e.fireCatching(e.shard(ev.Partition)); err != nil {
				return err
			}
		}
	}
	return e.maybeEvict()
}
