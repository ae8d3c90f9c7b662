package service

import (
	"cmp"
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"slices"
	"strings"
)

// What a restore's reader builds from the changelog records it reads
// (restorejob.go), off the poll loop: batches of the latest value of each
// key, in key order, each key marked when it is new to the shard, and the
// keys logged ahead of the last marker (covers).

// A restore keeps only the latest value of each key it reads (what
// compaction keeps of the changelog), up to restoreBatchBytes of keys and
// values, and then hands them to the poll loop to apply: a key logged in
// several commit cycles is restored once per batch, not once per record.
const restoreBatchBytes = 16 << 20

// maxSeenKeys bounds the keys a cold restore remembers having restored;
// past it, a key not remembered is looked up in the state like any other.
const maxSeenKeys = 4 << 20

// latestValues is a restore's batch of latest values by key, as its reader
// builds it.
type latestValues struct {
	values map[string][]byte // nil: the key's windows were deleted
	bytes  int
	// slab holds the batch's keys and values, copied out of the fetch's
	// buffers (which are not ours to keep) in chunks of slabChunk: one
	// allocation per chunk, not two per changelog record, which left a
	// cold restore a sixth of its time in the garbage collector.
	slab []byte
	// seen, in a restore into an emptied shard (cold), remembers the keys
	// handed over in earlier batches. nil: every key is looked up.
	seen *seenKeys
}

const slabChunk = 1 << 20

// newLatestValues is an empty first batch; seen as in latestValues.
func newLatestValues(seen *seenKeys) *latestValues {
	return &latestValues{values: map[string][]byte{}, seen: seen}
}

// next is the batch that follows l, once l's entries are handed over.
// After a full batch it takes l's map, emptied, whose table keeps the size
// it grew to (a new map per batch grew again from nothing, and the old one
// was garbage the size of a batch). After one handed over before it filled
// (a standby's, caught up) it starts a map sized for as many keys: a table
// the size of a full batch would stay allocated while the standby runs.
func (l *latestValues) next() *latestValues {
	if l.bytes < restoreBatchBytes {
		return &latestValues{values: make(map[string][]byte, len(l.values)), seen: l.seen}
	}
	clear(l.values)
	return &latestValues{values: l.values, seen: l.seen}
}

// keep copies b into the slab and returns the copy. Bytes in the slab are
// never written again, so a string may point into it.
func (l *latestValues) keep(b []byte) []byte {
	if len(l.slab)+len(b) > cap(l.slab) {
		l.slab = make([]byte, 0, max(slabChunk, len(b)))
	}
	off := len(l.slab)
	l.slab = append(l.slab, b...)
	return l.slab[off:len(l.slab):len(l.slab)]
}

// restoreEntry is a key's latest value in a batch handed to the poll loop.
// fresh: the key has no state in the shard (a cold restore's first value
// of it), which is then written without being looked up.
type restoreEntry struct {
	key    string
	value  []byte // nil: the key's windows were deleted
	fresh  bool
	prefix uint64 // the key's first 8 bytes, big-endian, zero-padded (for the sort)
}

