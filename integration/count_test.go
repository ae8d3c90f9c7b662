package integration

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// countStream: keys u0..u7, each on one partition (u<i> on partition i%2),
// event times that jump back and forth (count windows ignore them), x the
// record's number.
func countStream(n int) []input {
	return keyedStream(n, func(i int) int64 { return base + int64(i)*10 - int64(i%5)*3000 })
}

// keyedStream is n records of keys u0..u7, u<k> on partition k%2, record i
// at event time ts(i) with x = i.
func keyedStream(n int, ts func(i int) int64) []input {
	var recs []input
	for i := 0; i < n; i++ {
		k := i * 7 % 8
		recs = append(recs, input{partition: int32(k % 2), key: fmt.Sprintf("u%d", k),
			value: fmt.Sprintf(`{"user":"u%d","ts":%d,"x":%d}`, k, ts(i), i)})
	}
	return recs
}

// killAndRestart produces first to a new windowd process, kills it -9
// once it has read half of them, produces rest and starts windowd again
// on the same state, which it returns once every input record is
// committed.
func (e *env) killAndRestart(t *testing.T, first, rest []input) *instance {
	t.Helper()
	a := e.startProcess()
	produce(t, e.in, first)
	a.waitRecordsIn(t, len(first)/2)
	_ = a.signal(t, syscall.SIGKILL)
	e.waitGroupEmpty(t, 30*time.Second)
	produce(t, e.in, rest)
	b := e.startProcess()
	e.waitCommitted(t, 60*time.Second)
	return b
}

// TestCountWindowsKillAndRestart (docs/SEMANTICS.md, Count windows):
// hopping count windows across a kill -9 and a restart from the last
// checkpoint: the records after it are numbered again as before, so every
// pane equals replay's and a duplicate repeats its pane id with the same
// content.
func TestCountWindowsKillAndRestart(t *testing.T) {
	parallel(t, 12*time.Second)
	e := newEnv(t, 2, "")
	e.editConfig(map[string]string{
		"window: {type: tumbling, size: 10s}": "window: {type: count, size: 5, hop: 3}",
		"    allowed_lateness: 30s\n":         "",
		"      late: {every: 0s}\n":           "",
		"early: {count: 5}":                   "early: {count: 2}",
	})
	recs := countStream(3000)
	want, _ := runReplay(t, &e.cfg.Pipelines[0], recs, 2)
	if len(want) < 1000 {
		t.Fatalf("replay gives %d panes: the stream shows little", len(want))
	}

	b := e.killAndRestart(t, recs[:2000], recs[2000:])
	checkAgainstReplay(t, e, want)
	if err := b.stop(); err != nil {
		t.Fatalf("stop after restart: %v\n%s", err, b.stderr.String())
	}
}
