package service

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/windowd/windowd/repartition"
	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// The query API (docs/OPERATIONS.md, Querying windows) reads a pipeline's
// committed state, never the engine. After each checkpoint the poll loop
// publishes a queryView: what describes the state just committed (the
// partitions complete here, the frontier, a Reader of the engine's
// encoding). The first query of the view takes a Pebble snapshot, which
// every later query of the view shares: Pebble commits only at
// checkpoints, so until the next one the committed state is the view's.
// Before the next checkpoint commits, the loop seals the view: no snapshot
// is taken of it any more, and a query that finds it sealed without one
// waits for the next view. A query holds a reference while it reads, so
// the snapshot stays open until the last reader lets go; a cycle without
// queries takes no snapshot. The loop withdraws the view at every revoke,
// loss or rollback. A query never waits for the loop nor makes it wait,
// and its answer is the state of one checkpoint.

// queryView is what the loop publishes for queries.
type queryView struct {
	// mu guards snap, sealed and refs: a query takes the snapshot, the
	// loop seals the view, both count references.
	mu   sync.Mutex
	snap *state.Snapshot // the checkpoint's committed state; nil until a query takes it
	// sealed: the next checkpoint is committing; no snapshot of this
	// view may be taken any more.
	sealed bool
	// refs: the loop's reference while the view is published, and one
	// per query reading it; the last release closes snap.
	refs     int
	frontier int64 // the checkpoint's frontier
	reader   *windowing.Reader
	// parts: the partitions answered from this instance's committed
	// state (assigned, restored), each with the event time through which
	// its windows' on-time and expiry steps have run: the frontier, or
	// less while the partition catches up on its own frontier
	// (windowing.Engine.Complete). A window is final when its end plus
	// allowed_lateness is at or below it.
	parts map[int32]int64
	// standbys: the partitions this instance keeps standby replicas of,
	// with the changelog offset their committed state reaches (answered
	// only when a query allows stale answers).
	standbys map[int32]int64
}

// queryState is the query API's hand-off (pipeline.q).
type queryState struct {
	view atomic.Pointer[queryView]
	// closeMu: a query holds it (read) while it reads the database,
	// which the pipeline closes holding it.
	closeMu sync.RWMutex
	closed  bool
	// byHash: a key's partition is its hash (record keys, or keys
	// repartitioned): repartition.KeyPartition(key, partitions).
	// Otherwise every member is asked (queryapi.go).
	byHash     bool
	partitions int32
	owners     ownerCache // the group's members, for forwarding (queryapi.go)
}

// publishQueryLocked publishes the view of the checkpoint just committed.
func (p *pipeline) publishQueryLocked() {
	v := &queryView{reader: p.mu.eng.Reader(), parts: map[int32]int64{}, standbys: map[int32]int64{}}
	// Not the partitions still restoring, nor those the group took away
	// whose release waits for the loop (exactly_once, assignment.go).
	restoring := map[int32]bool{}
	p.rel.Lock()
	for _, part := range p.rel.released {
		restoring[part] = true
	}
	p.rel.Unlock()
	for _, j := range p.rs.list() {
		if !j.standby.Load() {
			restoring[j.part] = true
		} else if j.loop.applied > 0 {
			v.standbys[j.part] = j.loop.applied
		}
	}
	for part := range p.mu.parts {
		if restoring[part] {
			continue
		}
		// Before the frontier is known, or while its timers wait,
		// nothing of the partition is final.
		c, ok := p.mu.eng.Complete([]int32{part})
		if !ok {
			c = watermark.MinTime
		}
		v.parts[part] = c
	}
	v.refs = 1
	v.frontier = p.mu.eng.Frontier() // the one the checkpoint stored
	if old := p.q.view.Swap(v); old != nil {
		old.release()
	}
}

// hideQuery withdraws the view: until the next checkpoint, queries find
// this instance answering for nothing (a partition is leaving, a rollback,
// the pipeline stops). Queries already reading it finish on its snapshot.
func (p *pipeline) hideQuery() {
	if old := p.q.view.Swap(nil); old != nil {
		old.release()
	}
}

// sealQueryLocked seals the published view before a checkpoint commits:
// a snapshot taken after this would hold the next checkpoint's state.
func (p *pipeline) sealQueryLocked() {
	if v := p.q.view.Load(); v != nil {
		v.mu.Lock()
		v.sealed = true
		v.mu.Unlock()
	}
}

