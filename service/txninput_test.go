package service

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/windowd/windowd/kafka"
)

// A partition of an input that a transactional producer writes (another
// windowd under exactly_once) is caught up once the consumer has read its
// last transaction: its commit or abort marker takes an offset, and the
// position must pass it to reach the high watermark.
func TestTransactionalInputCaughtUp(t *testing.T) {
	client := fakeCluster(t, kfake.SeedTopics(2, "in"))
	prod := client(kgo.TransactionalID("upstream"), kgo.DefaultProduceTopic("in"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Partition 0: a committed transaction, then an aborted one (offsets
	// 0 data, 1 commit, 2 aborted data, 3 abort: high watermark 4).
	for _, end := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte(`{"user":"u0","ts":1000}`)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := prod.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	now := time.UnixMilli(1_700_000_000_000)
	p := statusPipeline(t, &now)
	p.mu.ahead = newDecodeAhead(newDecoders(p.cfg), false)
	cons := client(kafka.GroupOpts(nil, 6*time.Second, "g", "in")...)
	st := p.mu.parts[0]
	for !st.caughtUp() {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := cons.PollRecords(pctx, kafka.PollMaxRecords)
		pcancel()
		if ctx.Err() != nil {
			t.Fatalf("partition 0 never caught up: position %d, end %d", st.position, st.end)
		}
		if err := p.processPollLocked(ctx, fs, now); err != nil {
			t.Fatal(err)
		}
	}
	if st.end != 4 || st.position != 4 {
		t.Errorf("position %d, end %d", st.position, st.end)
	}
	if n := p.mu.eng.Stats().Records; n != 1 {
		t.Errorf("engine saw %d records, want the 1 committed", n)
	}
}
