package service

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestRecordPoolClasses(t *testing.T) {
	rp := new(recordPool)
	for _, c := range []struct{ n, cap int }{{1, 16}, {16, 16}, {17, 32}, {1000, 1024}, {4096, 4096}, {5000, 8192}} {
		s := rp.GetRecords(c.n)
		if len(s) != 0 || cap(s) != c.cap {
			t.Errorf("GetRecords(%d): len %d cap %d, want 0 and %d", c.n, len(s), cap(s), c.cap)
		}
		rp.PutRecords(s[:cap(s)])
	}
	// A slice of another capacity is not kept: a later Get of its class
	// must still hold the class's capacity.
	rp.PutRecords(make([]kgo.Record, 100))
	if s := rp.GetRecords(100); cap(s) != 128 {
		t.Errorf("after a foreign Put, GetRecords(100) has cap %d", cap(s))
	}
}

// Records decoded into recycled slices are the records fetched: a consumer
// that recycles each poll reads every record of three rounds intact.
func TestRecordPoolRecycledFetches(t *testing.T) {
	client := fakeCluster(t, kfake.SeedTopics(1, "in"))
	prod := client(kgo.DefaultProduceTopic("in"))
	cons := client(kgo.ConsumeTopics("in"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithPools(new(recordPool)))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	next := 0
	for round := 0; round < 3; round++ {
		var batch []*kgo.Record
		for i := 0; i < 500; i++ {
			n := round*500 + i
			batch = append(batch, &kgo.Record{Key: fmt.Appendf(nil, "k%d", n), Value: fmt.Appendf(nil, `{"n":%d}`, n)})
		}
		if err := prod.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		for next < (round+1)*500 {
			fetches := cons.PollFetches(ctx)
			if err := fetches.Err(); err != nil {
				t.Fatal(err)
			}
			fetches.EachRecord(func(r *kgo.Record) {
				if r.Offset != int64(next) || string(r.Key) != fmt.Sprintf("k%d", next) || string(r.Value) != fmt.Sprintf(`{"n":%d}`, next) {
					t.Fatalf("record %d read back as offset %d key %q value %q", next, r.Offset, r.Key, r.Value)
				}
				next++
			})
			fetches.EachRecord(func(r *kgo.Record) { r.Recycle() })
		}
	}
}
