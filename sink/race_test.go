//go:build race

package sink

// raceEnabled: under the race detector sync.Pool drops some of what it is
// given, so pooled records are not always reused.
const raceEnabled = true
