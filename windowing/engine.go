package windowing

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"unsafe"

	"github.com/windowd/windowd/watermark"
)

// Emitter receives the engine's output, in emission order.
type Emitter interface {
	// Pane receives a pane or a retraction. It must not keep p.
	Pane(p *Pane) error
	// Dropped receives a record that no window took, and why: DropExpired
	// (every window it belongs to had already expired: late data) or
	// DropOutOfRange (its windows cannot be represented in int64
	// milliseconds, or it is outside the years calendar windows take:
	// bad input).
	Dropped(ev *Event, reason DropReason) error
}

// DropReason says why a record was dropped by every window.
type DropReason uint8

// Drop reasons.
const (
	DropExpired    DropReason = iota + 1 // late beyond allowed_lateness
	DropOutOfRange                       // windows outside the int64 time range (calendar: years 1..9999)
)

// String describes the reason for dead-letter and late-record headers.
func (r DropReason) String() string {
	if r == DropOutOfRange {
		return "event time out of range: its windows cannot be represented (in int64 milliseconds; calendar windows: years 1 to 9999)"
	}
	return "every window of the record has expired"
}

// Options are the engine's settings beyond the pipeline Spec.
type Options struct {
	// ShardByPartition keeps each partition's windows apart (Kafka: records
	// of a key share a partition, and state follows partitions). When false
	// every partition shares shard 0 (replay).
	ShardByPartition bool
	// Shards, with ShardByPartition and above 0, puts partition p's
	// windows in shard p mod Shards. For inputs keyed alike
	// (co-partitioned) of fewer than Shards partitions each, partition p
	// of input i is partition i*Shards+p: an upstream partition with a
	// generator of its own, while the records of a key from every input
	// meet in shard p. 0: shard p.
	Shards int32
	// CacheBytes bounds the in-memory window cache (approximately); 0 means 64 MiB.
	CacheBytes int
	// MaxPendingBytes is the size of uncommitted store writes beyond which
	// NeedsCheckpoint reports true; 0 means 64 MiB.
	MaxPendingBytes int
	// CommitWhenPending lets the engine commit the store's pending writes
	// itself, even in the middle of a step, once they pass MaxPendingBytes.
	// Only for runs that never restart from their state (replay): such a
	// commit is not a checkpoint (no frontier, no offsets with it).
	CommitWhenPending bool
	// NoSlicing aggregates every hopping window for itself even where
	// slicing applies (slices.go); for tests and benchmarks.
	NoSlicing bool
	// Evolve continues state stored under an earlier definition
	// (layout.go); nil: the state's definition is the spec's.
	Evolve *Evolution
	// PartitionIDsFrom (with ShardByPartition): panes of a partition at
	// or above it carry the partition in their pane id, so that a key the
	// producer's partitioner moved to a partition added to the input
	// never has two final panes with one pane id (docs/OPERATIONS.md,
	// Changing a deployed pipeline). The service sets it to the input's
	// partition count before it grew; 0: never.
	PartitionIDsFrom int32
}

// Stats are running counters of one engine.
type Stats struct {
	Records     int64
	LateDropped int64
	OutOfRange  int64
	Panes       [3]int64 // by Timing
	Retractions int64
	// Evictions counts the times the cache passed its budget and was
	// flushed and emptied (its keys are read back from the store as they
	// are needed).
	Evictions int64
	// QuietAdvances counts the frontier steps the quiet advance made
	// (watermark.Spec.QuietAdvance).
	QuietAdvances int64
	// Discarded counts the records of transaction windows a record
	// discarded (transaction.go), as they go.
	Discarded int64
}

const (
	// DefaultCacheBytes is the window cache's budget when
	// Options.CacheBytes is 0.
	DefaultCacheBytes = 64 << 20
	// DefaultMaxPendingBytes is Options.MaxPendingBytes when it is 0.
	DefaultMaxPendingBytes = 64 << 20
)

// cacheKey names a key state: its shard and group key.
type cacheKey struct {
	shard uint32
	key   string
}

// Engine runs one pipeline's windowing over a Store, in the step order of
// docs/SEMANTICS.md, Step order. A record: (1) assign and update its windows,
// (2) count and immediate late triggers, (3) the partition's watermark
// generator, (4) frontier, (5) on-time and expiry firing. A processing-time
// tick: (1) due early/late timers, (2) idleness, (3) frontier, (4) firing.
//
// Window state lives in a write-back cache of whole keys in front of the
// Store; Checkpoint flushes it exactly. Not safe for concurrent use.
type Engine struct {
	spec     Spec
	opts     Options
	assigner Assigner
	store    Store
	emit     Emitter
	wm       *watermark.Frontier
	f        int64 // frontier as last acted upon
	// prefetched sums what PrefetchKeys read, which nothing uses: it keeps
	// the compiler from dropping those loads.
	prefetched int64
	// quietAbove: while a frontier step made by the quiet advance fires,
	// the frontier the partitions alone gave; an on-time step of a window
	// whose deadline is past it was reached by the quiet advance
	// (Pane.Quiet). MaxTime otherwise.
	quietAbove int64
	codec      stateCodec
	pending    []pendingKey // restored keys of layouts not known yet (layout.go)
	sealed     int64        // windows ending at or before it have expired (Evolution.Sealed)

	cache      keyCache
	cacheBytes int
	// keyBytes is the cache estimate of a key without windows:
	// keyBaseSize, and a transaction key's store (txnKey).
	keyBytes int

	// owned holds the shards whose timers may fire (ShardByPartition only):
	// the partitions assigned to this instance. State of other shards
	// (restored from the last checkpoint, not yet handed back) waits.
	owned map[uint32]bool
	// catching holds the shards of partitions that joined behind the
	// frontier (CatchUp), each with the deadline up to which its own
	// frontier has fired its timers.
	catching map[uint32]int64

	nextEvent int64 // lower bound of the earliest event-time timer
	nextProc  int64 // lower bound of the earliest processing-time timer
	doneEvent int64 // every event-time timer with a deadline <= doneEvent has fired
	doneProc  int64 // every processing-time timer with a deadline <= doneProc has fired

	stats      Stats
	outOfRange bool  // the current record has no representable window
	open       int64 // open windows (persisted with each checkpoint)
	spans      []Span
	touched    []*window
	timers     []Timer
	oldTimers  []Timer  // RestoreKey's
	noState    keyState // RestoreNewKey's old state: none
	pane       Pane
	retract    Pane
	encBuf     []byte
	sliceLen   int64   // hopping windows by slicing: the slice length; 0: off
	byEnd      bool    // windows are named by their end (cumulate: one start, many ends)
	merged     []accum // a sliced window's aggregates as its pane shows them
	slicedTook bool    // the current record went into a slice
	// countFilled: the current record filled a count window (which is
	// gone from touched: it was emitted and deleted).
	countFilled bool
	fetch       []cacheKey
	fetchKeys   []string
	dueKeys     []*keyState // loadDueKeys: the cached key state of each timer, or nil
	// freeWindows are deleted windows of len(spec.Aggregates) aggregates,
	// zeroed, for newWindow to reuse (at most maxFreeWindows): in a pipeline
	// whose windows hold about one record each, a window per record is
	// otherwise the engine's one allocation per record.
	freeWindows []*window

	drain   *drain // a running Drain (drain.go)
	drained bool   // the drain given has finished
}

