package service

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/source"
)

// aheadFetches is a poll of n records of topic "in", spread over three
// partitions, with a partition of another topic in between; every seventh
// record is not valid JSON and every eleventh has no key.
func aheadFetches(n int) kgo.Fetches {
	parts := make([]kgo.FetchPartition, 3)
	for p := range parts {
		parts[p].Partition = int32(p)
	}
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: "in", Partition: int32(i % 3), Offset: int64(i / 3), Timestamp: time.UnixMilli(int64(5000 + i))}
		r.Value = fmt.Appendf(nil, `{"user":"u%d","ts":%d,"x":%d.5,"pad":"%*s"}`, i%50, 1000+i, i, i%40, "")
		if i%7 == 3 {
			r.Value = r.Value[:len(r.Value)-1]
		}
		if i%11 != 5 {
			r.Key = fmt.Appendf(nil, "k%d", i%13)
		}
		parts[i%3].Records = append(parts[i%3].Records, r)
	}
	other := kgo.FetchTopic{Topic: "other", Partitions: []kgo.FetchPartition{{Records: []*kgo.Record{{Topic: "other", Value: []byte(`{}`)}}}}}
	return kgo.Fetches{
		{Topics: []kgo.FetchTopic{{Topic: "in", Partitions: parts[:2]}, other}},
		{Topics: []kgo.FetchTopic{{Topic: "in", Partitions: parts[2:]}}},
	}
}

// TestDecodeAheadMatchesInline: a poll's records decoded ahead (on the
// goroutine, or by get for a small poll or one processor) are numbered as
// step numbers them and decode exactly as handle decodes each alone, for
// every record or every third, across reused polls of changing sizes, and
// a poll left early stops the goroutine for the next one.
func TestDecodeAheadMatchesInline(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		yaml := `kafka: {brokers: embedded}
pipelines:
  - name: a
    input: {topic: in}
    timestamp: {field: ts}
    window: {type: tumbling, size: 1h}
    aggregates: [{name: n, op: count}, {name: s, op: sum, field: x}]
    output: {topic: out}
`
		if keyed {
			yaml = `kafka: {brokers: embedded}
pipelines:
  - name: a
    input: {topic: in}
    key: {field: user}
    timestamp: {field: ts}
    window: {type: tumbling, size: 1h}
    aggregates: [{name: s, op: sum, field: x}]
    output: {topic: out}
`
		}
		cfg, err := config.Parse("a.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		pc := &cfg.Pipelines[0]
		for _, parallel := range []bool{true, false} {
			a := newDecodeAhead(&decoders{each: []*source.Decoder{source.NewDecoder(pc)}}, parallel)
			ref := source.NewDecoder(pc)
			for _, poll := range []struct{ n, every, stopAt int }{
				{1000, 1, -1}, {aheadMin - 1, 1, -1}, {3000, 3, -1}, {2000, 1, 700}, {aheadMin, 2, -1}, {0, 1, -1}, {1500, 1, -1},
			} {
				fetches := aheadFetches(poll.n)
				a.start(fetches, "in", 0)
				if a.running != (parallel && poll.n >= aheadMin) {
					t.Fatalf("keyed %v parallel %v, poll of %d: running %v", keyed, parallel, poll.n, a.running)
				}
				next, seen := 0, 0
				fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
					if fp.Topic != "in" {
						return
					}
					for i, r := range fp.Records {
						j := next + i
						if j%poll.every != 0 || (poll.stopAt >= 0 && j >= poll.stopAt) {
							continue
						}
						seen++
						got := a.get(j)
						var want decoded
						decodeRecord(ref, r, &want, 0)
						// A dead-lettered record's event is partly filled (Decode): only its error counts.
						if fmt.Sprint(got.err) != fmt.Sprint(want.err) || (want.err == nil && !reflect.DeepEqual(got.ev, want.ev)) {
							t.Fatalf("keyed %v parallel %v, poll of %d, record %d (partition %d offset %d):\n got %+v, %v\nwant %+v, %v",
								keyed, parallel, poll.n, j, r.Partition, r.Offset, got.ev, got.err, want.ev, want.err)
						}
					}
					next += len(fp.Records)
				})
				a.finish()
				if next != poll.n || len(a.recs) != poll.n {
					t.Fatalf("poll of %d: step numbered %d records, start took %d", poll.n, next, len(a.recs))
				}
				if seen == 0 && poll.n > 0 {
					t.Fatalf("poll of %d: nothing compared", poll.n)
				}
				if a.running {
					t.Fatalf("poll of %d: still running after finish", poll.n)
				}
				for i, r := range a.recs {
					if r != nil || a.slots[i].ev.Key != "" {
						t.Fatalf("poll of %d: record %d still referenced after finish", poll.n, i)
					}
				}
			}
		}
	}
}

// TestSpreads: a pipeline's work leaves its poll loop only with more than
// one processor and workers unset or above 1 (docs/OPERATIONS.md, Workers).
func TestSpreads(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, c := range []struct {
		procs, workers int
		want           bool
	}{{2, 0, true}, {2, 1, false}, {2, 2, true}, {4, 3, true}, {1, 0, false}, {1, 4, false}} {
		runtime.GOMAXPROCS(c.procs)
		if got := spreads(&config.Pipeline{Workers: c.workers}); got != c.want {
			t.Errorf("GOMAXPROCS %d, workers %d: spreads %v, want %v", c.procs, c.workers, got, c.want)
		}
	}
}
