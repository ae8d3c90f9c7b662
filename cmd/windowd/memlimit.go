package main

import (
	"os"
	"runtime/debug"

	"github.com/windowd/windowd/state"
)

// memoryLimit is the soft memory limit windowd gives the Go runtime for
// pipelines pipelines, each with its own window cache of cacheBytes and its
// own Pebble database:
//
//	pipelines × (2 × cacheBytes + heapPebble) + 192 MiB
//
// Twice each cache (live state plus what a collection leaves behind), 192
// MiB for the pending state batches, I/O buffers and the runtime, and
// heapPebble, what Pebble allocates on the Go heap: nothing in a cgo build
// (the default: Pebble's block cache and memtables are C memory, outside any
// Go limit, and come on top of it), its block cache and memtables
// (state.PebbleMemoryBytes) in a build without cgo.
func memoryLimit(pipelines int, cacheBytes int64) int64 {
	perPipeline := 2 * cacheBytes
	if !cgoEnabled {
		perPipeline += state.PebbleMemoryBytes
	}
	return int64(max(pipelines, 1))*perPipeline + 192<<20
}

// setMemoryLimit gives the Go runtime the soft memory limit of memoryLimit
// for the pipelines that run (every configured pipeline in `run`, one in
// `replay`), unless GOMEMLIMIT is set. Without a limit the runtime keeps
// freed heap (the large batch buffers of each checkpoint) long enough for
// RSS to grow with the number of windows; with it, it collects and returns
// memory as RSS approaches the limit. Returns the limit in bytes, or -1
// when GOMEMLIMIT decides.
func setMemoryLimit(pipelines int, cacheBytes int64) int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return -1
	}
	limit := memoryLimit(pipelines, cacheBytes)
	debug.SetMemoryLimit(limit)
	return limit
}

// gcPercent is the GOGC windowd runs with unless GOGC is set: a collection
// when the heap has grown by twice what the last one left live, not once.
// A drain allocates mostly short-lived garbage (fetched record batches,
// pane records), so the number of collections, and the marking and write
// barriers they cost, fall (a drain of 2M records: 15, not 21); peak
// memory stays bounded by the soft limit above, and the client fetches at
// most kafka.FetchPartitionBytes per partition, which gives back about as
// much as the larger heap takes (docs/PERFORMANCE.md, Tuning knobs).
const gcPercent = 200

// setGCPercent sets the garbage collector's target percentage to gcPercent
// unless GOGC is set. Returns the percentage set, or -1 when GOGC decides.
func setGCPercent() int {
	if os.Getenv("GOGC") != "" {
		return -1
	}
	debug.SetGCPercent(gcPercent)
	return gcPercent
}