// maxFreeWindows bounds Engine.freeWindows: enough for the windows one
// frontier step of 10k keys closes, at most about 3 MB with 4 aggregates.
const maxFreeWindows = 16 << 10

// Metadata names the engine keeps in the store.
const (
	metaFrontier    = "frontier"
	metaOpenWindows = "open_windows"
)

// New returns an engine over store, restoring the frontier, the partition
// generators and the timer positions it holds.
func New(spec Spec, wmSpec watermark.Spec, store Store, emit Emitter, opts Options) (*Engine, error) {
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = DefaultCacheBytes
	}
	if opts.MaxPendingBytes <= 0 {
		opts.MaxPendingBytes = DefaultMaxPendingBytes
	}
	e := &Engine{
		spec:     spec,
		opts:     opts,
		store:    store,
		emit:     emit,
		wm:       watermark.NewFrontier(wmSpec),
		cache:    newKeyCache(),
		owned:    map[uint32]bool{},
		catching: map[uint32]int64{},
		// quietAbove: no quiet step is firing.
		quietAbove: watermark.MaxTime,
	}
	e.spec.Aggregates = prepareAggregates(spec.Aggregates)
	e.codec = stateCodec{specs: e.spec.Aggregates, mode: spec.Mode, txn: spec.Window.Kind == Transaction}
	e.sealed = watermark.MinTime
	if ev := opts.Evolve; ev != nil {
		e.codec.gen, e.codec.layouts, e.sealed = ev.Gen, ev.Layouts, ev.Sealed
		for _, l := range ev.Layouts {
			l.Aggregates = prepareAggregates(l.Aggregates)
		}
	}
	e.byEnd = spec.Window.Kind == Cumulate
	e.keyBytes = keyBaseSize
	if e.codec.txn {
		e.keyBytes += int(unsafe.Sizeof(txnKey{}) - unsafe.Sizeof(keyState{}))
	}
	if k := spec.Window.Kind; k != Session && k != Sliding && k != CountWindow && k != Transaction {
		e.assigner = NewAssigner(spec.Window)
		e.sliceLen = sliceLen(&spec, &opts)
		e.assigner.setSlice(e.sliceLen)
	}
	e.pane.Values = make([]Value, len(spec.Aggregates))
	e.retract.Values = make([]Value, len(spec.Aggregates))
	if spec.Window.Calendar != nil {
		e.pane.Zone, e.retract.Zone = spec.Window.Calendar.Zone, spec.Window.Calendar.Zone
	}
	if b, err := store.GetMeta(metaFrontier); err != nil {
		return nil, err
	} else if b != nil {
		if err := e.wm.UnmarshalBinary(b); err != nil {
			return nil, err
		}
	}
	e.f = e.wm.Value()
	if b, err := store.GetMeta(metaOpenWindows); err != nil {
		return nil, err
	} else if n, k := binary.Varint(b); k > 0 {
		e.open = n
	}
	// A fired timer is deleted in the checkpoint that holds the frontier it
	// fired at, so every event-time timer still stored is pending, also one
	// at or below the frontier: its partition was not assigned, or caught
	// up on its own frontier, when the frontier passed it (fireDue skips
	// such timers until their shard may fire). The first scan therefore
	// starts from the earliest timer, not from the frontier: starting at
	// the frontier took them for fired, and their windows never emitted.
	e.doneEvent, e.doneProc = watermark.MinTime, watermark.MinTime
	var err error
	if e.nextEvent, err = e.nextDeadline(EventTimer, e.doneEvent); err != nil {
		return nil, err
	}
	if e.nextProc, err = e.nextDeadline(ProcTimer, e.doneProc); err != nil {
		return nil, err
	}
	if ev := opts.Evolve; ev != nil {
		if err := e.startDrain(ev); err != nil {
			return nil, err
		}
	}
	if ev := opts.Evolve; ev != nil && ev.Rearm {
		if err := e.rearm(ev.PriorLateness); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// expired reports whether the window ending at end has expired: by the
// frontier and allowed_lateness, or sealed by an earlier, smaller
// lateness (Evolution.Sealed).
func (e *Engine) expired(end int64) bool {
	return expiredOrSealed(e.f, end, e.spec.AllowedLateness, e.sealed)
}

// expiredOrSealed reports whether the window ending at end has expired at
// frontier f with allowed_lateness lateness, or is sealed (at or before
// sealed: Evolution.Sealed).
func expiredOrSealed(f, end, lateness, sealed int64) bool {
	return expired(f, end, lateness) || end <= sealed
}

// mergeAccums merges the aggregates src into dst, aggregate by aggregate.
func mergeAccums(dst, src []accum, specs []AggSpec) error {
	for i := range specs {
		if err := dst[i].merge(&specs[i], &src[i]); err != nil {
			return err
		}
	}
	return nil
}

// after returns the first deadline past done.
func after(done int64) int64 {
	if done == watermark.MinTime || done == watermark.MaxTime {
		return done
	}
	return done + 1
}

// before is the inverse of after: the done value whose next scan starts at
// deadline.
func before(deadline int64) int64 {
	if deadline == watermark.MinTime {
		return deadline
	}
	return deadline - 1
}

// nextDeadline returns the earliest deadline of kind after done, or MaxTime.
func (e *Engine) nextDeadline(kind TimerKind, done int64) (int64, error) {
	d, ok, err := e.store.NextTimer(kind, after(done))
	if err != nil {
		return 0, err
	}
	if !ok {
		return watermark.MaxTime, nil
	}
	return d, nil
}

// Frontier is the current event-time frontier.
func (e *Engine) Frontier() int64 { return e.f }

// Watermarks returns the frontier's per-partition view.
func (e *Engine) Watermarks() *watermark.Frontier { return e.wm }

// OpenWindows is the number of windows holding state.
func (e *Engine) OpenWindows() int64 { return e.open }

// CacheBytes is the estimate of what the window cache holds, in bytes: the
// figure held against Options.CacheBytes.
func (e *Engine) CacheBytes() int { return e.cacheBytes }

// Stats returns the running counters.
func (e *Engine) Stats() Stats { return e.stats }

// Complete returns the event time through which the on-time and expiry
// steps of every window of partitions (those whose timers fire here, see
// Firing) have run: the frontier, or less while one of them catches up on
// its own frontier (CatchUp). A window with end <= Complete() has had its
// on-time pane, and one with end + allowed_lateness <= Complete() its
// final pane (docs/SEMANTICS.md, Progress records). ok is false for a
// partition whose timers wait (HoldTimers) and before the frontier is known.
func (e *Engine) Complete(partitions []int32) (c int64, ok bool) {
	c = e.f
	for _, p := range partitions {
		shard := e.shard(p)
		if done, catching := e.catching[shard]; catching {
			c = min(c, done)
		} else if !e.mayFire(shard) {
			return 0, false
		}
	}
	return c, c != watermark.MinTime
}

// Assign adds partition p to the frontier at processing time now; the
// timers of its shard may fire from now on, unless the shard catches up
// (CatchUp, until ReleaseTimers). A follower's assignment leaves its
// lead's shard as it is (followsLead).
func (e *Engine) Assign(p int32, now int64, caughtUp bool) {
	e.wm.Assign(p, now, caughtUp)
	if followsLead(p, e.opts.ShardByPartition, e.opts.Shards) {
		return
	}
	if _, catching := e.catching[e.shard(p)]; !catching {
		e.owned[e.shard(p)] = true
	}
}

// Revoke removes partition p from the frontier; the timers of its shard
// stop firing (DropShard removes its state), unless p follows a lead,
// whose shard it is.
func (e *Engine) Revoke(p int32) {
	e.wm.Revoke(p)
	if !followsLead(p, e.opts.ShardByPartition, e.opts.Shards) {
		e.HoldTimers(p)
	}
}

// mayFire reports whether timers of shard may fire: always in replay, only
// for assigned partitions when state is sharded by partition.
func (e *Engine) mayFire(shard uint32) bool {
	return !e.opts.ShardByPartition || e.owned[shard]
}

func (e *Engine) shard(p int32) uint32 { return shardOf(p, e.opts.ShardByPartition, e.opts.Shards) }

// shardOf is partition p's shard: 0 unless byPartition, else p, or p mod
// n when n > 0 (Options.Shards).
func shardOf(p int32, byPartition bool, n int32) uint32 {
	switch {
	case !byPartition:
		return 0
	case n > 0:
		return uint32(p % n)
	}
	return uint32(p)
}

// followsLead reports whether partition p shares the shard of another
// partition, its lead, which owns the shard (shardOf with n: p of an input
// after the first of co-partitioned inputs, whose state is its lead's):
// p's assignment, revocation and drop leave the shard to the lead's.
func followsLead(p int32, byPartition bool, n int32) bool {
	return byPartition && n > 0 && p >= n
}

// shardWatermark is the least watermark of the known partitions of shard
// (shardOf with n), and whether one is known.
func shardWatermark(wm *watermark.Frontier, shard uint32, n int32) (int64, bool) {
	if n <= 0 {
		g, ok := wm.Generator(int32(shard))
		return g.Watermark, ok
	}
	least, known := watermark.MaxTime, false
	last, _ := wm.Last()
	for p := int32(shard); p <= last && p >= 0; p += n {
		if g, ok := wm.Generator(p); ok {
			least, known = min(least, g.Watermark), true
		}
	}
	return least, known
}

// Record processes one event that arrived at processing time now.
func (e *Engine) Record(ev *Event, now int64) error {
	e.stats.Records++
	shard := e.shard(ev.Partition)
	ks, err := e.keyState(shard, ev.Key)
	if err != nil {
		return err
	}
	catching := false
	if len(e.catching) > 0 {
		_, catching = e.catching[shard]
	}
	if catching {
		// Steps (1) and (2) against the partition's own frontier.
		f := e.f
		e.f = e.catchingFrontier(shard)
		err = e.assignAndTrigger(ks, ev, now)
		e.f = f
	} else {
		err = e.assignAndTrigger(ks, ev, now)
	}
	if err != nil {
		return err
	}
	// (3) generator, (4) frontier, (5) firing. A record with no
	// representable window is a dead letter, not an event: it moves no
	// watermark (docs/SEMANTICS.md, Bad input).
	if !e.outOfRange {
		e.wm.Observe(ev.Partition, ev.Time, now)
	}
	if err := e.advance(); err != nil {
		return err
	}
	if catching {
		if err := e.fireCatching(shard); err != nil {
			return err
		}
	}
	return e.maybeEvict()
}

// assignAndTrigger runs steps (1) and (2) of a record at frontier e.f.
func (e *Engine) assignAndTrigger(ks *keyState, ev *Event, now int64) error {
	// (1) assign and update
	e.touched = e.touched[:0]
	e.outOfRange = false
	e.slicedTook = false
	e.countFilled = false
	var err error
	switch e.spec.Window.Kind {
	case CountWindow:
		err = e.assignCount(ks, ev, now)
	case Session:
		err = e.assignSession(ks, ev, now)
	case Transaction:
		err = e.assignTransaction(ks, ev, now)
	case Sliding:
		err = e.assignSliding(ks, ev, now)
	default:
		err = e.assignFixed(ks, ev, now)
	}
	if err != nil {
		return err
	}
	if reason, drop := dropReason(len(e.touched) > 0 || e.slicedTook || e.countFilled, e.outOfRange); drop {
		if reason == DropOutOfRange {
			e.stats.OutOfRange++
		} else {
			e.stats.LateDropped++
		}
		if err := e.emit.Dropped(ev, reason); err != nil {
			return err
		}
	}
	// (2) count triggers and immediate late triggers
	for _, w := range e.touched {
		if err := e.recordTriggers(ks, w); err != nil {
			return err
		}
	}
	return nil
}

// Tick advances processing time to now.
func (e *Engine) Tick(now int64) error {
	// (1) due processing-time timers
	if err := e.fireDue(ProcTimer, now, &e.doneProc, &e.nextProc, e.fireProc); err != nil {
		return err
	}
	// (2) idleness, (3) frontier, (4) firing
	e.wm.Tick(now)
	if err := e.advance(); err != nil {
		return err
	}
	return e.maybeEvict()
}

// Advance recomputes the frontier after partition watermarks were set from
// outside (watermark.Frontier.Mark) and fires what it passed.
func (e *Engine) Advance() error {
	if err := e.advance(); err != nil {
		return err
	}
	for shard := range e.catching {
		if err := e.fireCatching(shard); err != nil {
			return err
		}
	}
	return e.maybeEvict()
}

// Finish moves the frontier to plus infinity: every window fires and expires.
func (e *Engine) Finish() error {
	if e.wm.Finish() {
		if err := e.fireEvent(e.wm.Value()); err != nil {
			return err
		}
	}
	return e.maybeEvict()
}

func (e *Engine) advance() error {
	if !e.wm.Advance() {
		return nil
	}
	if from, quiet := e.wm.QuietStep(); quiet {
		e.stats.QuietAdvances++
		e.quietAbove = from
		defer func() { e.quietAbove = watermark.MaxTime }()
	}
	return e.fireEvent(e.wm.Value())
}

// fireEvent runs the on-time and expiry steps of every window due at f.
func (e *Engine) fireEvent(f int64) error {
	e.f = f
	if err := e.fireDue(EventTimer, f, &e.doneEvent, &e.nextEvent, e.fireWindow); err != nil {
		return err
	}
	e.endDrain()
	return nil
}

// fireDue fires every timer of kind due by upTo, in index order, in chunks.
func (e *Engine) fireDue(kind TimerKind, upTo int64, done, next *int64, fire func(Timer, *keyState) error) error {
	if *next > upTo {
		return nil
	}
	waiting := watermark.MaxTime // earliest deadline of a timer whose shard is not owned
	err := e.eachDue(kind, after(*done), upTo, func(t Timer, ks *keyState) error {
		if !e.mayFire(t.Shard) {
			waiting = min(waiting, t.Deadline)
			return nil
		}
		return fire(t, ks)
	})
	if err != nil {
		return err
	}
	*done = upTo
	if waiting <= upTo {
		// Not everything due has fired: scan again from the first timer
		// left waiting for its shard's assignment.
		*done = before(waiting)
	}
	*next, err = e.nextDeadline(kind, *done)
	return err
}

// eachDue calls each for every timer of kind with from <= deadline <= upTo,
// in index order, read in chunks: the uncached keys of a chunk are loaded
// first (loadDueKeys), and the cache is kept within its budget between
// chunks (one step may fire every open window: the end of input). each
// also gets the timer's key state when loadDueKeys found it cached, or nil.
func (e *Engine) eachDue(kind TimerKind, from, upTo int64, each func(Timer, *keyState) error) error {
	const chunk = 1024
	var cursor *Timer
	for {
		var err error
		e.timers, err = e.store.DueTimers(kind, from, upTo, cursor, chunk, e.timers[:0])
		if err != nil {
			return err
		}
		if err := e.loadDueKeys(e.timers); err != nil {
			return err
		}
		for i, t := range e.timers {
			if err := each(t, e.dueKeys[i]); err != nil {
				return err
			}
		}
		clear(e.dueKeys) // the cache may let them go
		if err := e.maybeEvict(); err != nil {
			return err
		}
		if len(e.timers) < chunk {
			return nil
		}
		last := e.timers[len(e.timers)-1]
		cursor = &last
	}
}

// timerWindow returns the key state (ks, when not nil: t's, cached) and
// the window of timer t.
func (e *Engine) timerWindow(t Timer, ks *keyState) (*keyState, *window, error) {
	if ks == nil {
		var err error
		if ks, err = e.keyState(t.Shard, t.Key); err != nil {
			return nil, nil, err
		}
	}
	w := ks.findNamed(t.Start, e.byEnd)
	if w == nil {
		return nil, nil, fmt.Errorf("windowing: timer for key %q window start %d has no window", t.Key, t.Start)
	}
	return ks, w, nil
}

// fireWindow runs the on-time step or the expiry of one window (ks: as
// for timerWindow).
func (e *Engine) fireWindow(t Timer, ks *keyState) error {
	var w *window
	var err error
	if e.codec.txn {
		if ks, w, err = e.leftTimer(t, ks); err != nil || w == nil {
			return err
		}
	} else if ks, w, err = e.timerWindow(t, ks); err != nil {
		return err
	}
	if err := e.store.DeleteTimer(t); err != nil {
		return err
	}
	ks.dirty = true
	if w.retired {
		return e.fireRetired(ks, w)
	}
	if e.codec.txn {
		// A transaction window's timer before its deadline, which moved
		// later since the timer was set (rebound), is set again and
		// fires nothing, unless the frontier has passed the deadline too.
		if due := eventDeadline(w.onTimeDone, w.end, e.spec.AllowedLateness); t.Deadline < due && due > e.f {
			return e.setEventTimer(ks, w, due)
		}
	}
	if ks.sliced {
		if err := e.deriveSliced(ks, w); err != nil {
			return err
		}
	}
	if !w.onTimeDone {
		pane, expire := onTimeFiring(&e.spec.Trigger, e.f, w.end, e.spec.AllowedLateness)
		if expire {
			// On time and expired in the same step: one final pane.
			if pane {
				if err := e.emitPane(ks, w, OnTime, true); err != nil {
					return err
				}
			}
			return e.retireOrDelete(ks, w)
		}
		w.onTimeDone = true
		if err := e.cancelProc(ks, w); err != nil {
			return err
		}
		if pane {
			if err := e.emitPane(ks, w, OnTime, false); err != nil {
				return err
			}
		}
		return e.setEventTimer(ks, w, eventDeadline(true, w.end, e.spec.AllowedLateness))
	}
	// Expiry after the on-time step: the closing pane.
	if pane, timing := closingFiring(e.spec.Trigger.Closing, w.sincePane, w.lateSeen, w.settled); pane {
		if err := e.emitPane(ks, w, timing, true); err != nil {
			return err
		}
	}
	return e.retireOrDelete(ks, w)
}

// fireProc runs a due early or late processing-time trigger (ks: as for
// timerWindow). The timer fires a pane of its own phase only: an early one
// while the window is open, a late one while it is late; one whose window
// has left that phase is dropped (the merge that makes a late session on
// time again drops its late timer already).
func (e *Engine) fireProc(t Timer, ks *keyState) error {
	ks, w, err := e.timerWindow(t, ks)
	if err != nil {
		return err
	}
	if err := e.store.DeleteTimer(t); err != nil {
		return err
	}
	w.hasProc = false
	ks.dirty = true
	if procDelay(&e.spec.Trigger, w.lateProc()) <= 0 {
		return nil // armed under a trigger the configuration no longer has
	}
	if fire, timing := procFiring(w.lateProc(), e.frontierOf(ks), w.end, w.sincePane); fire {
		return e.emitPane(ks, w, timing, false)
	}
	return nil
}

// frontierOf is the frontier the windows of ks are judged against: the
// frontier, but for count windows, whose bounds are not times and which
// the frontier never closes (count.go).
func (e *Engine) frontierOf(ks *keyState) int64 {
	if ks.counting {
		return watermark.MinTime
	}
	return e.f
}

// recordTriggers evaluates step (2) for one window a record updated.
func (e *Engine) recordTriggers(ks *keyState, w *window) error {
	if fire, timing := recordFiring(&e.spec.Trigger, e.frontierOf(ks), w.end, w.sincePane); fire {
		return e.emitPane(ks, w, timing, false)
	}
	return nil
}

// newWindow creates the window [start, end) at the current frontier. A
// window first created by a late record is born with its on-time step done.
func (e *Engine) newWindow(ks *keyState, start, end int64) (*window, error) {
	return e.openWindow(ks, start, end, false)
}

// openWindow is newWindow; with last, the new window goes after every
// window of ks (the caller knows: no window of ks is read).
func (e *Engine) openWindow(ks *keyState, start, end int64, last bool) (*window, error) {
	nAcc := 0
	if !ks.sliced {
		nAcc = len(e.spec.Aggregates)
	}
	var w *window
	if e.codec.txn {
		w = txnStore(ks).takeWindow(nAcc)
	}
	if w != nil {
	} else if n := len(e.freeWindows); n > 0 && nAcc == len(e.spec.Aggregates) {
		w = e.freeWindows[n-1]
		e.freeWindows[n-1] = nil
		e.freeWindows = e.freeWindows[:n-1]
	} else {
		w = allocWindow(nAcc)
	}
	w.start, w.end = start, end
	w.mode, w.partial = e.spec.Mode, 0
	if e.drain != nil && e.drainPartial(start, end) {
		w.partial = allPartial(len(e.spec.Aggregates))
	}
	if closed(e.f, end) {
		w.onTimeDone = true
		w.lateSeen = true
	}
	ks.insert(w, last)
	e.open++
	e.grow(ks, e.windowBytes(ks))
	return w, e.setEventTimer(ks, w, eventDeadline(w.onTimeDone, end, e.spec.AllowedLateness))
}

// windowBytes is the cache estimate of one window of ks: its aggregates
// live in the window unless ks is sliced.
func (e *Engine) windowBytes(ks *keyState) int {
	if ks.sliced {
		return windowBaseSize
	}
	return windowBaseSize + len(e.spec.Aggregates)*accumSize
}

// sliceBytes is the cache estimate of one slice.
func (e *Engine) sliceBytes() int {
	return sliceBaseSize + len(e.spec.Aggregates)*accumSize
}

// grow raises the cache estimate of ks by n bytes of a window or slice it
// now holds; release gives them back.
func (e *Engine) grow(ks *keyState, n int) {
	ks.size += n
	e.cacheBytes += n
}

// release lowers the cache estimate of ks by n bytes of windows or slices
// it no longer holds, never below the key's own share: the estimate
// follows what is live, so windows that open and close do not fill the
// budget and force an eviction of every key.
func (e *Engine) release(ks *keyState, n int) {
	n = min(n, ks.size-e.keyBytes-len(ks.key))
	if n > 0 {
		ks.size -= n
		e.cacheBytes -= n
	}
}

// update adds ev to w and arms the processing-time trigger of its phase.
func (e *Engine) update(ks *keyState, w *window, ev *Event, now int64) error {
	if closed(e.frontierOf(ks), w.end) {
		w.lateSeen = true
	}
	for i := range e.spec.Aggregates {
		w.acc[i].add(&e.spec.Aggregates[i], &ev.Inputs[i])
	}
	w.sincePane++
	ks.dirty = true
	e.touched = append(e.touched, w)
	return e.armProc(ks, w, now)
}

// armProc arms the processing-time trigger of w's phase (procDelay) at
// processing time now, unless w has one pending.
func (e *Engine) armProc(ks *keyState, w *window, now int64) error {
	if w.hasProc {
		return nil
	}
	if d := procDelay(&e.spec.Trigger, w.lateProc()); d > 0 {
		return e.setProc(ks, w, addSat(now, d))
	}
	return nil
}

func (e *Engine) assignFixed(ks *keyState, ev *Event, now int64) error {
	if e.sliceLen > 0 && !ks.sliced && len(ks.windows) == 0 {
		ks.sliced = true // a key restored from per-window state slices once its windows are gone
	}
	if ks.sliced {
		return e.assignSliced(ks, ev)
	}
	e.spans = e.drainAssigner(ev.Time).Windows(e.spans[:0], ev.Time)
	e.outOfRange = len(e.spans) == 0
	for _, sp := range e.spans {
		if e.expired(sp.End) {
			continue // expired: dropped for this window
		}
		w := ks.findSpan(sp, e.byEnd)
		if w == nil {
			var err error
			if w, err = e.newWindow(ks, sp.Start, sp.End); err != nil {
				return err
			}
		}
		if err := e.update(ks, w, ev, now); err != nil {
			return err
		}
	}
	return nil
}

// assignSession opens [t, t+gap) and merges it with every overlapping
// session of the key; touching sessions do not merge.
func (e *Engine) assignSession(ks *keyState, ev *Event, now int64) error {
	if !e.Representable(ev.Time) {
		e.outOfRange = true
		return nil
	}
	start, end := ev.Time, ev.Time+e.spec.Window.Gap
	var first, last = -1, -1
	for i, w := range ks.windows {
		if w.start < end && start < w.end {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		if e.expired(end) {
			return nil // expired: dropped
		}
		w, err := e.newWindow(ks, start, end)
		if err != nil {
			return err
		}
		return e.update(ks, w, ev, now)
	}
	survivor := ks.windows[first]
	if first == last && survivor.start <= start && end <= survivor.end {
		return e.update(ks, survivor, ev, now)
	}
	// Merge: sessions are disjoint and sorted, so the overlapping ones are
	// contiguous. The merged window is identified by its earliest start.
	absorbed := append([]*window(nil), ks.windows[first+1:last+1]...)
	newStart, newEnd := min(start, survivor.start), max(end, ks.windows[last].end)
	// Timers are keyed by start: drop every merged window's timers, keep the
	// earliest processing-time deadline of the merged window's phase, and
	// re-add under the new bounds. A late timer of a session the merge makes
	// on time again (its end is past the frontier) is dropped, not carried:
	// it would fire an EARLY pane (docs/SEMANTICS.md, "Timers across a
	// session merge").
	late := closed(e.f, newEnd)
	hasProc, proc := survivor.procOf(late)
	if err := e.dropTimers(ks, survivor); err != nil {
		return err
	}
	for _, a := range absorbed {
		// Read a's timer before dropTimers cancels it: the earliest
		// pending deadline is the merged window's (issue 48).
		if ok, d := a.procOf(late); ok && (!hasProc || d < proc) {
			hasProc, proc = true, d
		}
		if err := e.absorb(ks, survivor, a); err != nil {
			return err
		}
	}
	survivor.start, survivor.end = newStart, newEnd
	ks.resort()
	survivor.onTimeDone = late
	if err := e.setEventTimer(ks, survivor, eventDeadline(late, newEnd, e.spec.AllowedLateness)); err != nil {
		return err
	}
	if hasProc {
		if err := e.setProc(ks, survivor, proc); err != nil {
			return err
		}
	}
	ks.dirty = true
	return e.update(ks, survivor, ev, now)
}

// absorb merges window a of ks into survivor and removes a: its timers
// go, its aggregates and trigger state join survivor's, and in retracting
// mode its last pane is retracted (a session merge; a transaction window
// reaching the next, transaction.go).
func (e *Engine) absorb(ks *keyState, survivor, a *window) error {
	if err := e.dropTimers(ks, a); err != nil {
		return err
	}
	survivor.partial |= a.partial
	if a.mode == Retracting && a.last != nil {
		if err := e.emitRetraction(ks, a.last); err != nil {
			return err
		}
	}
	if err := mergeAccums(survivor.acc, a.acc, e.spec.Aggregates); err != nil {
		return err
	}
	survivor.sincePane += a.sincePane
	if a.nextIndex > survivor.nextIndex {
		survivor.lastLate = a.lastLate // the merged window's panes go on from a's
	}
	survivor.nextIndex = max(survivor.nextIndex, a.nextIndex)
	survivor.lateSeen = survivor.lateSeen || a.lateSeen
	survivor.settled = survivor.settled || a.settled
	ks.remove(a)
	e.release(ks, e.windowBytes(ks))
	e.open--
	if e.codec.txn {
		txnStore(ks).giveWindow(a)
	}
	return nil
}

func (e *Engine) setEventTimer(ks *keyState, w *window, deadline int64) error {
	w.timer = deadline
	if deadline < e.nextEvent {
		e.nextEvent = deadline
	}
	return e.store.AddTimer(timerOf(EventTimer, deadline, ks, w, e.byEnd))
}

func (e *Engine) setProc(ks *keyState, w *window, deadline int64) error {
	w.hasProc, w.proc = true, deadline
	if deadline < e.nextProc {
		e.nextProc = deadline
	}
	return e.store.AddTimer(timerOf(ProcTimer, deadline, ks, w, e.byEnd))
}

// dropTimers removes both of w's timers from the indexes.
func (e *Engine) dropTimers(ks *keyState, w *window) error {
	if err := e.store.DeleteTimer(timerOf(EventTimer, w.timer, ks, w, e.byEnd)); err != nil {
		return err
	}
	return e.cancelProc(ks, w)
}

func (e *Engine) cancelProc(ks *keyState, w *window) error {
	if !w.hasProc {
		return nil
	}
	w.hasProc = false
	return e.store.DeleteTimer(timerOf(ProcTimer, w.proc, ks, w, e.byEnd))
}

func (e *Engine) deleteWindow(ks *keyState, w *window) error {
	// The event timer was deleted by the caller (it is the one firing).
	if err := e.cancelProc(ks, w); err != nil {
		return err
	}
	ks.remove(w)
	if w.retired && ks.slide != nil {
		ks.slide.retired = false
	}
	e.release(ks, e.windowBytes(ks))
	e.open--
	ks.dirty = true
	if ks.sliced {
		e.dropSlices(ks)
	}
	if ks.sliding {
		e.dropSlides(ks)
	}
	if e.codec.txn {
		e.dropTransaction(ks, w)
		if txnStore(ks).giveWindow(w) {
			return nil
		}
	}
	e.recycle(w)
	return nil
}

// recycle keeps deleted window w for newWindow, zeroed, when it has the
// pipeline's number of aggregates and there is room. Nothing refers to a
// deleted window: its key no longer lists it, its timers are gone, and a
// pane copies what it shows.
func (e *Engine) recycle(w *window) {
	if len(w.acc) != len(e.spec.Aggregates) || len(e.freeWindows) >= maxFreeWindows {
		return
	}
	acc := w.acc
	clear(acc)
	*w = window{acc: acc}
	e.freeWindows = append(e.freeWindows, w)
}

// emitPane emits w's current content as a pane (after the retraction of
// its previous pane in retracting mode) and resets its trigger state.
// A window opened under another accumulation mode than the pipeline's
// takes the pipeline's at this pane (bridgeMode).
func (e *Engine) emitPane(ks *keyState, w *window, timing Timing, final bool) error {
	if w.ended == Discards {
		// A discarded transaction window emits nothing (transaction.go).
		w.sincePane = 0
		return e.cancelProc(ks, w)
	}
	if w.nextIndex == 0 {
		w.mode = e.spec.Mode // no pane yet: its state is complete in every mode
	}
	next := bridgeMode(w.mode, e.spec.Mode)
	retract, _, _ := accumulation(w.mode, final)
	_, remember, discard := accumulation(next, final)
	if retract && w.last != nil {
		if err := e.emitRetraction(ks, w.last); err != nil {
			return err
		}
		w.last = nil
	}
	p := &e.pane
	acc := w.acc
	if ks.sliced {
		acc = e.merged // deriveSliced ran when the window's timer fired
	}
	hasPart, _ := e.partitionInID(ks)
	windowPane(p, ks, w, acc, e.spec.Aggregates, hasPart)
	if e.drain != nil {
		e.paneZone(p, w.start, w.end)
	}
	p.Timing, p.Index, p.Final, p.Mode, p.Retraction = timing, w.nextIndex, final, w.mode, false
	p.Quiet = timing == OnTime && w.end > e.quietAbove
	p.TimedOut = e.codec.txn && w.ended == NotEnding && timing != Early
	if err := e.emit.Pane(p); err != nil {
		return err
	}
	e.stats.Panes[timing]++
	w.nextIndex++
	if remember {
		w.last = &lastPane{start: w.start, end: w.end, firstTime: w.firstTime(), lastTime: w.lastTime(), timing: timing, timedOut: p.TimedOut, mode: p.Mode, index: p.Index,
			values: append([]Value(nil), p.Values...)}
	}
	if discard {
		for i := range w.acc {
			w.acc[i] = accum{}
		}
		if e.codec.txn {
			e.shown(ks, w)
		}
	}
	w.mode = next
	w.sincePane = 0
	if !ks.counting { // (a count window's paneSeq is its last record's time)
		w.paneSeq = ks.seq
	}
	if settles(timing) {
		w.settled = true
		w.lastLate = timing == Late
	}
	ks.dirty = true
	return e.cancelProc(ks, w)
}

// partitionInID reports whether panes of ks carry its partition in their
// id (Options.PartitionIDsFrom), and the partition.
func (e *Engine) partitionInID(ks *keyState) (bool, int32) {
	return partitionInID(&e.opts, ks.shard), int32(ks.shard)
}

// partitionInID reports whether panes of shard carry its partition in
// their id under opts (Options.PartitionIDsFrom).
func partitionInID(opts *Options, shard uint32) bool {
	from := opts.PartitionIDsFrom
	return from > 0 && opts.ShardByPartition && int64(shard) >= int64(from)
}

func (e *Engine) emitRetraction(ks *keyState, l *lastPane) error {
	r := &e.retract
	r.Key, r.Start, r.End = ks.key, l.start, l.end
	r.Timing, r.Index, r.Final, r.Mode, r.Retraction = l.timing, l.index, false, l.mode, true
	r.Partial = 0
	r.Records, r.FirstTime, r.LastTime = ks.counting, l.firstTime, l.lastTime
	r.TimedOut = l.timedOut
	r.HasPartition, r.Partition = e.partitionInID(ks)
	if e.drain != nil {
		e.paneZone(r, l.start, l.end)
	}
	copy(r.Values, l.values)
	e.stats.Retractions++
	return e.emit.Pane(r)
}

const (
	windowBaseSize = 160 // window struct, slice slot, lastPane pointer
	accumSize      = 32  // without a sketch's own memory (distinct_approx, quantiles, top_k)
	// keyBaseSize: the keyState struct (112-byte size class), its map slot
	// and the rounding of its copied key. Now that the estimate gives back
	// closed windows, a key without windows counts only this.
	keyBaseSize = 160
)

// keyState returns the cached state of (shard, key), loading it from the store on a miss.
func (e *Engine) keyState(shard uint32, key string) (*keyState, error) {
	if ks := e.cache.get(shard, key); ks != nil {
		return ks, nil
	}
	b, err := e.store.GetKey(shard, key)
	if err != nil {
		return nil, err
	}
	// key may point into a record's buffers (Event.Key): the cache keeps
	// a copy.
	return e.cacheKey(shard, strings.Clone(key), b)
}

// newKeyState returns an empty keyState of (shard, key). A key of a
// sliding pipeline whose slide store is a tree comes with its store in
// the same allocation (slidingKey).
func (e *Engine) newKeyState(shard uint32, key string) *keyState {
	return newKeyState(&e.spec, e.codec.txn, shard, key)
}

// newKeyState returns an empty keyState of (shard, key) for a pipeline of
// spec (txn: of transaction windows).
func newKeyState(spec *Spec, txn bool, shard uint32, key string) *keyState {
	if txn {
		return newTxnKey(shard, key, spec.Aggregates)
	}
	if spec.Window.Kind != Sliding || !slideIndexed(spec.Aggregates) {
		return &keyState{shard: shard, key: key}
	}
	sk := &slidingKey{keyState: keyState{shard: shard, key: key}}
	sk.ts.init(spec.Aggregates)
	sk.slide = &sk.ts.slides
	return &sk.keyState
}

// cacheKey decodes the stored value b of (shard, key) (nil: no window)
// into the cache.
func (e *Engine) cacheKey(shard uint32, key string, b []byte) (*keyState, error) {
	ks := e.newKeyState(shard, key)
	ks.size = e.keyBytes + len(key)
	if b != nil {
		if err := e.codec.decode(b, ks); err != nil {
			return nil, fmt.Errorf("key %q: %w", key, err)
		}
		if ks.sliced && e.sliceLen == 0 {
			if err := e.unslice(ks); err != nil {
				return nil, fmt.Errorf("key %q: %w", key, err)
			}
		}
		ks.size += len(b) + len(ks.windows)*windowBaseSize + len(ks.slices)*sliceBaseSize
		if ks.slide != nil {
			ks.size += ks.slide.len() * sliceBaseSize
		}
	}
	e.cache.put(ks)
	e.cacheBytes += ks.size
	return ks, nil
}

// loadDueKeys loads the keys of timers that are not cached, shard by shard
// in key order with one store scan each: firing many windows of keys that
// left the cache (a frontier step past many deadlines, the end of input)
// then reads the store sequentially instead of one point read per window.
// (Prefetch, prefetch.go, is another thing: it reads cached state only.)
func (e *Engine) loadDueKeys(timers []Timer) error {
	e.fetch, e.dueKeys = e.fetch[:0], e.dueKeys[:0]
	for _, t := range timers {
		ks := e.cache.get(t.Shard, t.Key)
		e.dueKeys = append(e.dueKeys, ks)
		if ks == nil && e.mayFire(t.Shard) {
			e.fetch = append(e.fetch, cacheKey{t.Shard, t.Key})
		}
	}
	if len(e.fetch) < 2 {
		return nil // keyState's point read will do
	}
	sort.Slice(e.fetch, func(i, j int) bool {
		a, b := e.fetch[i], e.fetch[j]
		return a.shard < b.shard || (a.shard == b.shard && a.key < b.key)
	})
	for i := 0; i < len(e.fetch); {
		j := i
		e.fetchKeys = e.fetchKeys[:0]
		for ; j < len(e.fetch) && e.fetch[j].shard == e.fetch[i].shard; j++ {
			if n := len(e.fetchKeys); n == 0 || e.fetchKeys[n-1] != e.fetch[j].key {
				e.fetchKeys = append(e.fetchKeys, e.fetch[j].key)
			}
		}
		shard := e.fetch[i].shard
		err := e.store.GetKeys(shard, e.fetchKeys, func(key string, value []byte) error {
			_, err := e.cacheKey(shard, key, value)
			return err
		})
		if err != nil {
			return err
		}
		i = j
	}
	return nil
}

// flush writes every dirty key to the store.
func (e *Engine) flush() error {
	return e.cache.each(func(ks *keyState) error {
		if !ks.dirty {
			return nil
		}
		if len(ks.windows) == 0 && !ks.counting {
			if err := e.store.DeleteKey(ks.shard, ks.key); err != nil {
				return err
			}
		} else {
			var err error
			e.encBuf, err = e.codec.encode(e.encBuf[:0], ks)
			if err != nil {
				return err
			}
			if err := e.store.PutKey(ks.shard, ks.key, e.encBuf); err != nil {
				return err
			}
		}
		ks.dirty = false
		return nil
	})
}

// maybeEvict empties the cache, after flushing it, when it is over budget.
func (e *Engine) maybeEvict() error {
	if e.cacheBytes <= e.opts.CacheBytes {
		return nil
	}
	if err := e.flush(); err != nil {
		return err
	}
	e.cache.clear()
	e.cacheBytes = 0
	e.stats.Evictions++
	if e.opts.CommitWhenPending && e.NeedsCheckpoint() {
		return e.store.Commit(false)
	}
	return nil
}

// NeedsCheckpoint reports that the store holds so many uncommitted writes
// (cache evictions, timers) that the caller should run its commit cycle now
// rather than at its next interval: memory stays bounded by the cache
// budget plus MaxPendingBytes, not by the records between checkpoints.
func (e *Engine) NeedsCheckpoint() bool {
	return e.store.PendingBytes() >= e.opts.MaxPendingBytes
}

// Checkpoint flushes the cache and the frontier state to the store and
// commits them as one atomic batch (synced when sync is true). The caller
// may add its own writes (offsets) to the store before calling it.
func (e *Engine) Checkpoint(sync bool) error {
	if err := e.flush(); err != nil {
		return err
	}
	b, err := e.wm.MarshalBinary()
	if err != nil {
		return err
	}
	if err := e.store.PutMeta(metaFrontier, b); err != nil {
		return err
	}
	if err := e.store.PutMeta(metaOpenWindows, binary.AppendVarint(nil, e.open)); err != nil {
		return err
	}
	return e.store.Commit(sync)
}
