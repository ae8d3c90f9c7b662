package windowing

import (
	"container/heap"
	"fmt"
	"strings"

	"github.com/windowd/windowd/codec"
	"github.com/windowd/windowd/watermark"
)

// A Joiner's records by shard, and what the Kafka service needs to keep
// them durable and to move a partition's records between instances, as
// shards.go is for an engine (docs/SEMANTICS.md, State follows
// partitions). Every held record is in memory (a join holds at most an
// interval's or a window's records, plus lateness); with a Store, each key
// changed since the last Flush is written to it, and its records are read
// back when the Joiner is made. A key's value in the store is its
// records, with what was emitted of them (encodeKey).

// joinShard is the records of one partition (ShardByPartition), or all.
type joinShard struct {
	id            uint32
	keys          map[string]*joinKey
	windows       map[bucketID]*joinBucket // a window join's buckets
	expiry, early joinTimers
	held          int
	// stale: expiry timers of records and buckets dropped with their key
	// (RestoreKey, which a standby calls for every changed key) still in
	// expiry, which a shard that may not fire never pops.
	stale int
	// done is the frontier its expiries ran at: the step from done to
	// the next frontier decides an unmatched row's timing.
	done int64
}

// joinKey is a key's buckets in a shard.
type joinKey struct {
	key     string
	sh      *joinShard
	buckets []*joinBucket
	dirty   bool // in Joiner.dirty
	dropped bool // replaced by a restore, or its shard dropped
}

// forget takes k off its shard.
func (k *joinKey) forget() {
	if k.sh.keys[k.key] == k {
		delete(k.sh.keys, k.key)
	}
}

// shardID is partition p's shard.
func (j *Joiner) shardID(p int32) uint32 { return shardOf(p, j.opts.ShardByPartition, j.opts.Shards) }

// shard returns partition p's shard, making it.
func (j *Joiner) shard(p int32) *joinShard { return j.shardOf(j.shardID(p)) }

func (j *Joiner) shardOf(id uint32) *joinShard {
	if sh := j.shards[id]; sh != nil {
		return sh
	}
	sh := &joinShard{id: id, keys: map[string]*joinKey{}, windows: map[bucketID]*joinBucket{}, done: j.f}
	if j.catching[id] {
		sh.done = watermark.MinTime
	}
	j.shards[id] = sh
	return sh
}

// changed marks k to be written at the next Flush, which rewrites its
// value whole: NeedsCheckpoint counts every record k holds, not only the
// change.
func (j *Joiner) changed(k *joinKey) {
	if j.opts.Store != nil && !k.dirty {
		k.dirty = true
		j.dirty = append(j.dirty, k)
		j.unflushed += 64 + len(k.key)
		for _, b := range k.buckets {
			for s := range 2 {
				for _, x := range b.recs[s] {
					if !x.gone {
						j.unflushed += len(x.Value) + 64
					}
				}
			}
		}
	}
}

// mayFire reports whether the expiries and early rows of shard id may
// fire: always in replay, only for assigned partitions when sharded.
func (j *Joiner) mayFire(id uint32) bool { return !j.opts.ShardByPartition || j.owned[id] }

// catchingFrontier is the frontier of a shard that is catching up.
func (j *Joiner) catchingFrontier(id uint32) int64 {
	wm, ok := shardWatermark(j.wm, id, j.opts.Shards)
	if !ok {
		return watermark.MinTime
	}
	return min(j.f, wm)
}

// Assign adds partition p to the frontier at processing time now; its
// shard's expiries and early rows may fire from now on, unless the shard
// catches up (CatchUp). A follower's assignment leaves its lead's shard as
// it is (followsLead).
func (j *Joiner) Assign(p int32, now int64, caughtUp bool) {
	j.wm.Assign(p, now, caughtUp)
	j.recheck = true
	if id := j.shardID(p); !followsLead(p, j.opts.ShardByPartition, j.opts.Shards) && !j.catching[id] {
		j.owned[id] = true
	}
}

