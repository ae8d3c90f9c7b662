package integration

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/windowd/windowd/service"
)

// TestRestoreInBackground: a partition restoring from the changelog does not
// stop the instance's other partitions (docs/OPERATIONS.md, Restore), and
// holds the frontier until it has joined. Instance A windows the first half
// of a two-partition stream and stops; its state dir is deleted, so B
// restores both partitions from the changelog. Partition 1's restore is held
// back (Faults.RestoreStarts) while the second half arrives: partition 0's
// records are processed (early panes written, offsets committed) and
// /readyz says what restores, but no window closes. Once the restore runs,
// the output holds every pane replay computes, and nothing is late with
// allowed_lateness 0s.
func TestRestoreInBackground(t *testing.T) {
	restoreInBackground(t, "", restoreCase{partitions: 2, held: []int32{1}, runs: 0})
}

// TestRestoreInBackgroundExactlyOnce is TestRestoreInBackground under
// exactly_once (restored batches are checkpointed between transactions).
func TestRestoreInBackgroundExactlyOnce(t *testing.T) {
	restoreInBackground(t, "exactly_once", restoreCase{partitions: 2, held: []int32{1}, runs: 0})
}

// TestRestoreNothingToReadJoinsAtOnce: a partition whose changelog holds
// nothing to read does not wait for a restore slot. Partitions 0 and 1
// have state and their restores are held, taking both slots; partition 2
// had no record before, so its records are processed meanwhile. (Waiting
// for a slot, a partition with nothing to restore started after the
// others, and a backfill's partitions ran apart before watermark
// alignment could act.)
func TestRestoreNothingToReadJoinsAtOnce(t *testing.T) {
	restoreInBackground(t, "", restoreCase{partitions: 3, held: []int32{0, 1}, runs: 2, fresh: true})
}

// restoreCase is a run of restoreInBackground: B holds the restores of
// held while partition runs is processed; with fresh, partition runs has
// no record in the first half (its changelog is empty).
type restoreCase struct {
	partitions int32
	held       []int32
	runs       int32
	fresh      bool
}

func restoreInBackground(t *testing.T, delivery string, c restoreCase) {
	parallel(t, 25*time.Second)
	e := newEnv(t, c.partitions, "")
	e.zeroLateness(delivery)

	// Per partition, 8 keys, a record every 250 ms of event time for 60 s
	// (in order but for up to 1.5 s, within max_delay 2s), then a record
	// far ahead that closes every window.
	rng := rand.New(rand.NewSource(29))
	const perPartition = 240
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	var halves [2][]input
	secondOf := map[int32]int{}
	for p := int32(0); p < e.partitions; p++ {
		for i := 0; i < perPartition; i++ {
			u := fmt.Sprintf("u%d-%d", p, rng.Intn(8))
			ts := base + int64(i)*250 - int64(rng.Intn(1500))
			h := i * 2 / perPartition
			if c.fresh && p == c.runs {
				h = 1
			}
			halves[h] = append(halves[h], input{partition: p, key: u, value: fmt.Sprintf(`{"user":%q,"ts":%d,"x":%d}`, u, ts, rng.Intn(100))})
			if h == 1 {
				secondOf[p]++
			}
		}
	}
	var flush []input
	for p := int32(0); p < e.partitions; p++ {
		k := fmt.Sprintf("flush-%d", p)
		flush = append(flush, input{partition: p, key: k, value: fmt.Sprintf(`{"user":%q,"ts":%d,"x":0}`, k, base+3_600_000)})
	}
	all := append(append(append([]input(nil), halves[0]...), halves[1]...), flush...)
	out, errs := runReplay(t, &e.cfg.Pipelines[0], all, int(e.partitions))
	if len(errs) > 0 {
		t.Fatalf("replay reported errors (the stream has no late or bad record): %v", errs[:min(len(errs), 5)])
	}
	var want []string
	for _, p := range out {
		if !strings.HasPrefix(gjson.Get(p, "key").Str, "flush") {
			want = append(want, p)
		}
	}
	if finalCount(want) < 2*8*5 {
		t.Fatalf("test stream too small: %d final panes", finalCount(want))
	}

	a := e.startInProcess()
	produce(t, e.in, halves[0])
	a.waitRecordsIn(t, len(halves[0]))
	e.waitCommitted(t, 60*time.Second)
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	removeStateDir(t, e.stateDir)

	gate := make(chan struct{})
	b := e.startInProcessWith(service.Faults{RestoreStarts: func(ctx context.Context, part int32) {
		if slices.Contains(c.held, part) {
			select {
			case <-gate:
			case <-ctx.Done():
			}
		}
	}})
	produce(t, e.in, halves[1])
	waitFor(t, fmt.Sprintf("partition %d's records processed while partitions %v restore", c.runs, c.held), 60*time.Second, func() bool {
		v, _ := b.metric(t, "windowd_records_in_total", "partition", fmt.Sprint(c.runs))
		return int(v) >= secondOf[c.runs]
	})
	for _, part := range c.held {
		if v, _ := b.metric(t, "windowd_records_in_total", "partition", fmt.Sprint(part)); v != 0 {
			t.Fatalf("%v records of partition %d processed before its state was restored", v, part)
		}
	}
	if code, body := httpGet(t, "http://"+b.httpAddr+"/readyz"); code != 503 || !strings.Contains(body, fmt.Sprintf("restoring partitions %v", c.held)) {
		t.Fatalf("/readyz while partitions %v restore: %d %q", c.held, code, body)
	}
	if v, _ := b.metric(t, "windowd_panes_total", "timing", "EARLY"); v == 0 {
		t.Fatalf("no early pane written while partitions %v restore: partition %d was not processed", c.held, c.runs)
	}
	if v, _ := b.metric(t, "windowd_panes_total", "timing", "ON_TIME"); v != 0 {
		t.Fatalf("%v on-time panes while partitions %v restore: the frontier was not held", v, c.held)
	}

	close(gate)
	produce(t, e.in, flush)
	e.waitCommitted(t, 60*time.Second)
	checkAgainstReplay(t, e, want)
	for _, part := range c.held {
		if v, _ := b.metric(t, "windowd_restore_records_total", "partition", fmt.Sprint(part)); v == 0 {
			t.Fatalf("B restored no changelog record of partition %d: the test did not exercise the restore", part)
		}
	}
	e.expectNothingLate(b)
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
}
