package state

import "github.com/cockroachdb/pebble/v2/vfs"

// noSyncFS is a file system whose files and directories are never synced:
// the file system of an ephemeral database (Options.Ephemeral), which is
// thrown away after use, so that no write waits for the disk.
type noSyncFS struct{ vfs.FS }

func (fs noSyncFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	return noSync(fs.FS.Create(name, category))
}

func (fs noSyncFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return noSync(fs.FS.OpenReadWrite(name, category, opts...))
}

func (fs noSyncFS) OpenDir(name string) (vfs.File, error) {
	return noSync(fs.FS.OpenDir(name))
}

func (fs noSyncFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	return noSync(fs.FS.ReuseForWrite(oldname, newname, category))
}

func noSync(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

// noSyncFile is a file of noSyncFS: its syncs return at once.
type noSyncFile struct{ vfs.File }

func (noSyncFile) Sync() error                             { return nil }
func (noSyncFile) SyncData() error                         { return nil }
func (noSyncFile) SyncTo(int64) (fullSync bool, err error) { return true, nil }
