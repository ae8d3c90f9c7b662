package service

import (
	"runtime"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/expr"
	"github.com/windowd/windowd/source"
	"github.com/windowd/windowd/windowing"
)

// Decoding ahead: a poll's records are decoded (JSON check, field
// extraction) on a second goroutine, in order, while the poll loop feeds the
// ones already decoded to the engine. Decoding is pure (a record's result
// depends on its bytes and the pipeline alone), so the loop sees exactly
// what it would have decoded itself; everything with an effect (the
// engine, dead-lettering, positions, commits) stays on the loop, in record
// order.
const (
	// aheadMin is the smallest poll decoded ahead: below it the goroutine
	// and its hand-overs cost more than they save.
	aheadMin = 256
	// aheadChunk is how many records the decoding goroutine hands over at a
	// time.
	aheadChunk = 128
)

// decoded is a record's decoding: its event, or the error that
// dead-letters it.
type decoded struct {
	ev      windowing.Event
	err     error
	headers []expr.Header // the record's, for expressions; reused
}

// decodeRecord decodes r into d with dec at processing time now (Unix ms:
// timestamp.max_future judges event time against it). It is the one
// place a Kafka record becomes a source.Record (the pipeline's decoders
// and repartition stage 1's).
func decodeRecord(dec *source.Decoder, r *kgo.Record, d *decoded, now int64) {
	if r.Attrs.IsControl() {
		d.err = nil
		return // a transaction marker: no data (handleDecodedLocked)
	}
	rec := source.Record{Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp.UnixMilli(), Now: now}
	if dec.UsesExpressions() && len(r.Headers) > 0 {
		rec.Headers = headers(r.Headers, d.headers[:0])
		d.headers = rec.Headers
	}
	d.err = dec.Decode(&rec, &d.ev)
}

// headers are a record's headers as expressions see them, in dst.
func headers(hs []kgo.RecordHeader, dst []expr.Header) []expr.Header {
	for _, h := range hs {
		dst = append(dst, expr.Header{Key: h.Key, Value: string(h.Value)})
	}
	return dst
}

// decodeAhead decodes one poll's records of a topic, numbered in the order
// of kgo.Fetches.EachPartition. Between start and finish the loop reads
// them with get, or a range of them with decoded, in increasing order (it
// may skip some). With at least aheadMin records and more than one
// processor, a goroutine decodes them ahead of the loop; otherwise they
// are decoded, in order, as far as get or decoded asks (decodeTo), so
// records the loop skips may be decoded too: decoding has no effect
// besides its slot. slots, their
// events' Inputs and the decoder are reused from poll to poll; an event's
// Key may point into its record, as source.Decoder.Decode says.
type decodeAhead struct {
	dec      *decoders // the goroutine's (or get's) decoders
	parallel bool      // more than one processor: decode ahead when worth it
	recs     []*kgo.Record
	slots    []decoded
	now      int64 // the poll's processing time (Unix ms)

	running bool
	avail   int      // slots decoded: handed over by the goroutine, or decoded inline (decodeTo)
	ready   chan int // the goroutine's progress: slots decoded so far
	stop    chan struct{}
}

// newDecodeAhead decodes with dec, ahead of the loop when parallel.
func newDecodeAhead(dec *decoders, parallel bool) *decodeAhead {
	return &decodeAhead{dec: dec, parallel: parallel}
}

// spreads reports whether pipeline cfg's work may leave its poll loop for
// a decoding and a pane-writing goroutine: with more than one processor,
// unless its workers are 1 (docs/OPERATIONS.md, Workers).
func spreads(cfg *config.Pipeline) bool {
	return runtime.GOMAXPROCS(0) > 1 && cfg.Workers != 1
}

// decodedPoll is one poll's records being decoded, as start hands them to
// the loop: get the decoding of each in order, then finish.
type decodedPoll struct{ a *decodeAhead }

func (d decodedPoll) get(i int) *decoded { return d.a.get(i) }
func (d decodedPoll) finish()            { d.a.finish() }

// decoded returns records [from, to) of the poll decoded, to be read
// before get reaches them (prefetchLocked).
func (d decodedPoll) decoded(from, to int) []decoded {
	d.a.decodeTo(to)
	return d.a.slots[from:to]
}

// start takes the records of topic in fetches, polled at processing time
// now (Unix ms), when worth it starts decoding them, and returns the poll.
func (a *decodeAhead) start(fetches kgo.Fetches, topic string, now int64) decodedPoll {
	a.recs = a.recs[:0]
	a.now, a.avail = now, 0
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		if fp.Topic == topic {
			a.recs = append(a.recs, fp.Records...)
		}
	})
	if n := len(a.recs); n > len(a.slots) {
		a.slots = append(a.slots, make([]decoded, n-len(a.slots))...)
	}
	if !a.parallel || len(a.recs) < aheadMin {
		return decodedPoll{a}
	}
	a.running = true
	a.ready = make(chan int, (len(a.recs)+aheadChunk-1)/aheadChunk)
	a.stop = make(chan struct{})
	go a.run(a.recs, a.slots, a.now, a.ready, a.stop)
	return decodedPoll{a}
}

// run decodes recs into slots, aheadChunk at a time, telling ready how far
// it got after each chunk; it stops early when stop is closed, and closes
// ready when it returns.
func (a *decodeAhead) run(recs []*kgo.Record, slots []decoded, now int64, ready chan<- int, stop <-chan struct{}) {
	defer close(ready)
	for from := 0; from < len(recs); from += aheadChunk {
		select {
		case <-stop:
			return
		default:
		}
		to := min(from+aheadChunk, len(recs))
		for i := from; i < to; i++ {
			decodeRecord(a.dec.of(recs[i]), recs[i], &slots[i], now)
		}
		ready <- to // never blocks: ready has room for every chunk
	}
}

// get returns the decoding of record i of the poll; i must be below the
// number of records start took.
func (a *decodeAhead) get(i int) *decoded {
	a.decodeTo(i + 1)
	return &a.slots[i]
}

// decodeTo makes sure the records of the poll below n are decoded: by the
// goroutine, waited for, or else here, in order.
func (a *decodeAhead) decodeTo(n int) {
	for n > a.avail {
		if !a.running {
			i := a.avail
			decodeRecord(a.dec.of(a.recs[i]), a.recs[i], &a.slots[i], a.now)
			a.avail++
			continue
		}
		m, ok := <-a.ready
		if !ok { // not reached: the goroutine hands over every slot before it closes ready
			a.running = false
			continue
		}
		a.avail = m
	}
}

// finish ends the poll: it stops the goroutine, if any, and waits for it,
// so that the next start may reuse the slots. Nothing refers to the poll's
// records after that (dead-letter and late records are copies), so they
// are recycled: their slices go back to the pool the client decoded them
// into (recordpool.go).
func (a *decodeAhead) finish() {
	if a.running {
		close(a.stop)
		for range a.ready {
		}
		a.running = false
	}
	// Do not keep the poll's records alive until the next one.
	for i, r := range a.recs {
		a.slots[i].ev.Key, a.slots[i].ev.Source, a.slots[i].err = "", nil, nil
		r.Recycle()
	}
	clear(a.recs)
}
