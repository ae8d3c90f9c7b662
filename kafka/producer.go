package kafka

import (
	"context"
	"errors"
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
