package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestZoneDatabaseBuiltIn: the binary carries Go's time zone database
// (time/tzdata), so calendar windows' zones resolve on a machine without
// system zoneinfo (docs/SEMANTICS.md, Calendar windows). The runtime
// prefers the system database, so the test checks the link, not a lookup.
func TestZoneDatabaseBuiltIn(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "time/tzdata" {
			return
		}
	}
	t.Fatal("windowd does not link time/tzdata: zones would not resolve without system zoneinfo")
}
