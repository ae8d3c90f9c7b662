//go:build !race

package sink

// raceEnabled: see race_test.go.
const raceEnabled = false
