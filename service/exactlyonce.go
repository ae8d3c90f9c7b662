package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/kafka"
	"github.com/windowd/windowd/windowing"
)

// exactly_once (docs/SEMANTICS.md, Delivery). Each commit cycle is one Kafka
// transaction of the pipeline's producer, bound to its consumer group
// (franz-go's GroupTransactSession): the cycle's panes, dead letters, late
// records and changelog records, and the input offsets of the assigned
// partitions, commit together or not at all. Local Pebble is a cache of the
// committed transactions:
//
//   - It is checkpointed only after its transaction committed, so it is
//     never ahead of what Kafka holds.
//   - A transaction that aborts (the group took partitions away while it
//     was open) rolls the pipeline back to the last checkpoint: the
//     uncommitted Pebble batch is discarded, the engine is rebuilt from
//     Pebble, and the consumer rewinds to the checkpoint's positions.
//   - A start after an unclean stop clears local state (keeping only the
//     instance id), so every partition restores from the changelog, read
//     read_committed. A clean shutdown marks its final checkpoint clean and
//     the next start keeps it.
//   - Fencing: the transactional id is stable per state directory, so a
//     restarted instance fences its previous incarnation's open
//     transaction at once; every transaction commits offsets with the
//     group generation, so a member the group has moved on from (a paused
//     zombie) cannot commit.

const (
	metaInstance = "instance" // random id of this state directory: the transactional id's suffix
	metaClean    = "clean"    // 1 when the last stop was clean (exactly_once)

	// txnTimeout is how long the broker lets a transaction stay open
	// before aborting it (Kafka Streams' exactly_once default). It bounds
	// how long read_committed consumers wait behind an instance that died
	// with a transaction open, when no restart of it fences the
	// transaction sooner.
	txnTimeout = config.TransactionTimeout * time.Millisecond
	// producerIDWaitLog spaces the warnings of an assignment waiting
	// for its producer id (rebalance.go).
	producerIDWaitLog = 10 * time.Second
)

// openExactlyOnce prepares local state for exactly_once (before the engine
// opens it) and returns the transactional id: state left by an unclean
// stop is cleared, and the state is marked unclean until a clean shutdown.
func (p *pipeline) openExactlyOnce() (string, error) {
	inst, err := p.db.GetMeta(metaInstance)
	if err != nil {
		return "", err
	}
	inst = append([]byte(nil), inst...) // the store reuses its read buffer
	if len(inst) == 0 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		inst = []byte(hex.EncodeToString(b[:]))
	}
	clean, err := p.db.GetMeta(metaClean)
	if err != nil {
		return "", err
	}
	if len(clean) != 1 || clean[0] != 1 {
		had, err := p.db.GetMeta(metaOffsets)
		if err != nil {
			return "", err
		}
		if had != nil {
			p.log.Warn("last stop was not clean: local state discarded under exactly_once; assigned partitions restore from the changelog")
		}
		if err := p.db.Clear(); err != nil {
			return "", err
		}
	}
	if err := p.db.PutMeta(metaInstance, inst); err != nil {
		return "", err
	}
	if err := p.db.PutMeta(metaClean, []byte{0}); err != nil {
		return "", err
	}
	if err := p.db.Commit(true); err != nil {
		return "", err
	}
	return "windowd-" + p.cfg.Input.Group + "-" + p.cfg.Name + "-" + string(inst), nil
}

// markCleanLocked records a clean stop in the final checkpoint (last
// transaction ended).
func (p *pipeline) markCleanLocked() error {
	if err := p.db.PutMeta(metaClean, []byte{1}); err != nil {
		return err
	}
	p.sealQueryLocked()
	return p.mu.eng.Checkpoint(true)
}