// acquire takes a reference on v, and its snapshot of db when it is the
// first; false when v can no longer be read (sealed before any query
// took its snapshot, or released: load the view again).
func (v *queryView) acquire(db *state.DB) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.refs == 0 || v.snap == nil && v.sealed {
		return false
	}
	if v.snap == nil {
		v.snap = db.Snapshot()
	}
	v.refs++
	return true
}

// release drops a reference; the last one closes the snapshot.
func (v *queryView) release() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.refs--; v.refs == 0 && v.snap != nil {
		_ = v.snap.Close()
	}
}

// closeQuery withdraws the view for good, before the database closes.
func (p *pipeline) closeQuery() {
	p.hideQuery()
	p.q.closeMu.Lock()
	p.q.closed = true
	p.q.closeMu.Unlock()
}

// keyPartition is the partition holding key's windows, when a hash names
// it (ok false: any partition may).
func (q *queryState) keyPartition(key string) (int32, bool) {
	if !q.byHash || q.partitions <= 0 {
		return 0, false
	}
	return repartition.KeyPartition(key, q.partitions), true
}

// errNotHere: the view does not answer for the partition (now); errBusy:
// no view is published (a rebalance or rollback under way).
var (
	errNotHere = errors.New("not answered here")
	errBusy    = errors.New("state changing")
)

// localAnswer is what this instance's committed state holds for a query.
type localAnswer struct {
	frontier int64
	parts    []int32 // the partitions answered for
	keys     []keyWindows
	page     pageCut // a scan's
	// position: a standby's answer: the changelog offset its state
	// reaches.
	standby  bool
	position int64
	// completeMin: the least of the answered partitions' parts value.
	completeMin int64
}

type keyWindows struct {
	key       string
	partition int32
	windows   []windowing.WindowState
}

// queryRetries and queryRetryWait bound how long a query waits for a
// view while there is none (a rebalance under way).
const (
	queryRetries   = 40
	queryRetryWait = 5 * time.Millisecond
)

// readLocal runs read against the published view's snapshot, when the
// view answers for want (want nil: every partition the view answers
// for), waiting a little while there is none. It returns errNotHere when
// the view does not answer for a partition of want.
func (p *pipeline) readLocal(want []int32, standby bool, read func(v *queryView, parts []int32, a *localAnswer, get func(part int32, key string) ([]byte, error), scan func(part int32, prefix, after string, fn func(string, []byte) bool) error) error) (*localAnswer, error) {
	for range queryRetries {
		a, err := p.readOnce(want, standby, read)
		if err != errBusy {
			return a, err
		}
		time.Sleep(queryRetryWait)
	}
	return nil, errBusy
}

