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
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("t"),
		kgo.DefaultProduceTopic("out"), kgo.ProducerLinger(time.Minute)) // the records stay buffered
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
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