// Revoke removes partition p from the frontier; its shard's expiries stop
// firing (DropShard removes its records), unless p follows a lead.
func (j *Joiner) Revoke(p int32) {
	j.wm.Revoke(p)
	if !followsLead(p, j.opts.ShardByPartition, j.opts.Shards) {
		j.HoldTimers(p)
	}
}

// HoldTimers keeps partition p's expiries and early rows from firing until
// ReleaseTimers (ShardByPartition only).
func (j *Joiner) HoldTimers(p int32) {
	if j.opts.ShardByPartition {
		delete(j.owned, j.shardID(p))
		delete(j.catching, j.shardID(p))
	}
}

// CatchUp runs assigned partition p, which joins with a watermark below
// the frontier, on its own frontier until ReleaseTimers(p), as
// Engine.CatchUp does: its records are taken or dropped, and its records'
// last chances pass, as on its previous owner, whose frontier was never
// ahead of p's watermark. Its early rows wait for the release.
func (j *Joiner) CatchUp(p int32) {
	if !j.opts.ShardByPartition {
		return
	}
	id := j.shardID(p)
	delete(j.owned, id)
	j.catching[id] = true
	j.shardOf(id).done = watermark.MinTime
}

// ReleaseTimers lets partition p's shard fire at the frontier again,
// firing what is due.
func (j *Joiner) ReleaseTimers(p int32) error {
	id := j.shardID(p)
	delete(j.catching, id)
	j.owned[id] = true
	return j.FireDue()
}

// FireDue fires every expiry due at the frontier (after RestoreKey
// brought in records whose last chance it passed), the frontier first
// taking in the generators restored with them.
func (j *Joiner) FireDue() error {
	j.recheck = true
	return j.advance()
}

// Advance recomputes the frontier after partition watermarks were set from
// outside (watermark.Frontier.MarkQuiet) and fires what it passed.
func (j *Joiner) Advance() error { return j.advance() }

// Skip runs the watermark steps of a record that a restored key already
// holds (its changelog value covered the record's offset): the generator
// sees it, no record is taken.
func (j *Joiner) Skip(ev *Event, now int64) error {
	j.stats.Records++
	j.wm.Observe(ev.Partition, ev.Time, now)
	return j.advance()
}

// Complete returns the event time through which the expiries of every
// record of partitions have fired: the frontier, or less while one of them
// catches up. ok is false for a partition whose expiries wait and before
// the frontier is known.
func (j *Joiner) Complete(partitions []int32) (c int64, ok bool) {
	c = j.f
	for _, p := range partitions {
		id := j.shardID(p)
		switch {
		case j.catching[id]:
			c = min(c, j.shardOf(id).done)
		case !j.mayFire(id):
			return 0, false
		}
	}
	return c, c != watermark.MinTime
}

// OpenWindows is the number of records held (a join's open state).
func (j *Joiner) OpenWindows() int64 { return int64(j.held) }

// CacheBytes estimates the memory the held records take.
func (j *Joiner) CacheBytes() int { return j.bytes }

// NeedsCheckpoint reports whether the store has, or the next Flush would
// give it, more uncommitted writes than it should keep.
func (j *Joiner) NeedsCheckpoint() bool {
	return j.opts.Store != nil && j.opts.Store.PendingBytes()+j.unflushed >= j.opts.MaxPendingBytes
}

// Checkpoint writes every changed key and the frontier's state to the
// store and commits them as one batch (synced when sync is true); without
// a Store it does nothing.
func (j *Joiner) Checkpoint(sync bool) error {
	if j.opts.Store == nil {
		return nil
	}
	if err := j.Flush(); err != nil {
		return err
	}
	b, err := j.wm.MarshalBinary()
	if err != nil {
		return err
	}
	if err := j.opts.Store.PutMeta(metaFrontier, b); err != nil {
		return err
	}
	return j.opts.Store.Commit(sync)
}