func (p *pipeline) readOnce(want []int32, standby bool, read func(v *queryView, parts []int32, a *localAnswer, get func(part int32, key string) ([]byte, error), scan func(part int32, prefix, after string, fn func(string, []byte) bool) error) error) (*localAnswer, error) {
	p.q.closeMu.RLock()
	defer p.q.closeMu.RUnlock()
	if p.q.closed {
		return nil, errNotHere
	}
	v := p.q.view.Load()
	if v == nil || !v.acquire(p.db) {
		return nil, errBusy
	}
	defer v.release()
	parts := want
	if parts == nil {
		for part := range v.parts {
			parts = append(parts, part)
		}
		slices.Sort(parts)
	}
	for _, part := range parts {
		_, kept := v.standbys[part]
		_, owned := v.parts[part]
		if standby && !kept || !standby && !owned {
			return nil, errNotHere
		}
	}
	snap := v.snap
	a := &localAnswer{parts: parts, frontier: watermark.MinTime}
	var err error
	if standby {
		// Another member's partition: this instance's frontier is not
		// its, and no window is judged final.
		a.standby, a.position = true, v.standbys[parts[0]]
	} else {
		a.completeMin = watermark.MaxTime
		for _, part := range parts {
			a.completeMin = min(a.completeMin, v.parts[part])
		}
		if len(parts) == 0 {
			a.completeMin = watermark.MinTime
		}
		a.frontier = v.frontier
	}
	if err == nil {
		err = read(v, parts, a,
			func(part int32, key string) ([]byte, error) { return snap.GetKey(uint32(part), key) },
			func(part int32, prefix, after string, fn func(string, []byte) bool) error {
				return snap.ScanKeys(uint32(part), prefix, after, fn)
			})
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// lookupLocal answers key's windows intersecting [from, to) from the
// partitions want (nil: every partition answered here), or with standby
// from the standby replica of want[0].
func (p *pipeline) lookupLocal(key string, want []int32, standby bool, from, to int64) (*localAnswer, error) {
	return p.readLocal(want, standby, func(v *queryView, parts []int32, a *localAnswer, get func(int32, string) ([]byte, error), _ func(int32, string, string, func(string, []byte) bool) error) error {
		n := 0
		for _, part := range parts {
			b, err := get(part, key)
			if err != nil {
				return err
			}
			ws, err := v.reader.Windows(nil, uint32(part), key, b, a.complete(v, part), from, to)
			if err != nil {
				return err
			}
			if len(ws) > 0 {
				a.keys = append(a.keys, keyWindows{key: key, partition: part, windows: ws})
			}
			if n += len(ws); n > maxAnswerWindows {
				return errTooManyWindows
			}
		}
		return nil
	})
}

// Bounds of one answer (docs/OPERATIONS.md, Querying windows): a key
// with more windows in range is refused (narrow from and to); a scan's
// page ends before a key that would pass maxAnswerWindows, and a
// partition's scan stops after maxScanKeys keys however few it answered
// (a prefix or range that matches few keys of many).
var (
	maxAnswerWindows = 10_000
	maxScanKeys      = 100_000
)

// errTooManyWindows: one key holds more windows in range than an answer
// may carry.
var errTooManyWindows = errors.New("too many windows")

// scanLocal answers the first limit keys (in key order) starting with
// prefix after after, with their windows intersecting [from, to), over
// every partition answered here.
func (p *pipeline) scanLocal(prefix, after string, limit int, from, to int64) (*localAnswer, error) {
	return p.readLocal(nil, false, func(v *queryView, parts []int32, a *localAnswer, _ func(int32, string) ([]byte, error), scan func(int32, string, string, func(string, []byte) bool) error) error {
		for _, part := range parts {
			n, scanned, last := 0, 0, ""
			var err error
			serr := scan(part, prefix, after, func(key string, b []byte) bool {
				if n == limit || scanned == maxScanKeys {
					a.page.at(last) // the keys through last are complete
					return false
				}
				scanned++
				last = key
				var ws []windowing.WindowState
				if ws, err = v.reader.Windows(nil, uint32(part), key, b, a.complete(v, part), from, to); err != nil {
					return false
				}
				if len(ws) > 0 {
					a.keys = append(a.keys, keyWindows{key: key, partition: part, windows: ws})
					n++
				}
				return true
			})
			if err = errors.Join(err, serr); err != nil {
				return err
			}
		}
		slices.SortFunc(a.keys, func(x, y keyWindows) int { return compareKeys(x.key, x.partition, y.key, y.partition) })
		a.keys = boundPage(&a.page, a.keys, limit, func(k keyWindows) (string, int) { return k.key, len(k.windows) })
		if len(a.keys) > 0 && len(a.keys[0].windows) > maxAnswerWindows {
			return errTooManyWindows
		}
		return nil
	})
}

// pageCut is where a scan's page ends: when cut, the keys through cutoff
// are complete, and the next page starts after it.
type pageCut struct {
	cut    bool
	cutoff string
}

// at records that a scan stopped after key: keys after it may follow.
func (c *pageCut) at(key string) {
	if !c.cut || key < c.cutoff {
		c.cut, c.cutoff = true, key
	}
}

// boundPage drops the keys (in order) after c's cutoff and those past
// limit keys or maxAnswerWindows windows (at least one key stays), moving
// the cutoff to the last key kept when it drops any.
func boundPage[K any](c *pageCut, keys []K, limit int, of func(K) (key string, windows int)) []K {
	windows := 0
	for i, k := range keys {
		key, n := of(k)
		if c.cut && key > c.cutoff {
			return keys[:i]
		}
		if i == limit || i > 0 && windows+n > maxAnswerWindows {
			last, _ := of(keys[i-1])
			c.cut, c.cutoff = true, last
			return keys[:i]
		}
		windows += n
	}
	return keys
}

// compareKeys orders a scan's keys: by key, then partition.
func compareKeys(k1 string, p1 int32, k2 string, p2 int32) int {
	switch {
	case k1 < k2:
		return -1
	case k1 > k2:
		return 1
	}
	return int(p1 - p2)
}

// complete is what part's windows are judged final against: nothing is
// for a standby's answer.
func (a *localAnswer) complete(v *queryView, part int32) int64 {
	c, ok := v.parts[part]
	if !ok || a.standby {
		return watermark.MinTime
	}
	return c
}

// finalThrough is the end at or before which every window's final pane
// is out at frontier f with allowed_lateness lateness; ok false before
// the frontier is known.
func finalThrough(f, lateness int64) (int64, bool) {
	if f == watermark.MinTime {
		return 0, false
	}
	if f == watermark.MaxTime {
		return f, true
	}
	return f - lateness, true
}
