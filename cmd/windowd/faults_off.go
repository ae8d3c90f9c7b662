//go:build !windowd_faults

package main

import "github.com/windowd/windowd/service"

// faultsBuild reports whether this binary honours the fault variables.
const faultsBuild = false

// injectedFaults is empty in a production build: no environment variable
// can make it fail on purpose (faults_on.go has the test build's).
func injectedFaults() (service.Faults, error) { return service.Faults{}, nil }
