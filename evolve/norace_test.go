//go:build !race

package evolve_test

// raceEnabled: see race_test.go.
const raceEnabled = false
