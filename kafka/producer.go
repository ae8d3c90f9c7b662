package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Producer produces records asynchronously through one idempotent client
// (acks=all) and remembers the first failure. Flush returns only when
// every record produced so far is acknowledged, or the first error any of
// them met: a commit cycle flushes before it commits offsets, so nothing
// is committed whose output is not durable.
type Producer struct {
	cl *kgo.Client

	mu  sync.Mutex
	err error
}

// NewProducer wraps a client configured for idempotent production.
func NewProducer(cl *kgo.Client) *Producer { return &Producer{cl: cl} }

// Produce sends r without waiting for its acknowledgement.
func (p *Producer) Produce(ctx context.Context, r *kgo.Record) {
	p.cl.Produce(ctx, r, p.done)
}

func (p *Producer) done(r *kgo.Record, err error) {
	if err == nil || errors.Is(err, kgo.ErrAborting) {
		// ErrAborting: the record was still buffered when its
		// transaction aborted (exactly_once); it is rolled back with the
		// transaction, which the pipeline redoes, and no output failed.
		return
	}
	p.mu.Lock()
	if p.err == nil {
		p.err = errors.Join(errors.New("produce to "+r.Topic+" failed"), err)
	}
	p.mu.Unlock()
}

// Flush waits until every record produced so far is acknowledged and
// returns the first production error, if any (the error stays: a producer
// that failed must not be used for a commit again).
func (p *Producer) Flush(ctx context.Context) error {
	if err := p.cl.Flush(ctx); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Batch is the outcome of the records of one commit cycle produced with
// ProduceIn (the changelog's): the first failure, the offset of the last
// acknowledged record per partition among those Track selects, and the
// lowest offset acknowledged per partition.
type Batch struct {
	what  string // names the records in the error
	track func(*kgo.Record) bool

	mu      sync.Mutex
	err     error
	offsets map[int32]int64
	first   map[int32]int64
}

// NewBatch returns an empty batch of records named what (e.g. "changelog");
// track selects the records whose offsets Offsets reports.
func NewBatch(what string, track func(*kgo.Record) bool) *Batch {
	return &Batch{what: what, track: track, offsets: map[int32]int64{}, first: map[int32]int64{}}
}

// ProduceIn sends r without waiting, its outcome kept in b (not in p's
// first failure: the caller joins b's after Flush).
func (p *Producer) ProduceIn(ctx context.Context, r *kgo.Record, b *Batch) {
	p.cl.Produce(ctx, r, b.done)
}

func (b *Batch) done(r *kgo.Record, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		if b.err == nil {
			b.err = fmt.Errorf("%s %s[%d]: %w", b.what, r.Topic, r.Partition, err)
		}
		return
	}
	if b.track != nil && b.track(r) {
		b.offsets[r.Partition] = r.Offset
	}
	if f, ok := b.first[r.Partition]; !ok || r.Offset < f {
		b.first[r.Partition] = r.Offset
	}
}

// Fail records err as the batch's failure when it has none (a record that
// could not even be built).
func (b *Batch) Fail(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = err
	}
}

// Err is the batch's first failure; read it after the producer's Flush.
func (b *Batch) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// Offsets are the tracked records' offsets by partition; read them after
// the producer's Flush.
func (b *Batch) Offsets() map[int32]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.offsets
}

// First is the lowest offset acknowledged in partition part, if any; read
// it after the producer's Flush.
func (b *Batch) First(part int32) (int64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	off, ok := b.first[part]
	return off, ok
}
