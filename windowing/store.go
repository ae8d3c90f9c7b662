package windowing

// TimerKind separates the two timer indexes.
type TimerKind uint8

// Timer kinds.
const (
	EventTimer TimerKind = iota + 1 // deadline in event time: on-time step or expiry
	ProcTimer                       // deadline in processing time: early every / late every
)

// Timer is one entry of a timer index: window (Shard, Key, Start) is due at Deadline.
type Timer struct {
	Kind     TimerKind
	Deadline int64
	Shard    uint32
	Key      string
	Start    int64
}

// Store is the durable state the engine needs. Package state implements it
// over Pebble. Writes are buffered until Commit, and reads see them.
//
// Keys of the state are (shard, key): one value holds every open window of
// a group key. The timer indexes are ordered by (deadline, shard, key,
// start), so firing reads only what is due.
type Store interface {
	// GetKey returns the windows value of (shard, key), or nil when absent.
	// The returned bytes are valid until the next call on the store.
	GetKey(shard uint32, key string) ([]byte, error)
	// GetKeys calls fn with the windows value of each (shard, key) of keys,
	// which are distinct and in ascending order (nil when absent), reading
	// the store in order. The value is valid only during the call; fn must
	// not write to the store.
	GetKeys(shard uint32, keys []string, fn func(key string, value []byte) error) error
	// PutKey sets the windows value of (shard, key).
	PutKey(shard uint32, key string, value []byte) error
	// DeleteKey removes the windows value of (shard, key).
	DeleteKey(shard uint32, key string) error
	// AddTimer inserts t, which is not in it, into its index.
	AddTimer(t Timer) error
	// DeleteTimer removes t, which is in it, from its index.
	DeleteTimer(t Timer) error
	// DueTimers appends to dst up to max timers of kind with from <= Deadline <= upTo,
	// in index order; with after set, the scan starts just after that timer.
	// (The engine passes from past everything it already fired, so scans
	// never walk the deleted entries of earlier firings.)
	DueTimers(kind TimerKind, from, upTo int64, after *Timer, max int, dst []Timer) ([]Timer, error)
	// NextTimer returns the earliest deadline >= from of kind; ok is false when there is none.
	NextTimer(kind TimerKind, from int64) (deadline int64, ok bool, err error)
	// GetMeta returns a metadata value, or nil when absent.
	GetMeta(name string) ([]byte, error)
	// PutMeta sets a metadata value.
	PutMeta(name string, value []byte) error
	// Commit makes every buffered write durable (synced to disk when sync is true) and atomic.
	Commit(sync bool) error
	// PendingBytes is the size of the writes buffered since the last Commit.
	PendingBytes() int
	// ScanShard calls fn for every (key, value) of shard, in key order. The
	// value is valid only during the call; fn must not write to the store.
	ScanShard(shard uint32, fn func(key string, value []byte) error) error
	// Shards returns every shard that holds at least one key, in order.
	Shards() ([]uint32, error)
}
