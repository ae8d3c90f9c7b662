//go:build windowd_faults

package main

import (
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/windowd/windowd/service"
)

// faultsBuild reports whether this binary honours the fault variables.
const faultsBuild = true

// injectedFaults reads the fault points of the integration tests from the
// environment. Only a binary built with -tags windowd_faults has them;
// the fault-free build (faults_off.go) ignores these variables.
//
//   - WINDOWD_FAULT_EXIT_AFTER_CHANGELOG=N: exit with status 86 in the
//     N-th commit cycle that logs key changes, between the changelog's key
//     records and its markers (service.Faults.ExitAfterChangelog).
//   - WINDOWD_FAULT_DISK_FULL=PATH: while the file PATH exists, every
//     write of local state fails with ENOSPC, as on a full disk (Pebble's
//     errorfs through service.Faults.FS).
func injectedFaults() (service.Faults, error) {
	var f service.Faults
	if v := os.Getenv("WINDOWD_FAULT_EXIT_AFTER_CHANGELOG"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return f, fmt.Errorf("WINDOWD_FAULT_EXIT_AFTER_CHANGELOG=%q: want a positive count", v)
		}
		f.ExitAfterChangelog = n
	}
	if trigger := os.Getenv("WINDOWD_FAULT_DISK_FULL"); trigger != "" {
		f.FS = errorfs.Wrap(vfs.Default, diskFull(trigger))
	}
	return f, nil
}

// diskFull fails every write while the file trigger exists.
func diskFull(trigger string) errorfs.Injector {
	return errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
			return nil
		}
		if _, err := os.Stat(trigger); err != nil {
			return nil
		}
		return &fs.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
	})
}
