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
// committed state, never the engine: right after each checkpoint commits,
// the poll loop publishes a queryView, a Pebble snapshot of that state
// with what describes it (the partitions complete here, a Reader of the
// engine's encoding), and withdraws the view at every revoke, loss or
// rollback. A query reads the view it finds, under a reference that keeps
// its snapshot open, so it neither waits for the loop nor makes the loop
// wait, and its answer is the state of one checkpoint.

// queryView is what the loop publishes for queries.
type queryView struct {
	snap *state.Snapshot // the checkpoint's committed state
	// refs: the loop's reference while the view is published, and one
	// per query reading it; the last release closes snap.
	refs   atomic.Int32
	reader *windowing.Reader
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
	restoring := map[int32]bool{}
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
	v.snap = p.db.Snapshot()
	v.refs.Store(1)
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

// acquire takes a reference on v; false when v's snapshot is closed
// already (v was replaced meanwhile: load the view again).
func (v *queryView) acquire() bool {
	for {
		n := v.refs.Load()
		if n == 0 {
			return false
		}
		if v.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release drops a reference; the last one closes the snapshot.
func (v *queryView) release() {
	if v.refs.Add(-1) == 0 {
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
	reader   *windowing.Reader
	parts    []int32 // the partitions answered for
	keys     []keyWindows
	more     bool // a scan stopped at its limit
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
	if v == nil || !v.acquire() {
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
	a := &localAnswer{reader: v.reader, parts: parts, frontier: watermark.MinTime}
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
		var meta []byte
		if meta, err = snap.GetMeta(windowing.FrontierMeta); err == nil {
			a.frontier, err = v.reader.Frontier(meta)
		}
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
		}
		return nil
	})
}

// scanLocal answers the first limit keys (in key order) starting with
// prefix after after, with their windows intersecting [from, to), over
// every partition answered here.
func (p *pipeline) scanLocal(prefix, after string, limit int, from, to int64) (*localAnswer, error) {
	return p.readLocal(nil, false, func(v *queryView, parts []int32, a *localAnswer, _ func(int32, string) ([]byte, error), scan func(int32, string, string, func(string, []byte) bool) error) error {
		for _, part := range parts {
			n := 0
			var err error
			serr := scan(part, prefix, after, func(key string, b []byte) bool {
				var ws []windowing.WindowState
				if ws, err = v.reader.Windows(nil, uint32(part), key, b, a.complete(v, part), from, to); err != nil {
					return false
				}
				if len(ws) == 0 {
					return true // none in [from, to): not a key of the answer
				}
				if n == limit {
					a.more = true
					return false
				}
				a.keys = append(a.keys, keyWindows{key: key, partition: part, windows: ws})
				n++
				return true
			})
			if err = errors.Join(err, serr); err != nil {
				return err
			}
		}
		slices.SortFunc(a.keys, func(x, y keyWindows) int {
			switch {
			case x.key < y.key:
				return -1
			case x.key > y.key:
				return 1
			}
			return int(x.partition - y.partition)
		})
		if len(a.keys) > limit {
			a.keys, a.more = a.keys[:limit], true
		}
		return nil
	})
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
