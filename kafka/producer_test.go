package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Records still buffered when their transaction aborts fail with
// kgo.ErrAborting: they are rolled back with it, not an output that was
// refused, so the producer stays usable for the next transaction (an
// exactly_once pipeline whose abort met buffered panes stopped with "output
// not acknowledged" at its next commit).
func TestAbortedRecordsAreNoFailure(t *testing.T) {
	cl, ctx := fakeClient(t, "out", kgo.TransactionalID("t"), kgo.ProducerLinger(time.Minute)) // the records stay buffered
	p := NewProducer(cl)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		p.Produce(ctx, &kgo.Record{Value: []byte("pane")})
	}
	// What GroupTransactSession.End(TryAbort) does.
	if err := cl.AbortBufferedRecords(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("flush after an abort: %v", err)
	}
}

// A batch reports the lowest offset acknowledged per partition: a commit
// cycle compares it with where its previous cycle ended (another writer in
// between, service/changelog.go).
func TestBatchFirst(t *testing.T) {
	cl, ctx := fakeClient(t, "log")
	p := NewProducer(cl)
	for round, want := range []int64{0, 3} {
		b := NewBatch("log", func(r *kgo.Record) bool { return string(r.Value) == "marker" })
		if _, ok := b.First(0); ok {
			t.Fatal("an empty batch has a first offset")
		}
		for _, v := range []string{"k1", "k2", "marker"} {
			p.ProduceIn(ctx, &kgo.Record{Value: []byte(v)}, b)
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if first, ok := b.First(0); !ok || first != want || b.Offsets()[0] != want+2 {
			t.Fatalf("round %d: first %d (%v), marker %d; want %d, %d", round, first, ok, b.Offsets()[0], want, want+2)
		}
	}
}

// fakeClient starts a one-broker kfake cluster with a one-partition topic
// and returns a client of it producing there by default, with opts, and a
// context of 30 s; both end with the test.
func fakeClient(t *testing.T, topic string, opts ...kgo.Opt) (*kgo.Client, context.Context) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(topic)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return cl, ctx
}
