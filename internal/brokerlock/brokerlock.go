// Package brokerlock lets the test binaries of several packages, which
// `go test ./...` runs at the same time, share the one real Kafka broker
// of WINDOWD_KAFKA_BROKERS with the tests that stop it (integration's
// broker outage): a test that needs the broker up holds the lock shared,
// a test that stops it holds it exclusive, so no test sees the broker
// stopped by another package's test. It is a file lock (flock) in the
// temporary directory, named for the broker address; it goes with the
// process that holds it.
package brokerlock

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Hold takes the lock of the broker at brokers, shared or exclusive, until
// t ends; it blocks while another process holds it the other way.
func Hold(t testing.TB, brokers string, exclusive bool) {
	t.Helper()
	name := "windowd-broker-" + strings.NewReplacer(":", "_", ",", "_", "/", "_").Replace(brokers) + ".lock"
	f, err := os.OpenFile(filepath.Join(os.TempDir(), name), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("broker lock: %v", err)
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		t.Fatalf("broker lock: %v", err)
	}
	t.Cleanup(func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	})
}
