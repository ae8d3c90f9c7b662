//go:build !cgo

package main

// cgoEnabled: without cgo Pebble's block cache and memtables are Go heap.
const cgoEnabled = false
