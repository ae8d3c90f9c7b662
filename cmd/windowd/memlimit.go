package main

import (
	"os"
	"runtime/debug"
)

// setMemoryLimit gives the Go runtime a soft memory limit derived from the
// window cache budget, unless GOMEMLIMIT is set: twice the cache (live state
// plus what a collection leaves behind) plus 192 MiB for the pending state
// batch, I/O buffers and the runtime. Without a limit the runtime keeps
// freed heap (the large batch buffers of each checkpoint) long enough for
// RSS to grow with the number of windows; with it, it collects and returns
// memory as RSS approaches the limit. Pebble's memtables and block cache
// (about 64 MiB) come on top. Returns the limit in bytes, or -1 when
// GOMEMLIMIT decides.
func setMemoryLimit(cacheBytes int64) int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return -1
	}
	limit := 2*cacheBytes + 192<<20
	debug.SetMemoryLimit(limit)
	return limit
}
