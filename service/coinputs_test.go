package service

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// TestInputTopics: the partitions of co-partitioned inputs and back, and a
// poll renumbered so that the loop reads one topic while dead letters and
// late records still name the partition they came from.
func TestInputTopics(t *testing.T) {
	in := inputTopics{topics: []string{"views", "clicks"}}
	part, ok := in.id("clicks", 3)
	if !ok || part != coStride+3 || lead(part) != 3 || in.input(part) != 1 || in.label(part) != "clicks/3" || in.label(3) != "3" {
		t.Fatalf("clicks 3: %d %v, lead %d, input %d, label %q", part, ok, lead(part), in.input(part), in.label(part))
	}
	if _, ok := in.id("other", 0); ok {
		t.Fatal("a topic that is not an input has a partition")
	}
	if topic, p := in.kafka(part); topic != "clicks" || p != 3 {
		t.Fatalf("kafka(%d) = %s %d", part, topic, p)
	}
	if got := in.followers(2); !slices.Equal(got, []int32{coStride + 2}) {
		t.Fatalf("followers of 2: %v", got)
	}
	if got := (inputTopics{topics: []string{"in"}}).followers(2); got != nil {
		t.Fatalf("one input has followers %v", got)
	}
	parts := in.fromKafka(map[string][]int32{"views": {1}, "clicks": {1, 2}, "other": {0}})
	if !slices.Equal(parts, []int32{1, coStride + 1, coStride + 2}) {
		t.Fatalf("fromKafka: %v", parts)
	}
	back := in.toKafka(parts)
	if !maps.EqualFunc(back, map[string][]int32{"views": {1}, "clicks": {1, 2}}, slices.Equal[[]int32]) {
		t.Fatalf("toKafka: %v", back)
	}
	offs := in.epochOffsets(map[int32]int64{1: 10, coStride + 1: 20})
	if offs["views"][1].Offset != 10 || offs["clicks"][1].Offset != 20 || len(offs) != 2 {
		t.Fatalf("epochOffsets: %v", offs)
	}

	r := &kgo.Record{Topic: "clicks", Partition: 2, Offset: 7}
	v := &kgo.Record{Topic: "views", Partition: 2, Offset: 9}
	fetches := kgo.Fetches{{Topics: []kgo.FetchTopic{
		{Topic: "views", Partitions: []kgo.FetchPartition{{Partition: 2, Records: []*kgo.Record{v}}}},
		{Topic: "clicks", Partitions: []kgo.FetchPartition{{Partition: 2, Records: []*kgo.Record{r}}}},
	}}}
	in.renumber(fetches)
	var seen []int32
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		if fp.Topic != "views" {
			t.Errorf("a renumbered poll has topic %s", fp.Topic)
		}
		seen = append(seen, fp.Partition)
	})
	if !slices.Equal(seen, []int32{2, coStride + 2}) || r.Partition != coStride+2 || v.Partition != 2 {
		t.Fatalf("renumbered partitions %v, records %d and %d", seen, v.Partition, r.Partition)
	}
	if src := in.sourceRecord(r); src.Topic != "clicks" || src.Partition != 2 || src.Offset != 7 || r.Partition != coStride+2 {
		t.Fatalf("source of the clicks record: %s %d %d", src.Topic, src.Partition, src.Offset)
	}
	if in.sourceRecord(v) != v {
		t.Fatal("the lead's record is its own source")
	}
}

