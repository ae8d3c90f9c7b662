package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Snapshot is a read-only view of the committed state at one instant: the
// last checkpoint's, whatever the engine buffers or commits after it. Reads
// on other goroutines than the engine's go through one (the query API,
// docs/OPERATIONS.md, Querying windows); it is safe for concurrent use and
// must be closed.
type Snapshot struct {
	s *pebble.Snapshot
}

// Snapshot takes a snapshot of the committed state.
func (d *DB) Snapshot() *Snapshot { return &Snapshot{s: d.db.NewSnapshot()} }

// Close releases the snapshot.
func (s *Snapshot) Close() error { return s.s.Close() }

// GetKey returns a copy of the windows value of (shard, key), or nil.
func (s *Snapshot) GetKey(shard uint32, key string) ([]byte, error) {
	k := binary.BigEndian.AppendUint32([]byte{prefixKey}, shard)
	return s.get(append(k, key...))
}

// GetMeta returns a copy of a metadata value, or nil.
func (s *Snapshot) GetMeta(name string) ([]byte, error) {
	return s.get(metaKey(nil, name))
}

func (s *Snapshot) get(k []byte) ([]byte, error) {
	v, closer, err := s.s.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state: get: %w", err)
	}
	out := append([]byte{}, v...)
	return out, closer.Close()
}

// ScanKeys calls fn with the keys of shard that start with prefix and
// sort after after ("": from the first), in order, with their values,
// until fn returns false. The value is valid only during the call.
func (s *Snapshot) ScanKeys(shard uint32, prefix, after string, fn func(key string, value []byte) bool) error {
	base := binary.BigEndian.AppendUint32([]byte{prefixKey}, shard)
	lo := append(append([]byte(nil), base...), prefix...)
	if after != "" && after >= prefix {
		lo = append(append(append([]byte(nil), base...), after...), 0) // just after it
	}
	var hi []byte
	if shard == math.MaxUint32 {
		hi = []byte{prefixKey + 1}
	} else {
		hi = binary.BigEndian.AppendUint32([]byte{prefixKey}, shard+1)
	}
	it, err := s.s.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		key := string(it.Key()[len(base):])
		if !strings.HasPrefix(key, prefix) {
			break
		}
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return err
		}
		if !fn(key, v) {
			break
		}
	}
	return it.Close()
}
