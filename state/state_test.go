package state

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"math/rand"
	"reflect"
	"sort"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/windowd/windowd/windowing"
)

func openMem(t *testing.T, fs vfs.FS) *DB {
	t.Helper()
	db, err := Open("db", Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func TestKeysReadYourWritesAndCommit(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs)
	if v, err := db.GetKey(0, "a"); err != nil || v != nil {
		t.Fatalf("absent key: %q, %v", v, err)
	}
	must(t, db.PutKey(0, "a", []byte("one")))
	must(t, db.PutKey(1, "a", []byte("other shard")))
	must(t, db.PutMeta("frontier", []byte{1, 2}))
	if v, _ := db.GetKey(0, "a"); string(v) != "one" {
		t.Fatalf("uncommitted write not visible: %q", v)
	}
	if db.PendingBytes() == 0 {
		t.Fatal("no pending bytes before commit")
	}
	must(t, db.Commit(true))
	must(t, db.PutKey(0, "b", []byte("lost")))
	must(t, db.Close()) // uncommitted "b" is discarded

	db = openMem(t, fs)
	defer db.Close()
	if v, _ := db.GetKey(0, "a"); string(v) != "one" {
		t.Fatalf("after reopen: %q", v)
	}
	if v, _ := db.GetKey(1, "a"); string(v) != "other shard" {
		t.Fatalf("shard 1 after reopen: %q", v)
	}
	if v, _ := db.GetKey(0, "b"); v != nil {
		t.Fatalf("uncommitted write survived: %q", v)
	}
	if v, _ := db.GetMeta("frontier"); !reflect.DeepEqual(v, []byte{1, 2}) {
		t.Fatalf("meta: %v", v)
	}
	must(t, db.DeleteKey(0, "a"))
	if v, _ := db.GetKey(0, "a"); v != nil {
		t.Fatalf("deleted key visible: %q", v)
	}
}

func TestTimerIndexOrder(t *testing.T) {
	db := openMem(t, vfs.NewMem())
	defer db.Close()
	ev := func(d int64, key string, start int64) windowing.Timer {
		return windowing.Timer{Kind: windowing.EventTimer, Deadline: d, Key: key, Start: start}
	}
	timers := []windowing.Timer{
		ev(10000, "b", 0), ev(-5, "a", -10), ev(10000, "a", 0), ev(math.MinInt64, "z", math.MinInt64),
		ev(math.MaxInt64, "m", 7), ev(20000, "a", 10000), ev(10000, "a", -3),
	}
	for _, tm := range timers {
		must(t, db.AddTimer(tm))
	}
	must(t, db.AddTimer(windowing.Timer{Kind: windowing.ProcTimer, Deadline: 1, Key: "p"}))
	must(t, db.Commit(false))
	must(t, db.AddTimer(ev(0, "uncommitted", 0))) // visible through the batch

	got, err := db.DueTimers(windowing.EventTimer, math.MinInt64, 10000, nil, 100, nil)
	must(t, err)
	want := []windowing.Timer{ev(math.MinInt64, "z", math.MinInt64), ev(-5, "a", -10), ev(0, "uncommitted", 0), ev(10000, "a", -3), ev(10000, "a", 0), ev(10000, "b", 0)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("due by 10000:\n got %+v\nwant %+v", got, want)
	}
	got, _ = db.DueTimers(windowing.EventTimer, math.MinInt64, 10000, nil, 2, nil)
	if len(got) != 2 {
		t.Fatalf("max not honoured: %d", len(got))
	}
	got, _ = db.DueTimers(windowing.EventTimer, math.MinInt64, math.MaxInt64, nil, 100, nil)
	if len(got) != 8 || got[7].Key != "m" {
		t.Fatalf("everything due at +inf: %+v", got)
	}
	// from and after narrow the scan.
	got, _ = db.DueTimers(windowing.EventTimer, 0, 10000, nil, 100, nil)
	if !reflect.DeepEqual(got, want[2:]) {
		t.Fatalf("from 0: %+v", got)
	}
	got, _ = db.DueTimers(windowing.EventTimer, math.MinInt64, 10000, &want[3], 100, nil)
	if !reflect.DeepEqual(got, want[4:]) {
		t.Fatalf("after %+v: %+v", want[3], got)
	}
	must(t, db.DeleteTimer(ev(math.MinInt64, "z", math.MinInt64)))
	d, ok, err := db.NextTimer(windowing.EventTimer, math.MinInt64)
	if err != nil || !ok || d != -5 {
		t.Fatalf("NextTimer = %d %v %v, want -5", d, ok, err)
	}
	d, ok, _ = db.NextTimer(windowing.ProcTimer, math.MinInt64)
	if !ok || d != 1 {
		t.Fatalf("proc NextTimer = %d %v", d, ok)
	}
	if d, ok, _ = db.NextTimer(windowing.EventTimer, 10001); !ok || d != 20000 {
		t.Fatalf("NextTimer from 10001 = %d %v, want 20000", d, ok)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestScanShardAndShards(t *testing.T) {
	db := openMem(t, vfs.NewMem())
	defer db.Close()
	must(t, db.PutKey(1, "b", []byte("1b")))
	must(t, db.PutKey(1, "a", []byte("1a")))
	must(t, db.PutKey(7, "a", []byte("7a")))
	must(t, db.PutKey(math.MaxUint32, "z", []byte("max")))
	must(t, db.Commit(false))
	must(t, db.PutKey(3, "c", []byte("3c"))) // uncommitted: visible
	must(t, db.DeleteKey(7, "a"))
	shards, err := db.Shards()
	if err != nil || !reflect.DeepEqual(shards, []uint32{1, 3, math.MaxUint32}) {
		t.Fatalf("shards %v, %v", shards, err)
	}
	var got []string
	must(t, db.ScanShard(1, func(k string, v []byte) error {
		got = append(got, k+"="+string(v))
		return nil
	}))
	if !reflect.DeepEqual(got, []string{"a=1a", "b=1b"}) {
		t.Fatalf("shard 1: %v", got)
	}
	got = nil
	must(t, db.ScanShard(math.MaxUint32, func(k string, v []byte) error {
		got = append(got, k+"="+string(v))
		return nil
	}))
	if !reflect.DeepEqual(got, []string{"z=max"}) {
		t.Fatalf("last shard: %v", got)
	}
}

func TestDiscardAndClear(t *testing.T) {
	db := openMem(t, vfs.NewMem())
	defer db.Close()
	must(t, db.PutKey(0, "a", []byte("committed")))
	must(t, db.AddTimer(windowing.Timer{Kind: windowing.EventTimer, Deadline: 5, Shard: 0, Key: "a", Start: 0}))
	must(t, db.PutMeta("offsets", []byte{7}))
	must(t, db.Commit(true))

	// Discard: the uncommitted writes vanish, the committed ones stay.
	empty := db.PendingBytes()
	must(t, db.PutKey(0, "a", []byte("uncommitted")))
	must(t, db.PutKey(0, "b", []byte("uncommitted")))
	must(t, db.Discard())
	if db.PendingBytes() != empty {
		t.Fatalf("pending bytes after Discard: %d", db.PendingBytes())
	}
	if v, _ := db.GetKey(0, "a"); string(v) != "committed" {
		t.Fatalf("a after Discard: %q", v)
	}
	if v, _ := db.GetKey(0, "b"); v != nil {
		t.Fatalf("b after Discard: %q", v)
	}

	// Clear: keys, timers and metadata are gone once committed.
	must(t, db.Clear())
	must(t, db.PutMeta("instance", []byte("kept")))
	must(t, db.Commit(true))
	if v, _ := db.GetKey(0, "a"); v != nil {
		t.Fatalf("a after Clear: %q", v)
	}
	if v, _ := db.GetMeta("offsets"); v != nil {
		t.Fatalf("meta after Clear: %q", v)
	}
	if v, _ := db.GetMeta("instance"); string(v) != "kept" {
		t.Fatalf("meta written after Clear: %q", v)
	}
	if _, ok, err := db.NextTimer(windowing.EventTimer, math.MinInt64); err != nil || ok {
		t.Fatalf("timer after Clear: %v %v", ok, err)
	}
}

// The pending timers' order (an integer prefix of the key compared first)
// is compareTimers' order, which is the order of the timers' Pebble keys:
// keys that share their first 8 bytes, differ in length or hold NUL bytes
// included.
func TestTimerOrdersAgree(t *testing.T) {
	keys := []string{"", "a", "b", "a\x00", "ab", "abcdefgh", "abcdefgh\x00", "abcdefgh1", "abcdefgh2", "abcdefgi", "\xff\xff", "u7887", "u4425", "abcdefgh\x001"}
	var timers []windowing.Timer
	for _, kind := range []windowing.TimerKind{windowing.EventTimer, windowing.ProcTimer} {
		for _, deadline := range []int64{math.MinInt64, -1, 0, 1, math.MaxInt64} {
			for _, shard := range []uint32{0, 1, math.MaxUint32} {
				for _, key := range keys {
					for _, start := range []int64{math.MinInt64, 0, 5} {
						timers = append(timers, windowing.Timer{Kind: kind, Deadline: deadline, Shard: shard, Key: key, Start: start})
					}
				}
			}
		}
	}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 200000; i++ {
		a, b := timers[rng.Intn(len(timers))], timers[rng.Intn(len(timers))]
		byKey := bytes.Compare(timerKey(nil, a), timerKey(nil, b))
		if c := compareTimers(a, b); c != byKey {
			t.Fatalf("compareTimers(%+v, %+v) = %d, Pebble key order %d", a, b, c, byKey)
		}
		if c := comparePending(pending(a), pending(b)); c != byKey {
			t.Fatalf("comparePending(%+v, %+v) = %d, Pebble key order %d", a, b, c, byKey)
		}
	}
}

// TestTimerChangesMatchModel: random timer additions and deletions, with
// commits, discards, clears and reopenings in between, against a model of
// the committed and the current timer sets. The index read by DueTimers
// (whole, in chunks after a cursor, bounded by deadline) and NextTimer must
// always be the current set in key order, and a reopened database the
// committed one: pending changes are kept in memory until Commit.
func TestTimerChangesMatchModel(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		rng := rand.New(rand.NewSource(seed))
		fs := vfs.NewMem()
		db := openMem(t, fs)
		var universe []windowing.Timer
		for _, kind := range []windowing.TimerKind{windowing.EventTimer, windowing.ProcTimer} {
			for d := int64(-3); d <= 3; d++ {
				for _, key := range []string{"a", "b", "ab", "", "a\x00", "abcdefgh1", "abcdefgh2", "abcdefgh\x001"} {
					for shard := uint32(0); shard < 2; shard++ {
						universe = append(universe, windowing.Timer{Kind: kind, Deadline: d * 1000, Shard: shard, Key: key, Start: int64(rng.Intn(3)) - 1})
					}
				}
			}
		}
		committed, current := map[windowing.Timer]bool{}, map[windowing.Timer]bool{}
		sorted := func(kind windowing.TimerKind, from, upTo int64) []windowing.Timer {
			var out []windowing.Timer
			for tm := range current {
				if tm.Kind == kind && tm.Deadline >= from && tm.Deadline <= upTo {
					out = append(out, tm)
				}
			}
			sort.Slice(out, func(i, j int) bool { return compareTimers(out[i], out[j]) < 0 })
			return out
		}
		check := func(step int) {
			t.Helper()
			for _, kind := range []windowing.TimerKind{windowing.EventTimer, windowing.ProcTimer} {
				from, upTo := int64(rng.Intn(7)-3)*1000-rng.Int63n(2), int64(rng.Intn(7)-3)*1000+rng.Int63n(2)
				want := sorted(kind, from, upTo)
				var got []windowing.Timer
				var cursor *windowing.Timer
				chunk := 1 + rng.Intn(4)
				for {
					part, err := db.DueTimers(kind, from, upTo, cursor, chunk, nil)
					must(t, err)
					got = append(got, part...)
					if len(part) < chunk {
						break
					}
					last := part[len(part)-1]
					cursor = &last
				}
				if len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
					t.Fatalf("seed %d step %d: DueTimers(%d, %d, %d) by %d:\n got  %v\n want %v", seed, step, kind, from, upTo, chunk, got, want)
				}
				all := sorted(kind, from, math.MaxInt64)
				d, ok, err := db.NextTimer(kind, from)
				must(t, err)
				if ok != (len(all) > 0) || (ok && d != all[0].Deadline) {
					t.Fatalf("seed %d step %d: NextTimer(%d, %d) = %d %v, want %v", seed, step, kind, from, d, ok, all)
				}
			}
		}
		for step := 0; step < 400; step++ {
			switch r := rng.Intn(100); {
			case r < 45:
				tm := universe[rng.Intn(len(universe))]
				if current[tm] {
					must(t, db.DeleteTimer(tm))
					delete(current, tm)
				} else {
					must(t, db.AddTimer(tm))
					current[tm] = true
				}
			case r < 80:
				// The engine deletes what it fires: mostly the earliest timers.
				if due := sorted(windowing.EventTimer, math.MinInt64, math.MaxInt64); len(due) > 0 {
					tm := due[rng.Intn(min(len(due), 3))]
					must(t, db.DeleteTimer(tm))
					delete(current, tm)
				}
			case r < 88:
				must(t, db.Commit(false))
				committed = maps.Clone(current)
			case r < 92:
				must(t, db.Discard())
				current = maps.Clone(committed)
			case r < 94:
				must(t, db.Clear())
				current = map[windowing.Timer]bool{}
			default:
				must(t, db.Commit(true))
				must(t, db.Close())
				db = openMem(t, fs)
				committed = maps.Clone(current)
			}
			check(step)
		}
		must(t, db.Close())
	}
}

// TestGetKeysMatchesGetKey: GetKeys reads, in one ordered pass, what GetKey
// reads key by key: committed, uncommitted, deleted and absent keys, and
// nothing of the neighbouring shards.
func TestGetKeysMatchesGetKey(t *testing.T) {
	db := openMem(t, vfs.NewMem())
	defer db.Close()
	must(t, db.PutKey(0, "b", []byte("shard 0")))
	must(t, db.PutKey(2, "b", []byte("shard 2")))
	for _, k := range []string{"a", "ab", "c", "d"} {
		must(t, db.PutKey(1, k, []byte("committed "+k)))
	}
	must(t, db.Commit(false))
	must(t, db.PutKey(1, "b", []byte("uncommitted b")))
	must(t, db.DeleteKey(1, "c"))
	keys := []string{"", "a", "aa", "ab", "b", "c", "d", "e"}
	var got []string
	must(t, db.GetKeys(1, keys, func(key string, value []byte) error {
		got = append(got, fmt.Sprintf("%s=%q", key, value))
		return nil
	}))
	var want []string
	for _, k := range keys {
		v, err := db.GetKey(1, k)
		must(t, err)
		want = append(want, fmt.Sprintf("%s=%q", k, v))
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("GetKeys:\n got  %v\n want %v", got, want)
	}
	if want[2] != `aa=""` || want[4] != `b="uncommitted b"` || want[5] != `c=""` {
		t.Fatalf("GetKey itself: %v", want)
	}
}