// TestCoverLogs: each input's covers are forgotten by its own position in
// a marker, a follower's position not yet known covering nothing.
func TestCoverLogs(t *testing.T) {
	var cs coverLogs
	cs.add(0, "a", 10)
	cs.add(1, "a", 5)
	cs.add(2, "b", 3)
	cs.marked(&marker{position: 10, follow: []followMark{{position: 4}, {position: -1}}})
	if got := cs.of(0).latest(); len(got) != 0 {
		t.Errorf("input 0: %v, want all covered by 10", got)
	}
	if got := cs.of(1).latest(); got["a"] != 5 || len(got) != 1 {
		t.Errorf("input 1: %v, want a at 5 ahead of 4", got)
	}
	if got := cs.of(2).latest(); got["b"] != 3 {
		t.Errorf("input 2: %v, want b kept (no position known)", got)
	}
	if got := cs.of(5).latest(); len(got) != 0 {
		t.Errorf("an input with no covers: %v", got)
	}
	for h, want := range map[string]int{"covers": 0, "covers.1": 1, "covers.12": 12} {
		if i, ok := coversInput(h); !ok || i != want {
			t.Errorf("coversInput(%q) = %d, %v", h, i, ok)
		}
	}
	for _, h := range []string{"covers.0", "covers.x", "cover", "covers."} {
		if _, ok := coversInput(h); ok {
			t.Errorf("coversInput(%q) accepted", h)
		}
	}
	if coversHeader(0) != "covers" || coversHeader(3) != "covers.3" {
		t.Error("coversHeader")
	}
}

// dropCounter is an engine's emitter that counts what it drops.
type dropCounter struct{ panes, dropped int }

func (d *dropCounter) Pane(*windowing.Pane) error                           { d.panes++; return nil }
func (d *dropCounter) Dropped(*windowing.Event, windowing.DropReason) error { d.dropped++; return nil }