// Flush writes every key changed since the last Flush to the store
// (uncommitted): its records, or a delete once it holds none.
func (j *Joiner) Flush() error {
	st := j.opts.Store
	if st == nil {
		return nil
	}
	for i, k := range j.dirty {
		j.dirty[i] = nil
		k.dirty = false
		if k.dropped {
			continue
		}
		if v := j.encodeKey(k); v != nil {
			if err := st.PutKey(k.sh.id, k.key, v); err != nil {
				return err
			}
			continue
		}
		if err := st.DeleteKey(k.sh.id, k.key); err != nil {
			return err
		}
		if len(k.buckets) == 0 {
			k.forget()
		}
	}
	j.dirty = j.dirty[:0]
	j.unflushed = 0
	return nil
}

// joinStateVersion is the first byte of a key's stored records.
const joinStateVersion = 1

// Flags of a stored record.
const (
	joinRight   = 1 << iota // its side: right, else left
	joinMatched             // a match was emitted
	joinEarly               // its early unmatched row is shown
)

// encodeKey returns k's records as the store holds them, or nil when it
// holds none:
//
//	version byte, count of buckets, then per bucket: start, end (varints),
//	count of records, then per record (the left side's, then the right's,
//	in the bucket's order): flags byte, the timing its early row was shown
//	at, time, partition, offset, arrival sequence and early-row deadline
//	(varints), value (length-prefixed).
func (j *Joiner) encodeKey(k *joinKey) []byte {
	buckets := 0
	for _, b := range k.buckets {
		if live(b) > 0 {
			buckets++
		}
	}
	if buckets == 0 {
		return nil
	}
	w := codec.NewWriter(nil).Byte(joinStateVersion).Uvarint(uint64(buckets))
	for _, b := range k.buckets {
		n := live(b)
		if n == 0 {
			continue
		}
		w.Varint(b.start).Varint(b.end).Uvarint(uint64(n))
		for s := range 2 {
			for _, x := range b.recs[s] {
				if x.gone {
					continue
				}
				var flags byte
				if x.side == 1 {
					flags |= joinRight
				}
				if x.matched {
					flags |= joinMatched
				}
				if x.early {
					flags |= joinEarly
				}
				w.Byte(flags).Byte(byte(x.shown)).Varint(x.Time).Varint(int64(x.Partition)).Varint(x.Offset).Varint(x.seq).Varint(x.earlyAt).String(x.Value)
			}
		}
	}
	return w.Bytes()
}

// live is the number of b's records not let go.
func live(b *joinBucket) int {
	n := len(b.recs[0]) + len(b.recs[1])
	if b.over {
		return 0
	}
	for s := range 2 {
		for _, x := range b.recs[s] {
			if x.gone {
				n--
			}
		}
	}
	return n
}