// commitTxnLocked is the exactly_once commit cycle: log the changed
// keys and markers, end the transaction with the input offsets, and only
// when it committed checkpoint Pebble. A transaction the group aborted
// rolls back and returns errRolledBack.
//
// While the group has taken partitions away and this member has not yet
// settled what it owns (settleAssignment), nothing commits: the cycle is
// skipped, or, when mustEnd, the transaction aborts and rolls back.
func (p *pipeline) commitTxnLocked(ctx context.Context, mustEnd bool) error {
	// A transaction's end must not be cut off (franz-go: a canceled End
	// leaves the client in an unknown state); shutdown's grace bounds it.
	ctx = context.WithoutCancel(ctx)
	p.applyReleasedLocked()
	if p.mu.abortNext || (p.unsettled() && mustEnd) {
		p.mu.abortNext = false
		return p.abortLocked(ctx, "the group took partitions away")
	}
	if p.unsettled() {
		return nil // commits wait for settleAssignment
	}
	start := p.now()
	p.cycleStartedLocked(start)
	if err := p.mu.eng.Flush(); err != nil {
		return fatalError{fmt.Errorf("state flush: %w", err)}
	}
	known := positions(p.mu.parts)
	if len(known) == 0 && !p.mu.txnRecords && len(p.mu.store.dirty) == 0 && !p.revokedSinceEnd() {
		// Nothing to commit (no partition has a position yet): ending
		// an empty transaction costs franz-go a 500ms pause (it cannot
		// tell whether the broker has KIP-447 without an offset commit).
		// Not after a revoke or loss: the session would abort the next
		// end, which must be this one (it rolls back and drops what
		// was taken), not one after a restore.
		return p.checkpointTxnLocked(start, nil)
	}
	// In the transaction, after its panes (docs/SEMANTICS.md, Progress
	// records).
	p.writeProgressLocked(ctx, p.closing.Load())
	acks := p.writeChangelogLocked()
	ferr := p.prod.Flush(ctx)
	if cerr := acks.Err(); ferr != nil || cerr != nil {
		perr := errors.Join(ferr, cerr)
		_, aerr := p.txn.End(ctx, kgo.TryAbort)
		if kafka.IsFenced(perr) {
			// The broker timed the transaction out (an outage or a
			// pause longer than the transaction timeout) and bumped
			// the producer's epoch: a zombie, not a refused output.
			return fatalError{fmt.Errorf("transactional producer fenced while producing: %w: %w", errFenced, errors.Join(perr, aerr))}
		}
		return fatalError{errors.Join(fmt.Errorf("output not acknowledged; transaction aborted: %w", perr), aerr)}
	}
	tctx := kgo.PreTxnCommitFnContext(ctx, func(req *kmsg.TxnOffsetCommitRequest) error {
		kafka.SetTxnOffsets(req, p.mu.inputIDs, p.in.offsetsToKafka(known))
		return nil
	})
	if p.abortTxn != nil && p.abortTxn() {
		return p.abortLocked(ctx, "a test injected the abort (Faults.AbortTxn)")
	}
	revokedBefore := p.revokedSinceEnd() // franz-go aborts this end for it
	p.markEnd()
	var committed bool
	var err error
	if p.endTxnErr != nil {
		err = p.endTxnErr()
	}
	if err == nil {
		committed, err = p.txn.End(tctx, kgo.TryCommit)
	}
	if err != nil {
		return endFailed(err)
	}
	if !committed {
		return p.abortedLocked(notCommittedWhy(revokedBefore || p.revokedSinceEnd()))
	}
	if err := p.txn.Begin(); err != nil {
		return fatalError{fmt.Errorf("beginning a transaction: %w", err)}
	}
	p.m.transactions.WithLabelValues(p.cfg.Name, "committed").Inc()
	if p.mu.rp != nil {
		p.purgeRepartitionLocked(ctx)
	}
	return p.checkpointTxnLocked(start, acks)
}

// endFailed is the error of a transaction end that failed with err: all
// are fatal, and say whether the producer was fenced (the pipeline
// rebuilds) or the outcome is unknown (it rejoins; errors.go).
func endFailed(err error) error {
	var refused *kerr.Error
	switch {
	case errors.Is(err, kerr.InvalidTxnState):
		// A pause or an outage met before the epoch was fenced: the
		// coordinator is still aborting the timed-out transaction
		// (PrepareAbort) and refuses its commit.
		return fatalError{fmt.Errorf("transaction aborted by the broker (it timed out while this instance was paused or the broker was unreachable): %w: %w", errFenced, err)}
	case kafka.IsFenced(err):
		return fatalError{fmt.Errorf("transactional producer fenced (its transaction timed out while this instance was paused or the broker was unreachable, or another instance uses its transactional id): %w: %w", errFenced, err)}
	case !errors.As(err, &refused):
		// No answer (the broker is unreachable): whether the transaction
		// committed is unknown. Rejoining settles it (errors.go).
		return fatalError{fmt.Errorf("ending the transaction got no answer, its outcome is unknown: %w: %w", errRejoin, err)}
	}
	return fatalError{fmt.Errorf("ending the transaction: %w", err)}
}

// checkpointTxnLocked writes the checkpoint of a committed transaction (acks
// nil: nothing was produced).
func (p *pipeline) checkpointTxnLocked(start time.Time, acks *kafka.Batch) error {
	p.mu.txnRecords = false
	p.countCommittedDuplicatesLocked()
	if err := p.checkpointLocked(acks); err != nil {
		return err
	}
	p.cycleDone(start)
	return nil
}

