//go:build cgo

package main

// cgoEnabled: Pebble allocates its block cache and memtables in C memory.
const cgoEnabled = true