// entries returns the batch in key order, for the poll loop to apply, and
// adds its keys to seen. The reader sorts, off the poll loop: writes in key
// order make the state's indexed write batch cheap to extend (each lands
// next to the one before), where writes in the changelog's order spent a
// fifth of a cold restore searching it.
func (l *latestValues) entries() []restoreEntry {
	out := make([]restoreEntry, 0, len(l.values))
	for key, value := range l.values {
		e := restoreEntry{key: key, value: value, fresh: l.seen != nil && l.seen.addNew(key)}
		var b [8]byte
		copy(b[:], key)
		e.prefix = binary.BigEndian.Uint64(b[:])
		out = append(out, e)
	}
	// Byte order: keys whose first 8 bytes differ order as those bytes
	// (a shorter key, zero-padded, orders first, as it should); the rest
	// compare whole.
	slices.SortFunc(out, func(a, b restoreEntry) int {
		if c := cmp.Compare(a.prefix, b.prefix); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	return out
}

// seenKeys is a cold restore's memory of the keys it handed over: a Bloom
// filter (one cache line per key), sized for the records the restore reads.
// A key it has surely not seen is fresh; one it only seems to have seen (a
// false positive, about one key in a hundred) is looked up in the state,
// which finds nothing: a wrong answer costs a lookup, never a wrong state.
// A set of the keys themselves cost a cold restore a tenth of its reader's
// time and a copy of every key.
type seenKeys struct {
	blocks   [][8]uint64 // 512 bits each
	seed     maphash.Seed
	n, limit int
}

// bitsPerSeenKey sizes the filter: with 7 bits set per key, about 1% of
// the keys not added seem added.
const bitsPerSeenKey = 10

// newSeenKeys sizes a filter for up to min(keys, maxSeenKeys) keys; past
// that, no key is fresh (each is looked up).
func newSeenKeys(keys int64) *seenKeys {
	limit := int(min(max(keys, 1), maxSeenKeys))
	return &seenKeys{blocks: make([][8]uint64, (limit*bitsPerSeenKey+511)/512), seed: maphash.MakeSeed(), limit: limit}
}

// addNew adds key and reports whether it was surely not added before.
func (s *seenKeys) addNew(key string) bool {
	if s.n >= s.limit {
		return false
	}
	h := maphash.String(s.seed, key)
	hi, _ := bits.Mul64(h, uint64(len(s.blocks)))
	blk := &s.blocks[hi]
	// Seven 9-bit positions in the block, from the hash mixed again (the
	// block took its high bits).
	m := h * 0x9e3779b97f4a7c15
	added := false
	for i := 0; i < 7; i++ {
		pos := m & 511
		m >>= 9
		w, bit := pos>>6, uint64(1)<<(pos&63)
		if blk[w]&bit == 0 {
			blk[w] |= bit
			added = true
		}
	}
	if added {
		s.n++
	}
	return added
}

// coverLog is what a restore keeps of the covers headers it read (the input
// position a key's logged state covers): keys logged ahead of the last
// marker's position are skipped for the records their state holds
// (finishRestore). As a map from key to its latest cover, from which each
// marker deletes what its position covers, it cost two map writes per
// changelog record; as a log it costs an append, and a marker usually
// covers the whole log.
type coverLog struct {
	entries []coverEntry // in changelog order; a later entry of a key replaces an earlier one
}

type coverEntry struct {
	key string
	at  int64
}

func (c *coverLog) add(key string, at int64) {
	c.entries = append(c.entries, coverEntry{key: key, at: at})
}

// marked forgets the keys whose latest cover a marker at position covers.
// Marker positions never decrease along the log (each owner resumes from
// the last one), so a key covered up to this marker's position cannot be
// ahead of the final one.
func (c *coverLog) marked(position int64) {
	ahead := false
	for _, e := range c.entries {
		if e.at > position {
			ahead = true
			break
		}
	}
	if !ahead {
		// Cleared, not just cut: the keys point into restore batches'
		// slabs, which the array would keep alive.
		clear(c.entries)
		c.entries = c.entries[:0]
		return
	}
	// A key ahead: its latest entry decides (an earlier one may be ahead
	// and a later one covered).
	latest := c.latest()
	c.entries = nil
	for k, at := range latest {
		if at > position {
			c.add(k, at)
		}
	}
}

// coverLogs are the coverLogs of a restore, one per input (coinputs.go:
// the partition of each input that shares the state's partition).
type coverLogs []coverLog

// add notes a key's cover of input i.
func (cs *coverLogs) add(i int, key string, at int64) {
	for len(*cs) <= i {
		*cs = append(*cs, coverLog{})
	}
	(*cs)[i].add(key, at)
}

// marked forgets, for each input, the keys that marker m's position of its
// partition covers (a position not known yet covers none).
func (cs coverLogs) marked(m *marker) {
	for i := range cs {
		pos := m.position
		if i > 0 {
			pos = -1
			if i-1 < len(m.follow) {
				pos = m.follow[i-1].position
			}
		}
		if pos >= 0 {
			cs[i].marked(pos)
		}
	}
}

// of returns input i's log (empty when none was read).
func (cs coverLogs) of(i int) *coverLog {
	if i < len(cs) {
		return &cs[i]
	}
	return &coverLog{}
}

// latest returns each key's latest cover.
func (c *coverLog) latest() map[string]int64 {
	out := make(map[string]int64, len(c.entries))
	for _, e := range c.entries {
		out[e.key] = e.at
	}
	return out
}