// gatedCoState is a pipeline of two co-partitioned inputs (2 partitions
// each) whose partition 0 state, lead and follower, came back behind the
// frontier (20,000) and is gated: the lead at 8,000, the follower at
// 5,000. record feeds one record and runs the step's release.
func gatedCoState(t *testing.T) (p *pipeline, out *dropCounter, record func(part int32, key string, ts int64)) {
	t.Helper()
	db, err := state.Open("s", state.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	spec := windowing.Spec{
		Window:     windowing.WindowSpec{Kind: windowing.Tumbling, Size: 10_000, Hop: 10_000},
		Aggregates: []windowing.AggSpec{{Name: "n", Op: windowing.Count}},
		Trigger:    windowing.TriggerSpec{OnTime: true, Closing: windowing.ClosingNever},
	}
	out = &dropCounter{}
	p = &pipeline{setup: setup{cfg: &config.Pipeline{Name: "p"}, in: inputTopics{topics: []string{"views", "clicks"}},
		log: zap.NewNop(), m: newMetrics(prometheus.NewRegistry())}}
	p.rs = newRestores()
	p.mu.gated, p.mu.parts = map[int32]int64{}, map[int32]*partition{}
	if p.mu.eng, err = windowing.New(spec, watermark.Spec{Strategy: watermark.BoundedOutOfOrderness}, db, out,
		windowing.Options{ShardByPartition: true, Shards: coStride}); err != nil {
		t.Fatal(err)
	}
	eng := p.mu.eng
	record = func(part int32, key string, ts int64) {
		t.Helper()
		ev := windowing.Event{Partition: part, Key: key, Time: ts, Inputs: make([]windowing.Input, 1)}
		if err := eng.Record(&ev, 0); err != nil {
			t.Fatal(err)
		}
		if err := p.releaseGatedLocked(); err != nil {
			t.Fatal(err)
		}
	}
	for _, part := range []int32{0, 1, coStride, coStride + 1} {
		p.mu.parts[part] = &partition{}
		eng.Assign(part, 0, true)
		record(part, "k", 20_000)
	}
	for part, wm := range map[int32]int64{0: 8_000, coStride: 5_000} {
		eng.Revoke(part)
		eng.Watermarks().RestoreGenerator(part, watermark.Generator{MaxTS: wm, Seen: 1, Watermark: wm})
		eng.Assign(part, 0, false)
		p.gateIfBehindLocked(part)
	}
	return p, out, record
}

// TestFollowerJoinsWhereRestorePutIt: a follower the group gives this
// member after its lead's state was restored here joins where the
// restored marker put it: the marker's position, generator and covers,
// not the group's committed offset. At least once the marker may be ahead
// of that offset (a crash between the changelog write and the offset
// commit), and the records between were counted twice. Until it joins,
// the lead's markers keep its position and generator.
func TestFollowerJoinsWhereRestorePutIt(t *testing.T) {
	cl := fakeCluster(t, kfake.SeedTopics(2, "views", "clicks"))()
	db, err := state.Open("s", state.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p := &pipeline{setup: setup{cfg: &config.Pipeline{Name: "p"}, in: inputTopics{topics: []string{"views", "clicks"}}, log: zap.NewNop(),
		m: newMetrics(prometheus.NewRegistry()), now: time.Now}}
	p.cl = cl
	p.rs = newRestores()
	p.off.stored = map[int32]int64{}
	p.mu.parts, p.mu.following, p.mu.gated, p.mu.skip, p.mu.clNext = map[int32]*partition{}, map[int32]bool{}, map[int32]int64{},
		map[int32]*skipSet{}, map[int32]int64{}
	spec := windowing.Spec{
		Window:     windowing.WindowSpec{Kind: windowing.Tumbling, Size: 1000, Hop: 1000},
		Aggregates: []windowing.AggSpec{{Name: "n", Op: windowing.Count}},
	}
	if p.mu.eng, err = windowing.New(spec, watermark.Spec{Strategy: watermark.BoundedOutOfOrderness}, db, &dropCounter{},
		windowing.Options{ShardByPartition: true, Shards: coStride}); err != nil {
		t.Fatal(err)
	}
	// Lead 1's restore ends: its marker puts the lead at 10 and its
	// follower (clicks/1) at 7, and key x of the follower was logged
	// covering its records up to 9.
	gen := watermark.Generator{MaxTS: 5_000, Seen: 3, Watermark: 5_000}
	_, cancel := context.WithCancel(context.Background())
	j := &restoreJob{part: 1, cancel: cancel, done: make(chan struct{})}
	close(j.done)
	p.rs.jobs[1] = j
	var covers coverLogs
	covers.add(1, "x", 9)
	p.finishRestoreLocked(j, restoreBatch{mk: &marker{position: 10, follow: []followMark{{position: 7, gen: gen}}}, covers: covers})
	const follower = coStride + 1
	if _, joined := p.mu.parts[follower]; joined {
		t.Fatal("the follower joined before the group gave it")
	}
	// Meanwhile the lead's markers carry where the restore put it, for
	// a restore of this state elsewhere or after a restart.
	if follow, _ := p.followMarksLocked(1); len(follow) != 1 || follow[0].position != 7 || follow[0].gen.MaxTS != gen.MaxTS {
		t.Fatalf("the lead's marker holds %+v of its follower, want position 7 and the restored generator", follow)
	}
	p.startRestoreLocked(follower)
	p.off.Lock()
	at, known := p.off.stored[follower]
	p.off.Unlock()
	if !known || at != 7 {
		t.Fatalf("follower resumes at %d (known %v), want the marker's 7", at, known)
	}
	if g, _ := p.mu.eng.Watermarks().Generator(follower); g.MaxTS != gen.MaxTS || g.Seen != gen.Seen {
		t.Fatalf("follower's generator %+v, want the marker's %+v", g, gen)
	}
	if s := p.mu.skip[follower]; s == nil || s.keys["x"] != 9 {
		t.Fatalf("follower's skip set %+v: want key x skipped up to 9", s)
	}
}

// TestCoPartitionedCatchUp: a state whose lead and follower both rejoin
// behind the frontier runs on its own frontier until both have caught up.
// Before, the lead's catching up released the state while the follower
// was still behind, and the follower's next record, within its own
// watermark, was dropped as late.
func TestCoPartitionedCatchUp(t *testing.T) {
	p, out, record := gatedCoState(t)
	const lead, follower = int32(0), coStride
	record(lead, "a", 21_000) // the lead has caught up
	record(follower, "a", 6_000)
	if out.dropped != 0 {
		t.Fatalf("%d records dropped as late: the follower's record within its own watermark is on time", out.dropped)
	}
	record(follower, "a", 21_000) // now both have: the state fires at the frontier
	if len(p.mu.gated) != 0 || out.panes == 0 {
		t.Fatalf("still gated %v, %d panes: want the state released and its windows fired", p.mu.gated, out.panes)
	}
}

// TestFollowerReleasedWhileGated: a follower the group takes away while it
// is the last gated partition of its state, its lead staying, leaves the
// state on the frontier: its windows fire as the frontier passes them.
// Before, the state stayed on its own frontier, which only the lead's own
// records moved: at the frontier nothing of it fired.
func TestFollowerReleasedWhileGated(t *testing.T) {
	p, out, record := gatedCoState(t)
	const lead, follower = int32(0), coStride
	record(lead, "a", 21_000)    // the lead has caught up
	record(follower, "a", 6_000) // window [0,10000) of the state
	if out.panes != 0 {
		t.Fatalf("%d panes while the state catches up below 10,000", out.panes)
	}
	p.releaseLocked([]int32{follower})
	if err := p.releaseGatedLocked(); err != nil { // the next step's
		t.Fatal(err)
	}
	if out.panes == 0 || out.dropped != 0 {
		t.Fatalf("%d panes, %d dropped: want window [0,10000) fired at the frontier (20,000) once the follower left", out.panes, out.dropped)
	}
}

// A rollback keeps a co-partitioned follower with its lead: lost and kept
// for the group to hand back, restoring, or assigned. Before, it dropped
// the follower on its own, and with it the lead's shard (its state) and
// the follower's offset.
func TestRollbackKeepsFollowers(t *testing.T) {
	now := time.Now()
	p := &pipeline{setup: setup{in: inputTopics{topics: []string{"views", "clicks"}}, now: func() time.Time { return now }}}
	p.rs = newRestores()
	p.mu.parts = map[int32]*partition{1: {}}
	p.mu.keptLost = map[int32]time.Time{0: now.Add(time.Minute)}
	p.rs.jobs[2] = nil // restoring
	for part, drops := range map[int32]bool{
		0: false, coStride: false, // kept lost
		1: false, coStride + 1: false, // assigned
		2: false, coStride + 2: false, // restoring
		3: true, coStride + 3: true, // none of those
	} {
		if got := p.rollbackDropsLocked(part); got != drops {
			t.Errorf("partition %s: rollback drops it %v, want %v", p.in.label(part), got, drops)
		}
	}
}

// A follower the group gives a member that already runs its lead joins
// the lead's state at once. Before, it waited for a lead restore that
// never came: paused, never read, holding the frontier restoring. A
// follower whose lead restores here still waits for that restore.
func TestFollowerJoinsRunningLead(t *testing.T) {
	cl := fakeCluster(t, kfake.SeedTopics(2, "views", "clicks"))()
	db, err := state.Open("s", state.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pc := &config.Pipeline{Name: "p"}
	p := &pipeline{setup: setup{cfg: pc, in: inputTopics{topics: []string{"views", "clicks"}}, log: zap.NewNop(),
		m: newMetrics(prometheus.NewRegistry()), now: time.Now}}
	p.cl = cl
	p.rs = newRestores()
	p.mu.parts, p.mu.following, p.mu.gated = map[int32]*partition{}, map[int32]bool{}, map[int32]int64{}
	spec := windowing.Spec{
		Window:     windowing.WindowSpec{Kind: windowing.Tumbling, Size: 1000, Hop: 1000},
		Aggregates: []windowing.AggSpec{{Name: "n", Op: windowing.Count}},
	}
	if p.mu.eng, err = windowing.New(spec, watermark.Spec{Strategy: watermark.BoundedOutOfOrderness}, db, &dropCounter{},
		windowing.Options{ShardByPartition: true, Shards: coStride}); err != nil {
		t.Fatal(err)
	}
	p.partitionStateLocked(0) // the lead runs here
	p.mu.eng.Assign(0, 0, true)
	p.startRestoreLocked(coStride)
	if _, joined := p.mu.parts[coStride]; !joined || p.mu.following[coStride] || p.mu.eng.Watermarks().Restoring(coStride) {
		t.Fatalf("follower of a running lead: joined %v, following %v, restoring %v; want it joined",
			joined, p.mu.following[coStride], p.mu.eng.Watermarks().Restoring(coStride))
	}
	p.rs.jobs[1] = &restoreJob{part: 1} // lead 1 restores
	p.partitionStateLocked(1)
	p.startRestoreLocked(coStride + 1)
	if !p.mu.following[coStride+1] {
		t.Fatal("the follower of a restoring lead does not wait for its restore")
	}
}
