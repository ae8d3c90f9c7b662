package service

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// TestCommitPutOffWhileBehind checks the commit cadence (cadence.go): due
// every commit_interval while the pipeline keeps up, put off up to
// commit_interval_max while more input waits in Kafka than the cycle
// processed, or while a draining backlog's tail would take longer than
// commit_interval; a lag that stays does not put a cycle off past the
// time it takes to process it.
func TestCommitPutOffWhileBehind(t *testing.T) {
	clock := time.Unix(1_700_000_000, 0)
	p := &pipeline{}
	p.cfg = &config.Pipeline{Name: "p", CommitInterval: 100, CommitIntervalMax: 1000}
	p.m = newMetrics(prometheus.NewRegistry())
	p.now = func() time.Time { return clock }
	st := newPartition(nil, nil, nil, nil)
	p.mu.parts = map[int32]*partition{0: st, 1: newPartition(nil, nil, nil, nil)} // 1: no position yet
	p.cycleStartedLocked(clock)
	putOff := func() float64 { return testutil.ToFloat64(p.m.commitsPutOff.WithLabelValues("p")) }

	check := func(what string, after time.Duration, position, end, processed int64, due bool, putOffs float64) {
		t.Helper()
		clock = p.mu.lastCommit.Add(after)
		st.position, st.end = position, end
		p.mu.cycleRecords = processed
		if got := p.commitDueLocked(); got != due {
			t.Errorf("%s: due %v, want %v", what, got, due)
		}
		if got := putOff(); got != putOffs {
			t.Errorf("%s: windowd_commit_cycles_put_off_total %v, want %v", what, got, putOffs)
		}
	}
	check("before commit_interval", 99*time.Millisecond, 500, 100000, 500, false, 0)
	check("behind: 99,500 waiting, 500 processed", 100*time.Millisecond, 500, 100000, 500, false, 1)
	check("still behind: put off again, counted once per cycle", 400*time.Millisecond, 2000, 100000, 2000, false, 1)
	check("commit_interval_max reached", 1000*time.Millisecond, 5000, 100000, 5000, true, 1)
	p.cycleStartedLocked(clock)
	if p.mu.cycleRecords != 0 || p.mu.putOff {
		t.Fatalf("a new cycle starts with %d records, put off %v", p.mu.cycleRecords, p.mu.putOff)
	}
	check("a new cycle behind is counted again", 100*time.Millisecond, 6000, 100000, 1000, false, 2)
	// The cycle began with 95,000 waiting. 4,000 records in 400ms: 1,000
	// are one commit_interval's work.
	check("a draining tail of 3,000, fewer than the cycle processed but more than one commit_interval's work", 400*time.Millisecond, 97000, 100000, 4000, false, 2)
	check("a draining tail of 1,000: one commit_interval's work", 400*time.Millisecond, 99000, 100000, 4000, true, 2)
	p.cycleStartedLocked(clock) // 1,000 waiting
	check("a lag that stays, as many as the cycle processed", 150*time.Millisecond, 100000, 101000, 1000, true, 2)
	check("caught up", 150*time.Millisecond, 100000, 100000, 300, true, 2)
	check("end unknown", 100*time.Millisecond, 0, -1, 0, true, 2)
}

// TestCommitPartitionLeavesCycle: a partition the group takes away in the
// middle of a cycle takes its waiting records out of the count the cycle
// began with. Otherwise, with a lag that stays on the other partition,
// the backlog looked drained by the lag that left, and the cycle was put
// off as a draining tail up to commit_interval_max.
func TestCommitPartitionLeavesCycle(t *testing.T) {
	clock := time.Unix(1_700_000_000, 0)
	db, err := state.Open("s", state.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p := &pipeline{setup: setup{cfg: &config.Pipeline{Name: "p", CommitInterval: 100, CommitIntervalMax: 1000},
		in: inputTopics{topics: []string{"in"}}, log: zap.NewNop(), m: newMetrics(prometheus.NewRegistry()),
		now: func() time.Time { return clock }}}
	p.rs = newRestores()
	p.mu.gated = map[int32]int64{}
	spec := windowing.Spec{
		Window:     windowing.WindowSpec{Kind: windowing.Tumbling, Size: 1000, Hop: 1000},
		Aggregates: []windowing.AggSpec{{Name: "n", Op: windowing.Count}},
	}
	if p.mu.eng, err = windowing.New(spec, watermark.Spec{Strategy: watermark.BoundedOutOfOrderness}, db, &dropCounter{},
		windowing.Options{ShardByPartition: true}); err != nil {
		t.Fatal(err)
	}
	// Both partitions 50,000 behind, as they stay.
	st0 := &partition{position: 0, start: -1, end: 50_000, first: -1}
	p.mu.parts = map[int32]*partition{0: st0, 1: {position: 0, start: -1, end: 50_000, first: -1}}
	p.cycleStartedLocked(clock)
	p.releaseLocked([]int32{1})
	// 60,000 records in 600ms, 50,000 still waiting: fewer than the
	// cycle processed, and no backlog drained.
	clock = clock.Add(600 * time.Millisecond)
	st0.position, st0.end = 60_000, 110_000
	p.mu.cycleRecords = 60_000
	if !p.commitDueLocked() {
		t.Fatal("cycle put off: the lag of the partition that left counted as a drained backlog")
	}
}