// notCommittedWhy says why franz-go ended a transaction that was to commit
// with an abort: the group took partitions away since the last end or
// during this one (revoked), or else the group coordinator refused or did not answer the offset
// commit or the heartbeat that must precede the commit (a coordinator
// moving to another broker, a rebalance beginning). franz-go's own log
// line ("transaction session ending", with --log-level debug) has the
// request and its error.
func notCommittedWhy(revoked bool) string {
	if revoked {
		return "the group revoked or lost partitions during the transaction"
	}
	return "the group coordinator refused or did not answer the transaction's offset commit or heartbeat (a coordinator moving, a rebalance beginning; --log-level debug logs franz-go's reason)"
}

// abortLocked ends the open transaction without committing it and rolls back
// (aborted); why says what made it abort.
func (p *pipeline) abortLocked(ctx context.Context, why string) error {
	p.markEnd()
	if _, err := p.txn.End(ctx, kgo.TryAbort); err != nil {
		return fatalError{fmt.Errorf("aborting the transaction: %w", err)}
	}
	return p.abortedLocked(why)
}

// abortedLocked follows a transaction that ended without committing: the next
// one begins and the pipeline rolls back to the last committed one.
func (p *pipeline) abortedLocked(why string) error {
	p.mu.txnRecords = false
	if err := p.txn.Begin(); err != nil {
		return fatalError{fmt.Errorf("beginning a transaction: %w", err)}
	}
	p.m.transactions.WithLabelValues(p.cfg.Name, "aborted").Inc()
	p.log.Warn("transaction aborted; state rolled back to the last committed transaction", zap.String("why", why))
	p.applyReleasedLocked()
	if err := p.rollbackLocked(); err != nil {
		return fatalError{fmt.Errorf("rolling back: %w", err)}
	}
	return errRolledBack
}

// rollbackLocked returns the pipeline to its last checkpoint, which is the last
// committed transaction: the uncommitted state batch is
// discarded, the engine and the offsets are reloaded, partitions no longer
// assigned are dropped, and the consumer rewinds each assigned partition
// to the checkpoint's position (or to the first record it delivered, when
// no position was ever committed). A partition with neither is left where
// the session's abort put it: franz-go resets every partition it delivered
// records of to its committed offset, which is where its first delivery
// began when nothing committed yet.
func (p *pipeline) rollbackLocked() error {
	p.hideQuery()
	if err := p.db.Discard(); err != nil {
		return err
	}
	p.mu.store.forget()
	p.mu.loggedWrites = p.mu.store.writes
	p.mu.txnDuplicates = 0 // processed again after the rewind
	p.off.Lock()
	p.off.stored = map[int32]int64{}
	p.off.Unlock()
	p.mu.clNext = map[int32]int64{}
	if err := p.loadMetaLocked(); err != nil {
		return err
	}
	if !p.eos {
		// At least once, a rollback follows a loss of partitions
		// (handOver), whose restores were cancelled; the batches the
		// standbys applied since the checkpoint are discarded with the
		// rest, so they read again from what local state holds.
		// (exactly_once checkpoints restored batches at once,
		// applyRestoresLocked: none is ever discarded.)
		p.restartReadersLocked()
	}
	eng, err := p.newEngineLocked()
	if err == nil {
		err = p.readoptDefinitionLocked(eng)
	}
	if err != nil {
		return err
	}
	p.countEngineStatsLocked() // the discarded engine's
	p.mu.eng, p.mu.counted = eng, windowing.Stats{}
	p.mu.gated = map[int32]int64{}
	p.holdRestoringLocked()
	p.keepLostLocked()
	inCheckpoint := map[int32]bool{}
	for part := range p.mu.clNext {
		inCheckpoint[part] = true
	}
	p.off.Lock()
	for part := range p.off.stored {
		inCheckpoint[part] = true
	}
	p.off.Unlock()
	for part := range inCheckpoint {
		if p.rollbackDropsLocked(part) {
			if err := p.dropPartitionLocked(part); err != nil {
				return err
			}
		}
	}
	rewind := map[int32]int64{}
	now := p.nowMS()
	for part, st := range p.mu.parts {
		p.off.Lock()
		off, ok := p.off.stored[part]
		p.off.Unlock()
		switch {
		case ok:
			st.position = off
		case st.first >= 0:
			st.position, off = -1, st.first
		default:
			st.position = -1
			off = -1
		}
		st.marked, st.first = st.position, -1
		if off >= 0 {
			rewind[part] = off
		}
		p.mu.eng.Assign(part, now, false)
		p.gateIfBehindLocked(part)
	}
	p.cl.SetOffsets(p.in.epochOffsets(rewind))
	return nil
}
