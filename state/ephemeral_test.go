package state

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// syncCountingFS counts the syncs that reach its files and directories.
type syncCountingFS struct {
	vfs.FS
	syncs *atomic.Int64
}

func (fs syncCountingFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.count(fs.FS.Create(name, c))
}

func (fs syncCountingFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.count(fs.FS.OpenReadWrite(name, c, opts...))
}

func (fs syncCountingFS) OpenDir(name string) (vfs.File, error) {
	return fs.count(fs.FS.OpenDir(name))
}

func (fs syncCountingFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.count(fs.FS.ReuseForWrite(oldname, newname, c))
}

func (fs syncCountingFS) count(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return syncCountingFile{f, fs.syncs}, nil
}

type syncCountingFile struct {
	vfs.File
	syncs *atomic.Int64
}

func (f syncCountingFile) Sync() error     { f.syncs.Add(1); return f.File.Sync() }
func (f syncCountingFile) SyncData() error { f.syncs.Add(1); return f.File.SyncData() }
func (f syncCountingFile) SyncTo(n int64) (bool, error) {
	f.syncs.Add(1)
	return f.File.SyncTo(n)
}

// An ephemeral database reads its writes, committed or not, through
// commits and memtable flushes, as any other; it keeps no write-ahead log
// (its log file stays empty but for a header) and no sync reaches the file
// system. The same work on a durable database syncs and writes a log (the
// counter and the check can fail).
func TestEphemeralSyncsNothing(t *testing.T) {
	for _, ephemeral := range []bool{false, true} {
		t.Run(fmt.Sprintf("ephemeral=%v", ephemeral), func(t *testing.T) {
			var syncs atomic.Int64
			fs := syncCountingFS{vfs.NewMem(), &syncs}
			db, err := Open("db", Options{FS: fs, Ephemeral: ephemeral})
			if err != nil {
				t.Fatal(err)
			}
			value := []byte(strings.Repeat("v", 100))
			for i := 0; i < 2000; i++ {
				must(t, db.PutKey(uint32(i%4), fmt.Sprintf("k%05d", i), value))
				if i%500 == 499 {
					must(t, db.Commit(true))
				}
			}
			must(t, db.db.Flush()) // an sstable, as a large replay spills
			must(t, db.PutKey(0, "after", []byte("pending")))
			for _, i := range []int{0, 1, 1000, 1999} {
				k := fmt.Sprintf("k%05d", i)
				if v, err := db.GetKey(uint32(i%4), k); err != nil || string(v) != string(value) {
					t.Fatalf("%s: %q, %v", k, v, err)
				}
			}
			if v, _ := db.GetKey(0, "after"); string(v) != "pending" {
				t.Fatalf("uncommitted write not visible: %q", v)
			}
			must(t, db.Close())
			names, err := fs.List("db")
			if err != nil {
				t.Fatal(err)
			}
			var logBytes int64 // in write-ahead log files
			for _, n := range names {
				if strings.HasSuffix(n, ".log") {
					st, err := fs.Stat(fs.PathJoin("db", n))
					if err != nil {
						t.Fatal(err)
					}
					logBytes += st.Size()
				}
			}
			// 2000 values of 100 bytes: a log that holds them has 200 kB;
			// an unused one, a header.
			if ephemeral && (syncs.Load() != 0 || logBytes >= 1<<10) {
				t.Fatalf("ephemeral: %d syncs, %d bytes of log (%v)", syncs.Load(), logBytes, names)
			}
			if !ephemeral && (syncs.Load() == 0 || logBytes < 200_000) {
				t.Fatalf("durable: %d syncs, %d bytes of log (%v): the check would not see them", syncs.Load(), logBytes, names)
			}
		})
	}
}
