//go:build race

package evolve_test

// raceEnabled: the race detector slows the engine about tenfold; the
// property test runs fewer seeds under it (what it checks is unchanged).
const raceEnabled = true