// decodeKey reads key's stored records into shard sh (replacing none:
// the caller dropped what the key held) and arms their timers.
func (j *Joiner) decodeKey(sh *joinShard, key string, value []byte) (*joinKey, error) {
	r := codec.NewReader(value, "join state of key "+key)
	if v := r.Byte(); r.Err() == nil && v != joinStateVersion {
		return nil, fmt.Errorf("join state of key %q: version %d, this windowd reads %d", key, v, joinStateVersion)
	}
	k := &joinKey{key: strings.Clone(key), sh: sh}
	for range r.Count() {
		b := &joinBucket{k: k}
		b.start, b.end = r.Varint(), r.Varint()
		for range r.Count() {
			flags := r.Byte()
			x := &joinRec{b: b, shown: Timing(r.Byte()), matched: flags&joinMatched != 0, early: flags&joinEarly != 0}
			if flags&joinRight != 0 {
				x.side = 1
			}
			x.Time, x.Partition, x.Offset = r.Varint(), int32(r.Varint()), r.Varint()
			x.seq, x.earlyAt = r.Varint(), r.Varint()
			x.Value = r.String()
			b.recs[x.side] = append(b.recs[x.side], x)
		}
		k.buckets = append(k.buckets, b)
	}
	if err := r.Done(); err != nil {
		return nil, err
	}
	for _, b := range k.buckets {
		if !j.spec.Interval {
			// Before its first record, as when it was made: buckets due
			// at one time fire in the order they were made.
			first := watermark.MaxTime
			for s := range 2 {
				if len(b.recs[s]) > 0 {
					first = min(first, b.recs[s][0].seq)
				}
			}
			heap.Push(&sh.expiry, joinTimer{at: addSat(b.end, j.spec.AllowedLateness), seq: first - 1, b: b})
			sh.windows[bucketID{k.key, b.start}] = b
		}
		for s := range 2 {
			for _, x := range b.recs[s] {
				j.seq = max(j.seq, x.seq)
				sh.held++
				j.held++
				j.bytes += recBytes(x)
				if j.spec.Interval {
					_, hi := j.bounds(x.side, x.Time)
					heap.Push(&sh.expiry, joinTimer{at: addSat(hi, j.spec.AllowedLateness), seq: x.seq, rec: x})
				}
				if j.spec.EarlyEvery > 0 && x.earlyAt != 0 && !x.matched && !x.early && j.outer(x.side) {
					j.armEarly(x)
				}
			}
		}
	}
	return k, nil
}

