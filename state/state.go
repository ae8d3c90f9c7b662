// Package state keeps window state in Pebble behind the small interface the
// engine needs (windowing.Store): one value per (shard, group key) holding
// its open windows, two timer indexes ordered by deadline, and metadata
// (frontier, partition generators, offsets).
//
// Invariants:
//   - Every write goes into one indexed batch (timers: into an in-memory
//     set of additions, timerSet, and a set of deletions, written into the
//     batch at Commit); reads see it; Commit applies it atomically, so
//     state, timers and metadata of a checkpoint are durable together or
//     not at all.
//   - A timer added and deleted between two commits never reaches Pebble: in
//     windows of about one record each, most timers live that briefly, and
//     an indexed-batch insert, a delete tombstone and the commit's sort of
//     both cost more than the window's other work.
//   - Timer keys sort by (kind, deadline, shard, key, start) with signed
//     integers encoded order-preserving, so "everything due by T" is one
//     bounded range scan.
package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/windowd/windowd/windowing"
)

// Key prefixes.
const (
	prefixKey   = 'k'
	prefixTimer = 't'
	prefixMeta  = 'm'
)

// Pebble's memory per DB: its block cache (by default) and up to two
// memtables (one filling, one flushing). In a cgo build Pebble allocates
// both in C memory, outside the Go heap.
const (
	DefaultBlockCacheBytes = 32 << 20
	DefaultMemTableBytes   = 16 << 20
	// PebbleMemoryBytes is what one DB opened with the defaults holds in
	// caches and memtables at most.
	PebbleMemoryBytes = DefaultBlockCacheBytes + 2*DefaultMemTableBytes
)

// Options configure a DB.
type Options struct {
	// FS is the file system; nil means the OS. Tests pass vfs.NewMem().
	FS vfs.FS
	// BlockCacheBytes is the size of Pebble's block cache; 0 means 32 MiB.
	BlockCacheBytes int64
	// MemTableBytes is the size of a Pebble memtable (two at most at
	// once); 0 means 16 MiB.
	MemTableBytes int64
	// Logf receives Pebble's error messages; nil discards them.
	Logf func(format string, args ...any)
	// Fatal is called when Pebble cannot go on (a failed WAL write: disk
	// full, I/O error). It must not return; nil panics. Nothing written
	// after the last successful Commit is durable.
	Fatal func(msg string)
	// Ephemeral: the database is thrown away after use and never opened
	// again (a replay's state), so it keeps no write-ahead log and syncs
	// nothing to disk. Commits then live in memtables until Pebble
	// flushes them, and a crash loses them.
	Ephemeral bool
}

// DB is a Pebble-backed windowing.Store.
type DB struct {
	db      *pebble.DB
	cache   interface{ Unref() }
	batch   *pebble.Batch
	keyBuf  []byte
	valBuf  []byte
	timerLo []byte
	timerHi []byte
	// added holds the timers added since the last Commit that the
	// committed database does not hold; deleted, the committed timers
	// deleted since (a timer deleted and added back has no pending change).
	added   *timerSet
	deleted map[windowing.Timer]struct{}
	// due and pend are DueTimers' scratch lists, dels writeTimers'.
	due, pend, dels []windowing.Timer
	// ephemeral: Options.Ephemeral (a commit asked to sync does not).
	ephemeral bool
}

// pendingTimerBytes estimates the memory of one pending timer beyond its
// key string, for PendingBytes: a 64-byte timerSet entry in a slice that
// grows by doubling, or an entry of the deleted map.
const pendingTimerBytes = 96

// compareTimers orders timers as their Pebble keys sort (timerKey).
func compareTimers(a, b windowing.Timer) int {
	return comparePending(pending(a), pending(b))
}

var _ windowing.Store = (*DB)(nil)

type logger struct {
	logf  func(string, ...any)
	fatal func(string)
}

func (l logger) Infof(string, ...any) {}
func (l logger) Errorf(format string, args ...any) {
	if l.logf != nil {
		l.logf(format, args...)
	}
}
func (l logger) Fatalf(format string, args ...any) {
	// Pebble calls Fatalf when it cannot continue safely; it must not return.
	msg := fmt.Sprintf(format, args...)
	if l.fatal != nil {
		l.fatal(msg)
	}
	panic("pebble: " + msg)
}

