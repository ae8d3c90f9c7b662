package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// transactionStream: keys u0..u7 (u<k> on partition k%2), event times up
// to 1.5 s out of order (within max_delay, so nothing is late), a 5 s
// silence every 600 records (windows time out), x the record's number: a
// record with x divisible by 7 closes its key's window, one divisible by
// 61 discards it.
func transactionStream(n int) []input {
	return keyedStream(n, func(i int) int64 { return base + int64(i)*10 + int64(i/600)*5000 - int64(i*37%5)*300 })
}

// TestTransactionWindowsKillAndRestart (docs/SEMANTICS.md, Transaction
// windows): transaction windows, allowed_lateness 0s, across a kill -9 and
// a restart from the last checkpoint: the windows, their records by time
// and their endings come back from the changelog, so every pane equals
// replay's (closed, discarded and timed-out windows; early panes
// included), nothing is dropped as late, and a duplicate repeats its pane
// id with the same content: at least once, exactly once, and repartitioned.
func TestTransactionWindowsKillAndRestart(t *testing.T) {
	for _, tail := range []string{"", "    delivery: exactly_once\n", "    repartition: true\n"} {
		name := strings.TrimSpace(strings.ReplaceAll(tail, ": ", "="))
		if name == "" {
			name = "at_least_once"
		}
		t.Run(name, func(t *testing.T) { transactionKillAndRestart(t, tail) })
	}
}

func transactionKillAndRestart(t *testing.T, tail string) {
	parallel(t, 12*time.Second)
	e := newEnv(t, 2, "")
	e.editConfig(map[string]string{
		"window: {type: tumbling, size: 10s}": `window: {type: transaction, close_when: 'int(value.x) % 7 == 0', discard_when: 'int(value.x) % 61 == 0', timeout: 1s}`,
		"    allowed_lateness: 30s\n":         "    allowed_lateness: 0s\n",
		"      late: {every: 0s}\n":           "",
		"early: {count: 5}":                   "early: {count: 2}",
		"    commit_interval: 200ms\n":        "    commit_interval: 200ms\n" + tail,
	})
	recs := transactionStream(3000)
	all := append(append([]input(nil), recs...), flushRecords(e.partitions)...)
	panes, errs := runReplay(t, &e.cfg.Pipelines[0], all, int(e.partitions))
	if len(errs) > 0 {
		t.Fatalf("replay reported errors (the stream has no late or bad record): %v", errs[:min(len(errs), 5)])
	}
	var want []string
	timedOut, closed := 0, 0
	for _, p := range panes {
		v := gjson.Parse(p)
		if strings.HasPrefix(v.Get("key").Str, "flush") {
			continue
		}
		want = append(want, p)
		if v.Get("pane.final").Bool() {
			if v.Get("pane.timeout").Bool() {
				timedOut++
			} else {
				closed++
			}
		}
	}
	if closed < 200 || timedOut < 8 {
		t.Fatalf("replay gives %d closed and %d timed-out final panes: the stream shows little", closed, timedOut)
	}

	b := e.killAndRestart(t, all[:2000], all[2000:]) // the flush records last
	checkAgainstReplay(t, e, want)
	late := e.reader(e.late)
	late.poll(time.Second)
	if len(late.got) > 0 {
		t.Fatalf("%d records went to the late topic, e.g. %s", len(late.got), late.got[0].value)
	}
	if err := b.stop(); err != nil {
		t.Fatalf("stop after restart: %v\n%s", err, b.stderr.String())
	}
}