// load reads the frontier and every key the store holds.
func (j *Joiner) load() error {
	st := j.opts.Store
	if b, err := st.GetMeta(metaFrontier); err != nil {
		return err
	} else if b != nil {
		if err := j.wm.UnmarshalBinary(b); err != nil {
			return err
		}
	}
	j.f = j.wm.Value()
	ids, err := st.Shards()
	if err != nil {
		return err
	}
	for _, id := range ids {
		sh := j.shardOf(id)
		err := st.ScanShard(id, func(key string, value []byte) error {
			k, err := j.decodeKey(sh, key, value)
			if err == nil {
				sh.keys[k.key] = k
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	j.recheck = true
	return nil
}

// KeyState returns the stored form of (partition p, key)'s records, or
// nil when it holds none.
func (j *Joiner) KeyState(p int32, key string) ([]byte, error) {
	sh := j.shards[j.shardID(p)]
	if sh == nil || sh.keys[key] == nil {
		return nil, nil
	}
	return j.encodeKey(sh.keys[key]), nil
}

// RestoreKey replaces the records of (partition p, key) with value, as
// KeyState returned it on the instance that wrote it (nil: none), their
// timers included. An expiry already due fires at the next step or
// FireDue.
func (j *Joiner) RestoreKey(p int32, key string, value []byte) error {
	_, had := j.shards[j.shardID(p)]
	sh := j.shard(p)
	if !had {
		// A shard a restore makes has let nothing go here: its records'
		// last chances are judged from below, as on the instance that
		// held them, not from this instance's frontier (with lateness 0
		// an unmatched row is ON_TIME there, and must be here).
		sh.done = watermark.MinTime
	}
	if old := sh.keys[key]; old != nil {
		j.dropKey(old)
	}
	if value == nil {
		return j.opts.Store.DeleteKey(sh.id, key)
	}
	k, err := j.decodeKey(sh, key, value)
	if err != nil {
		return fmt.Errorf("restore key %q: %w", key, err)
	}
	sh.keys[k.key] = k
	j.recheck = true
	return j.opts.Store.PutKey(sh.id, key, value)
}

// RestoreNewKey is RestoreKey for a key p's shard does not hold.
func (j *Joiner) RestoreNewKey(p int32, key string, value []byte) error {
	return j.RestoreKey(p, key, value)
}

// dropKey forgets k and its records without emitting anything; their
// expiry timers stay in the shard's heap, skipped when popped, until
// they outnumber the live ones (dropTimers).
func (j *Joiner) dropKey(k *joinKey) {
	k.dropped = true
	sh := k.sh
	for _, b := range k.buckets {
		for s := range 2 {
			for _, x := range b.recs[s] {
				if !x.gone {
					j.release(x)
					if j.spec.Interval {
						sh.stale++
					}
				}
			}
		}
		if !b.over && !j.spec.Interval {
			sh.stale++
			if sh.windows[bucketID{k.key, b.start}] == b {
				delete(sh.windows, bucketID{k.key, b.start})
			}
		}
		b.over = true
	}
	k.forget()
	if sh.stale > len(sh.expiry)/2+64 {
		sh.dropTimers()
	}
}

// dropTimers removes the expiry timers of dropped records and buckets.
func (sh *joinShard) dropTimers() {
	kept := sh.expiry[:0]
	for _, t := range sh.expiry {
		if (t.rec != nil && !t.rec.gone) || (t.b != nil && !t.b.over) {
			kept = append(kept, t)
		}
	}
	clear(sh.expiry[len(kept):])
	sh.expiry = kept
	heap.Init(&sh.expiry)
	sh.stale = 0
}

// DropShard removes every record of partition p's shard, from memory and
// from the store, and p's generator: the partition's records now live
// elsewhere (or will be restored from its changelog). Changed keys are
// flushed first. A partition that follows a lead takes only its
// generator.
func (j *Joiner) DropShard(p int32) error {
	if followsLead(p, j.opts.ShardByPartition, j.opts.Shards) {
		j.wm.Drop(p) // the shard's records are its lead's to drop
		return nil
	}
	if err := j.Flush(); err != nil {
		return err
	}
	id := j.shardID(p)
	if sh := j.shards[id]; sh != nil {
		for _, k := range sh.keys {
			j.dropKey(k)
			if j.opts.Store != nil {
				if err := j.opts.Store.DeleteKey(id, k.key); err != nil {
					return err
				}
			}
		}
		delete(j.shards, id)
	}
	j.wm.Drop(p)
	j.HoldTimers(p)
	return nil
}

// Sealed is the bound at or before which a record (a window join: a
// window) ending is not taken (JoinOptions.Evolve), to be stored with the
// pipeline's definition, as Engine.Sealed.
func (j *Joiner) Sealed() int64 { return j.sealed }

// Seal raises the sealed bound to end (another instance's, read with its
// changelog).
func (j *Joiner) Seal(end int64) { j.sealed = max(j.sealed, end) }

// What an engine's service-facing methods are about and a join has not:
// aggregate layouts, drains and queryable windows.

// Drained is false: a join has no drain of a previous window.
func (j *Joiner) Drained() bool { return false }

// Rearm seals what had expired at a writer's frontier f under the prior
// allowed_lateness (Engine.Rearm); restored records already took the
// current lateness for their expiry (RestoreKey).
func (j *Joiner) Rearm(prior, f int64) error {
	if prior != j.spec.AllowedLateness && f != watermark.MinTime && f != watermark.MaxTime {
		j.sealed = max(j.sealed, f-prior)
	}
	return nil
}

// SetPartitionIDsFrom does nothing: join rows carry no pane id.
func (j *Joiner) SetPartitionIDsFrom(int32) {}

// AddLayouts refuses aggregate layouts: a join has no aggregates.
func (j *Joiner) AddLayouts(ls map[uint32]*Layout) error {
	if len(ls) > 0 {
		return fmt.Errorf("join: state written under %d aggregate layouts; a join keeps records, not aggregates", len(ls))
	}
	return nil
}

// FinishLayouts does nothing: no key waits for a layout.
func (j *Joiner) FinishLayouts(int32) error { return nil }

// Reader is nil: a join's rows are in its output, it has no windows to
// query.
func (j *Joiner) Reader() *Reader { return nil }
