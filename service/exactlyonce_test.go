package service

import (
	"context"
	"sort"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/watermark"
)

// The transaction commits exactly the engine's positions, for every
// assigned partition, under the input topic's name and id, whatever the
// client had prepared from what it polled.
func TestSetTxnOffsets(t *testing.T) {
	cfg := &config.Pipeline{Name: "p"}
	cfg.Input.Topic = "in"
	p := &pipeline{cfg: cfg, inputID: [16]byte{1, 2, 3}}

	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.MemberID = "m-1"
	polled := kmsg.NewTxnOffsetCommitRequestTopic()
	polled.Topic, polled.TopicID = "in", [16]byte{9}
	pp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	pp.Partition, pp.Offset = 0, 500 // polled ahead of what was processed
	polled.Partitions = append(polled.Partitions, pp)
	req.Topics = append(req.Topics, polled)

	p.setTxnOffsets(req, map[int32]int64{0: 120, 3: 7})
	if len(req.Topics) != 1 {
		t.Fatalf("%d topics", len(req.Topics))
	}
	got := req.Topics[0]
	if got.Topic != "in" || got.TopicID != ([16]byte{9}) {
		t.Fatalf("topic %q id %v: want the name and the id the client resolved", got.Topic, got.TopicID)
	}
	sort.Slice(got.Partitions, func(i, j int) bool { return got.Partitions[i].Partition < got.Partitions[j].Partition })
	want := []struct {
		part int32
		off  int64
	}{{0, 120}, {3, 7}}
	if len(got.Partitions) != len(want) {
		t.Fatalf("partitions %+v", got.Partitions)
	}
	for i, w := range want {
		pt := got.Partitions[i]
		if pt.Partition != w.part || pt.Offset != w.off || pt.LeaderEpoch != -1 || pt.Metadata == nil || *pt.Metadata != "m-1" {
			t.Errorf("partition %d: %+v, want offset %d", w.part, pt, w.off)
		}
	}

	// Nothing polled yet (the client prepared no topic): the stored id is used.
	req = kmsg.NewPtrTxnOffsetCommitRequest()
	p.setTxnOffsets(req, map[int32]int64{1: 1})
	if len(req.Topics) != 1 || req.Topics[0].TopicID != ([16]byte{1, 2, 3}) || req.Topics[0].Partitions[0].Offset != 1 {
		t.Fatalf("without a prepared topic: %+v", req.Topics)
	}

	// No position: nothing to commit.
	p.setTxnOffsets(req, nil)
	if len(req.Topics) != 0 {
		t.Fatalf("no positions, yet %+v", req.Topics)
	}
}

// TestPolledBeforeRollback: after a rollback rewound a partition from 100
// to 40, records from 100 on that were polled before it are skipped until
// the rewound fetch (from 40) arrives; from then on nothing is skipped.
func TestPolledBeforeRollback(t *testing.T) {
	st := &partition{stale: 100}
	for i, s := range []struct {
		off  int64
		skip bool
	}{{100, true}, {101, true}, {250, true}, {40, false}, {41, false}, {100, false}, {101, false}} {
		if got := st.polledBeforeRollback(s.off); got != s.skip {
			t.Errorf("step %d: offset %d skipped %v, want %v", i, s.off, got, s.skip)
		}
	}
	if (&partition{}).polledBeforeRollback(7) {
		t.Error("a partition never rolled back skipped a record")
	}
}

// A rollback before the first commit rewinds each partition to the first
// record it processed, also when refreshEnds had inferred the partition's
// position (the log start, or the group's committed offset) before that
// record came: otherwise the consumer would go on after the records whose
// effects the rollback discarded, and they would be lost. The inferred
// position is not the rewind target: the group's offsets can arrive after
// it was taken from the log start.
func TestRollbackRewindsToFirstProcessedRecord(t *testing.T) {
	const topic = "in"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	for part := int32(0); part < 4; part++ {
		for i := 0; i < 5; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: part, Value: []byte("{}")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	fresh := func() *partition { return &partition{position: -1, end: -1, marked: -1, first: -1} }
	parts := map[int32]*partition{0: fresh(), 1: fresh(), 2: fresh(), 3: fresh()}
	wm := watermark.NewFrontier(watermark.Spec{})
	for part := range parts {
		wm.Assign(part, 0, false)
	}
	// Partition 1 has a committed offset, 2; partition 2's (3) is not
	// known yet when the ends are listed; partition 3 delivers nothing.
	refreshEnds(ctx, kadm.NewClient(cl), topic, parts, map[int32]kgo.EpochOffset{1: {Epoch: -1, Offset: 2}}, wm)
	for part, want := range map[int32]int64{0: 0, 1: 2, 2: 0, 3: 0} {
		if got := parts[part].position; got != want {
			t.Errorf("partition %d: inferred position %d, want %d", part, got, want)
		}
	}
	fetchFrom := map[int32]int64{0: 0, 1: 2, 2: 3}
	p := &pipeline{}
	for part, from := range fetchFrom {
		for off := from; off < 5; off++ {
			p.advancePosition(parts[part], &kgo.Record{Partition: part, Offset: off})
		}
	}
	for part, want := range map[int32]int64{0: 0, 1: 2, 2: 3, 3: -1} {
		st := parts[part]
		if off := st.rewind(0, false); off != want {
			t.Errorf("partition %d: rollback rewinds to %d, want %d", part, off, want)
		}
		if st.position != -1 || st.first != -1 || st.inferred {
			t.Errorf("partition %d: after the rollback position %d, first %d, inferred %v; want -1, -1, false", part, st.position, st.first, st.inferred)
		}
	}
	// A stored checkpoint wins.
	st := fresh()
	p.advancePosition(st, &kgo.Record{Offset: 7})
	if off := st.rewind(4, true); off != 4 || st.position != 4 || st.marked != 4 {
		t.Errorf("rollback to a stored position 4: rewinds to %d, position %d, marked %d", off, st.position, st.marked)
	}
}