// Open opens (creating if needed) the Pebble database in dir.
func Open(dir string, o Options) (*DB, error) {
	if o.BlockCacheBytes <= 0 {
		o.BlockCacheBytes = DefaultBlockCacheBytes
	}
	if o.MemTableBytes <= 0 {
		o.MemTableBytes = DefaultMemTableBytes
	}
	cache := pebble.NewCache(o.BlockCacheBytes)
	opts := &pebble.Options{
		FS:                 o.FS,
		Cache:              cache,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             logger{logf: o.Logf, fatal: o.Fatal},
		MemTableSize:       uint64(o.MemTableBytes),
	}
	if o.Ephemeral {
		opts.DisableWAL = true
		opts.FS = noSyncFS{vfs.Default}
		if o.FS != nil {
			opts.FS = noSyncFS{o.FS}
		}
	}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		cache.Unref()
		return nil, fmt.Errorf("state: open %s: %w", dir, err)
	}
	return &DB{db: db, cache: cache, batch: db.NewIndexedBatch(), added: newTimerSet(), deleted: map[windowing.Timer]struct{}{}, ephemeral: o.Ephemeral}, nil
}

// Close discards uncommitted writes and closes the database.
func (d *DB) Close() error {
	err := d.batch.Close()
	if cerr := d.db.Close(); err == nil {
		err = cerr
	}
	d.cache.Unref()
	return err
}

func (d *DB) windowKey(shard uint32, key string) []byte {
	b := append(d.keyBuf[:0], prefixKey)
	b = binary.BigEndian.AppendUint32(b, shard)
	b = append(b, key...)
	d.keyBuf = b
	return b
}

// GetKey implements windowing.Store.
func (d *DB) GetKey(shard uint32, key string) ([]byte, error) {
	return d.get(d.windowKey(shard, key))
}

func (d *DB) get(k []byte) ([]byte, error) {
	v, closer, err := d.batch.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state: get: %w", err)
	}
	d.valBuf = append(d.valBuf[:0], v...)
	if err := closer.Close(); err != nil {
		return nil, err
	}
	if d.valBuf == nil {
		d.valBuf = []byte{}
	}
	return d.valBuf, nil
}

// GetKeys implements windowing.Store: one iterator, seeking forward from
// key to key, so that consecutive keys read consecutive blocks (and no
// filter block) instead of a point read each.
func (d *DB) GetKeys(shard uint32, keys []string, fn func(key string, value []byte) error) error {
	lo := append([]byte(nil), d.windowKey(shard, "")...)
	hi := append([]byte(nil), d.windowKey(shard+1, "")...)
	if shard == math.MaxUint32 {
		hi = []byte{prefixKey + 1}
	}
	it, err := d.batch.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("state: get keys: %w", err)
	}
	for _, k := range keys {
		kb := d.windowKey(shard, k)
		var v []byte
		if it.SeekGE(kb) && bytes.Equal(it.Key(), kb) {
			if v, err = it.ValueAndErr(); err != nil {
				_ = it.Close()
				return fmt.Errorf("state: get keys: %w", err)
			}
			if v == nil {
				v = []byte{}
			}
		}
		if err := fn(k, v); err != nil {
			_ = it.Close()
			return err
		}
	}
	return it.Close()
}

// PutKey implements windowing.Store.
func (d *DB) PutKey(shard uint32, key string, value []byte) error {
	return d.batch.Set(d.windowKey(shard, key), value, nil)
}

// DeleteKey implements windowing.Store.
func (d *DB) DeleteKey(shard uint32, key string) error {
	return d.batch.Delete(d.windowKey(shard, key), nil)
}

// appendOrdered appends v so that byte order equals signed order.
func appendOrdered(b []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(v)^(1<<63))
}

func timerKey(b []byte, t windowing.Timer) []byte {
	b = append(b, prefixTimer, byte(t.Kind))
	b = appendOrdered(b, t.Deadline)
	b = binary.BigEndian.AppendUint32(b, t.Shard)
	b = binary.BigEndian.AppendUint32(b, uint32(len(t.Key)))
	b = append(b, t.Key...)
	return appendOrdered(b, t.Start)
}

func parseTimerKey(k []byte) (windowing.Timer, error) {
	var t windowing.Timer
	if len(k) < 2+8+4+4+8 || k[0] != prefixTimer {
		return t, errors.New("state: corrupt timer key")
	}
	t.Kind = windowing.TimerKind(k[1])
	t.Deadline = int64(binary.BigEndian.Uint64(k[2:]) ^ (1 << 63))
	t.Shard = binary.BigEndian.Uint32(k[10:])
	n := int(binary.BigEndian.Uint32(k[14:]))
	if len(k) != 18+n+8 {
		return t, errors.New("state: corrupt timer key")
	}
	t.Key = string(k[18 : 18+n])
	t.Start = int64(binary.BigEndian.Uint64(k[18+n:]) ^ (1 << 63))
	return t, nil
}

