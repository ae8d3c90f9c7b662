//go:build race

package integration

// raceEnabled: the race detector slows windowd about tenfold; the crash
// loops run fewer cycles under it (what they check is unchanged).
const raceEnabled = true
