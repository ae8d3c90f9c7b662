package service

import (
	"context"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Faults reach rare paths on purpose. Nothing in the service reads them
// from the environment: only a caller sets them, the tests directly and
// the windowd binary built with the windowd_faults tag (cmd/windowd,
// faults_on.go) from WINDOWD_FAULT_* variables. A production build cannot
// be made to fail by its environment.

// Faults are what a test injects into every pipeline to reach paths that
// rebalances, crashes and full disks reach only by chance.
type Faults struct {
	// AbortTxn, when set, is asked before each exactly_once transaction
	// that would commit; true aborts it instead, as a rebalance that took
	// partitions away does, and the pipeline rolls back.
	AbortTxn func() bool
	// EndTxn, when set, is asked before each exactly_once transaction
	// end that would commit; a non-nil error is taken as the end's result
	// instead of ending it, as when the broker does not answer.
	EndTxn func() error
	// MaxPendingBytes, when positive, replaces the engine's bound on
	// uncommitted state writes (windowing.Options.MaxPendingBytes): with a
	// small cache, commit cycles then run in the middle of a poll.
	MaxPendingBytes int
	// ExitAfterChangelog, when positive, makes the process exit with
	// status FaultExitCode in the N-th commit cycle that logs key changes,
	// once its key records are acknowledged and before its markers, local
	// state and input offsets are written: a crash in the middle of a
	// cycle.
	ExitAfterChangelog int
	// RestoreStarts, when set, is called by each partition's restore
	// before it reads the changelog; a restore waits while it blocks
	// (until ctx ends: the restore was cancelled).
	RestoreStarts func(ctx context.Context, partition int32)
	// RestoreStall, when positive, replaces how long a restore reads
	// nothing before it asks the broker which transaction holds it
	// (restoreStallAfter, restorewatch.go).
	RestoreStall time.Duration
	// FS, when set, is the file system of every pipeline's local state
	// (state.Options.FS): tests wrap the disk in Pebble's errorfs.
	FS vfs.FS
}

// FaultExitCode is the exit status of Faults.ExitAfterChangelog.
const FaultExitCode = 86
