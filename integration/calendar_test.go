package integration

import (
	"fmt"
	"math/rand"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// TestCalendarRestoreFromChangelog: day windows in Europe/Rome over the
// 2026 DST end (25 October is 25 hours), allowed_lateness 0s. Instance A
// windows the first half of the stream, commits and is killed (kill -9);
// its state dir is deleted, so B restores the open calendar windows from
// the changelog and windows the rest. The output holds every pane replay
// computes for the same records (each with its local bounds), nothing is
// dropped as late, and B restored from the changelog.
func TestCalendarRestoreFromChangelog(t *testing.T) {
	parallel(t, 20*time.Second)
	killAndRestore(t, "{type: calendar, unit: day, time_zone: Europe/Rome}", func(w gjson.Result) bool {
		return w.Get("end").Int()-w.Get("start").Int() == 25*3600_000 && w.Get("local_start").Str == "2026-10-25T00:00:00+02:00"
	})
}

// TestCumulateRestoreFromChangelog: cumulating windows of a local day in
// Europe/Rome, every 3 hours (sliced: the steps are in the state and the
// changelog), over the 2026 DST end, as TestCalendarRestoreFromChangelog:
// kill -9, state dir deleted, restore from the changelog; every pane
// replay computes, nothing late.
func TestCumulateRestoreFromChangelog(t *testing.T) {
	parallel(t, 20*time.Second)
	killAndRestore(t, "{type: cumulate, unit: day, step: 3h, time_zone: Europe/Rome}", func(w gjson.Result) bool {
		// 25 October's first window, to where the clock first reads
		// 03:00, holds the repeated hour: four hours.
		return w.Get("end").Int()-w.Get("start").Int() == 4*3600_000 && w.Get("local_start").Str == "2026-10-25T00:00:00+02:00"
	})
}

// TestSlidingRestoreFromChangelog: sliding windows of 2 hours, as
// TestCalendarRestoreFromChangelog: kill -9, state dir deleted, restore
// from the changelog. A window of a record after the restore holds the
// key's records from before the kill, which B has only from the
// changelog; every pane replay computes, nothing late.
func TestSlidingRestoreFromChangelog(t *testing.T) {
	parallel(t, 20*time.Second)
	killAndRestore(t, "{type: sliding, size: 2h}", func(w gjson.Result) bool {
		return w.Get("end").Int()-w.Get("start").Int() == 2*3600_000
	})
}

// killAndRestore runs the pipeline with window (allowed_lateness 0s) over
// records every 10 minutes of event time from 23 to 27 October 2026:
// instance A takes the first half, commits and is killed (kill -9), its
// state dir is deleted, and B restores from the changelog and takes the
// rest. The output must hold every pane replay computes, one of which
// special must accept (the window the test is about), with nothing
// dropped as late and B having restored from the changelog.
func killAndRestore(t *testing.T, window string, special func(window gjson.Result) bool) {
	t.Helper()
	e := newEnv(t, 2, "")
	e.editConfig(map[string]string{
		"    window: {type: tumbling, size: 10s}\n": "    window: " + window + "\n",
		"    allowed_lateness: 30s\n":               "    allowed_lateness: 0s\n",
		"      late: {every: 0s}\n":                 "",
	})

	// Per partition, records every 10 minutes of event time from 23 to 27
	// October (in order but for up to 1.5 s, within max_delay 2s: none is
	// late whatever the interleaving), 4 keys per partition.
	rng := rand.New(rand.NewSource(11))
	from := time.Date(2026, 10, 23, 0, 0, 0, 0, time.UTC).UnixMilli()
	var halves [2][]input
	const perPartition = 4 * 24 * 6
	for p := int32(0); p < e.partitions; p++ {
		for i := 0; i < perPartition; i++ {
			u := fmt.Sprintf("u%d-%d", p, rng.Intn(4))
			ts := from + int64(i)*600_000 - int64(rng.Intn(1500))
			halves[i*2/perPartition] = append(halves[i*2/perPartition], input{partition: p, key: u, value: fmt.Sprintf(`{"user":%q,"ts":%d,"x":%d}`, u, ts, rng.Intn(100))})
		}
	}
	flushAt := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	var flush []input
	for p := int32(0); p < e.partitions; p++ {
		k := fmt.Sprintf("flush-%d", p)
		flush = append(flush, input{partition: p, key: k, value: fmt.Sprintf(`{"user":%q,"ts":%d,"x":0}`, k, flushAt)})
	}
	all := append(append(append([]input(nil), halves[0]...), halves[1]...), flush...)
	out, errs := runReplay(t, &e.cfg.Pipelines[0], all, int(e.partitions))
	if len(errs) > 0 {
		t.Fatalf("replay reported errors (the stream has no late or bad record): %v", errs[:min(len(errs), 5)])
	}
	var want []string
	found := false
	for _, p := range out {
		if strings.HasPrefix(gjson.Get(p, "key").Str, "flush") {
			continue
		}
		want = append(want, p)
		found = found || special(gjson.Get(p, "window"))
	}
	if finalCount(want) < 8*4 || !found {
		t.Fatalf("test stream too small: %d final panes, the window the test is about among them: %v", finalCount(want), found)
	}

	a := e.startProcess()
	produce(t, e.in, halves[0])
	a.waitRecordsIn(t, len(halves[0]))
	e.waitCommitted(t, 60*time.Second)
	_ = a.signal(t, syscall.SIGKILL)
	removeStateDir(t, e.stateDir)
	e.waitGroupEmpty(t, 30*time.Second)

	b := e.startProcess()
	produce(t, e.in, append(append([]input(nil), halves[1]...), flush...))
	e.waitCommitted(t, 60*time.Second)
	checkAgainstReplay(t, e, want)
	if v, _ := b.metric(t, "windowd_restore_records_total"); v == 0 {
		t.Fatal("B restored no changelog record: the test did not exercise the restore")
	}
	e.expectNothingLate(b)
	if err := b.stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, b.stderr.String())
	}
}