// AddTimer implements windowing.Store. A timer without a pending change is
// taken to be absent from the database: the engine adds only timers it does
// not hold.
func (d *DB) AddTimer(t windowing.Timer) error {
	if _, ok := d.deleted[t]; ok {
		delete(d.deleted, t) // deleted and added back: as committed
		return nil
	}
	d.added.add(t)
	return nil
}

// DeleteTimer implements windowing.Store. A timer without a pending change
// is in the database: the engine deletes only timers it holds.
func (d *DB) DeleteTimer(t windowing.Timer) error {
	if d.added.remove(t) {
		return nil // added since the last commit: never written
	}
	d.deleted[t] = struct{}{}
	return nil
}

// deletedTimer reports whether the database's timer t is deleted, uncommitted.
func (d *DB) deletedTimer(t windowing.Timer) bool {
	_, ok := d.deleted[t]
	return ok
}

// pendingTimers appends to dst up to max timers of kind added since the
// last commit, with from <= deadline <= upTo, after after when it is set.
func (d *DB) pendingTimers(kind windowing.TimerKind, from, upTo int64, after *windowing.Timer, max int, dst []windowing.Timer) []windowing.Timer {
	if max <= 0 {
		return dst
	}
	d.added.ascend(kind, from, upTo, after, func(t windowing.Timer) bool {
		dst = append(dst, t)
		return len(dst) < max
	})
	return dst
}

// timerBounds sets the scan range of kind's timers with from <= deadline <= upTo,
// starting after the timer after when it is set.
func (d *DB) timerBounds(kind windowing.TimerKind, from, upTo int64, after *windowing.Timer) {
	if after != nil {
		d.timerLo = append(timerKey(d.timerLo[:0], *after), 0) // the next key after it
	} else {
		d.timerLo = appendOrdered(append(d.timerLo[:0], prefixTimer, byte(kind)), from)
	}
	if upTo == math.MaxInt64 {
		d.timerHi = append(d.timerHi[:0], prefixTimer, byte(kind)+1)
		return
	}
	d.timerHi = appendOrdered(append(d.timerHi[:0], prefixTimer, byte(kind)), upTo+1)
}

// DueTimers implements windowing.Store: the database's timers not deleted
// since the last commit, merged with those added since.
func (d *DB) DueTimers(kind windowing.TimerKind, from, upTo int64, after *windowing.Timer, max int, dst []windowing.Timer) ([]windowing.Timer, error) {
	d.timerBounds(kind, from, upTo, after)
	it, err := d.batch.NewIter(&pebble.IterOptions{LowerBound: d.timerLo, UpperBound: d.timerHi})
	if err != nil {
		return dst, err
	}
	d.due = d.due[:0]
	for ok := it.First(); ok && len(d.due) < max; ok = it.Next() {
		t, err := parseTimerKey(it.Key())
		if err != nil {
			_ = it.Close()
			return dst, err
		}
		if !d.deletedTimer(t) {
			d.due = append(d.due, t)
		}
	}
	if err := it.Close(); err != nil {
		return dst, err
	}
	d.pend = d.pendingTimers(kind, from, upTo, after, max, d.pend[:0])
	a, b := d.due, d.pend
	for len(dst) < max && (len(a) > 0 || len(b) > 0) {
		if len(b) == 0 || (len(a) > 0 && compareTimers(a[0], b[0]) < 0) {
			dst, a = append(dst, a[0]), a[1:]
		} else {
			dst, b = append(dst, b[0]), b[1:]
		}
	}
	return dst, nil
}

// NextTimer implements windowing.Store.
func (d *DB) NextTimer(kind windowing.TimerKind, from int64) (int64, bool, error) {
	d.timerBounds(kind, from, math.MaxInt64, nil)
	it, err := d.batch.NewIter(&pebble.IterOptions{LowerBound: d.timerLo, UpperBound: d.timerHi})
	if err != nil {
		return 0, false, err
	}
	next, found := int64(0), false
	for ok := it.First(); ok; ok = it.Next() {
		t, err := parseTimerKey(it.Key())
		if err != nil {
			_ = it.Close()
			return 0, false, err
		}
		if !d.deletedTimer(t) {
			next, found = t.Deadline, true
			break
		}
	}
	if err := it.Close(); err != nil {
		return 0, false, err
	}
	if deadline, ok := d.added.next(kind, from); ok && (!found || deadline < next) {
		next, found = deadline, true
	}
	return next, found, nil
}

func metaKey(b []byte, name string) []byte {
	return append(append(b, prefixMeta), name...)
}

