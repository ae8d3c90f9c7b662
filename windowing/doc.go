// Package windowing is windowd's event-time windowing engine: it assigns
// decoded records (Event) to tumbling, hopping, session, sliding, calendar or cumulating windows
// per group key, keeps their partial aggregates and trigger state, tracks the
// frontier over the input partitions' watermarks (package watermark), and
// emits panes and dropped records to an Emitter. docs/SEMANTICS.md is its
// contract; the code cites it by section.
//
// The package is pure: no Kafka, no Pebble, no wall clock. Durable state
// goes through the Store interface (package state implements it over
// Pebble), processing time is passed in as Unix milliseconds (Record, Tick),
// and the caller decides when to checkpoint. The same engine runs `windowd
// run` and `windowd replay`.
//
// Invariants the engine keeps:
//
//   - Step order (docs/SEMANTICS.md, Step order). A record: assign and
//     update its windows against the current frontier, count and immediate
//     late triggers, the partition's watermark generator, the frontier,
//     on-time and expiry firing; so a record is never made late by its own
//     watermark. A processing-time tick: due early and late timers,
//     idleness, the frontier, firing.
//   - The frontier never decreases (docs/SEMANTICS.md, Frontier): it is the
//     maximum of its previous value and the minimum watermark over the
//     active partitions (the largest one when every partition is idle);
//     Finish moves it to plus infinity. A partition
//     catching up after it moved here (CatchUp) runs on its own frontier,
//     the minimum of the frontier and its watermark, until ReleaseTimers.
//   - Lateness is judged against the frontier when a record arrives
//     (docs/SEMANTICS.md, Lateness): a window is on time while F < end, late
//     while end <= F < end + allowed_lateness, expired after. A record is
//     added to every window of it that has not expired, and dropped, and
//     reported to Emitter.Dropped, only when none took it; nothing is
//     dropped silently. Session lateness is judged on the merged window.
//   - Triggers and firing follow docs/SEMANTICS.md, Triggers and Firing; the
//     decisions are the pure functions of trigger.go. Every window has one
//     event-time timer: its end until its on-time step, then its expiry. The
//     on-time step runs once per window (never for a window born late);
//     expiry emits the closing pane the policy calls for and deletes the
//     window's state in the same step. A processing-time (early or late
//     every) timer fires only a pane of the phase it was armed in, and only
//     when the window changed since its last pane.
//   - Panes (docs/SEMANTICS.md, Panes): a window's pane indexes count 0, 1,
//     2 … (a merged session continues from the largest next index of the
//     sessions it absorbed); at most one pane is final, its last; a
//     trigger decides when a pane fires, never what it holds. Discarding
//     panes hold what arrived since the previous pane; in retracting mode
//     the retraction of a window's previous pane comes right before its
//     next one. Windows due in one frontier step fire in deadline order
//     (end for the on-time step, end + allowed_lateness for expiry), then
//     shard, key and start: the timer index order.
//   - A timer of a shard whose partition is not assigned here does not fire
//     (docs/SEMANTICS.md, Frontier, "Restart hold"): its windows wait for the
//     assignment (ShardByPartition only).
//   - State. Window state is the Store's, per (shard, key), behind a
//     write-back cache of whole keys bounded by Options.CacheBytes (evicted
//     keys are flushed and read back). Checkpoint flushes the cache and
//     commits it with the frontier and every partition's generator as one
//     atomic batch; an engine opened on that store (New) resumes from them,
//     and fires the event-time timers still stored, including those at or
//     below the restored frontier that were never fired. RestoreKey,
//     DropShard and Skip move a partition's state between instances
//     (docs/SEMANTICS.md, State follows partitions).
//   - Hopping windows by slicing (slices.go) give the same panes as
//     aggregating per window (docs/SEMANTICS.md, Windows).
//   - Aggregates (docs/SEMANTICS.md, Aggregates) are bounded in size and
//     merge in one call. A quantiles sketch is a function of its multiset
//     of values (quantiles.go), so its merges are exact; a top_k summary is
//     exact within its capacity and keeps count − error <= true count <=
//     count beyond it (topk.go).
//
// An Engine is not safe for concurrent use.
package windowing