// GetMeta implements windowing.Store.
func (d *DB) GetMeta(name string) ([]byte, error) {
	d.keyBuf = metaKey(d.keyBuf[:0], name)
	return d.get(d.keyBuf)
}

// PutMeta implements windowing.Store.
func (d *DB) PutMeta(name string, value []byte) error {
	d.keyBuf = metaKey(d.keyBuf[:0], name)
	return d.batch.Set(d.keyBuf, value, nil)
}

// PendingBytes implements windowing.Store.
func (d *DB) PendingBytes() int {
	return d.batch.Len() + (d.added.len()+len(d.deleted))*pendingTimerBytes
}

// writeTimers moves the pending timer changes into the batch, each kind of
// change in key order.
func (d *DB) writeTimers() error {
	var err error
	d.added.each(func(t windowing.Timer) bool {
		d.keyBuf = timerKey(d.keyBuf[:0], t)
		err = d.batch.Set(d.keyBuf, nil, nil)
		return err == nil
	})
	if err != nil {
		return err
	}
	d.dels = d.dels[:0]
	for t := range d.deleted {
		d.dels = append(d.dels, t)
	}
	slices.SortFunc(d.dels, compareTimers)
	for _, t := range d.dels {
		d.keyBuf = timerKey(d.keyBuf[:0], t)
		if err := d.batch.Delete(d.keyBuf, nil); err != nil {
			return err
		}
	}
	clear(d.dels)
	if cap(d.dels) > maxReusedDeletes {
		d.dels = nil
	}
	d.clearTimers()
	return nil
}

// clearTimers drops the pending timer changes.
func (d *DB) clearTimers() {
	d.added.clear()
	if len(d.deleted) > maxReusedDeletes {
		// A cleared map keeps its size: let a large one go, so that what
		// stays allocated between commits is not what the largest pending
		// set once needed.
		d.deleted = map[windowing.Timer]struct{}{}
	} else {
		clear(d.deleted)
	}
}

// maxReusedDeletes bounds the deleted-timer sets kept for reuse after a commit.
const maxReusedDeletes = 1 << 14

// Commit implements windowing.Store.
func (d *DB) Commit(sync bool) error {
	if err := d.writeTimers(); err != nil {
		return fmt.Errorf("state: commit: %w", err)
	}
	if d.batch.Empty() {
		return nil
	}
	opts := pebble.NoSync
	if sync && !d.ephemeral {
		opts = pebble.Sync
	}
	if err := d.batch.Commit(opts); err != nil {
		return fmt.Errorf("state: commit: %w", err)
	}
	if err := d.batch.Close(); err != nil {
		return err
	}
	d.batch = d.db.NewIndexedBatch()
	return nil
}

// Discard drops every write since the last Commit: reads see the last
// committed state again.
func (d *DB) Discard() error {
	d.clearTimers()
	err := d.batch.Close()
	d.batch = d.db.NewIndexedBatch()
	return err
}

// Clear deletes everything the database holds: state, timers and
// metadata (uncommitted until the next Commit, like any write).
func (d *DB) Clear() error {
	d.clearTimers()
	return d.batch.DeleteRange([]byte{0}, []byte{0xff, 0xff}, nil)
}

// DiskBytes is the on-disk size of the database (for metrics).
func (d *DB) DiskBytes() uint64 {
	return d.db.Metrics().DiskSpaceUsage()
}

// ScanShard implements windowing.Store.
func (d *DB) ScanShard(shard uint32, fn func(key string, value []byte) error) error {
	lo := binary.BigEndian.AppendUint32([]byte{prefixKey}, shard)
	var hi []byte
	if shard == math.MaxUint32 {
		hi = []byte{prefixKey + 1}
	} else {
		hi = binary.BigEndian.AppendUint32([]byte{prefixKey}, shard+1)
	}
	it, err := d.batch.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err == nil {
			err = fn(string(it.Key()[len(lo):]), v)
		}
		if err != nil {
			_ = it.Close()
			return err
		}
	}
	return it.Close()
}

// Shards implements windowing.Store.
func (d *DB) Shards() ([]uint32, error) {
	it, err := d.batch.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixKey}, UpperBound: []byte{prefixKey + 1}})
	if err != nil {
		return nil, err
	}
	var shards []uint32
	for ok := it.First(); ok; {
		k := it.Key()
		if len(k) < 5 {
			_ = it.Close()
			return nil, errors.New("state: corrupt window key")
		}
		s := binary.BigEndian.Uint32(k[1:5])
		shards = append(shards, s)
		if s == math.MaxUint32 {
			break
		}
		ok = it.SeekGE(binary.BigEndian.AppendUint32([]byte{prefixKey}, s+1))
	}
	return shards, it.Close()
}
