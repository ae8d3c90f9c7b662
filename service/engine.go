package service

import (
	"time"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/sink"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// engine is what a pipeline runs its records through: a windowing.Engine
// (windows, and panes for the pane writer), or, for a join, a
// windowing.Joiner (rows, produced at once: joinRows). Both keep their
// state in the pipeline's trackingStore, so the changelog, restores,
// standbys and exactly_once treat them alike. The poll loop owns it
// (loopState).
type engine interface {
	Record(ev *windowing.Event, now int64) error
	Skip(ev *windowing.Event, now int64) error
	Tick(now int64) error
	Advance() error
	FireDue() error
	Frontier() int64
	Watermarks() *watermark.Frontier
	Complete(partitions []int32) (int64, bool)
	Stats() windowing.Stats
	OpenWindows() int64
	CacheBytes() int
	Assign(p int32, now int64, caughtUp bool)
	Revoke(p int32)
	CatchUp(p int32)
	ReleaseTimers(p int32) error
	Flush() error
	NeedsCheckpoint() bool
	Checkpoint(sync bool) error
	RestoreKey(p int32, key string, value []byte) error
	RestoreNewKey(p int32, key string, value []byte) error
	DropShard(p int32) error
	Drained() bool
	Sealed() int64
	Seal(end int64)
	Rearm(prior, f int64) error
	SetPartitionIDsFrom(from int32)
	AddLayouts(ls map[uint32]*windowing.Layout) error
	FinishLayouts(p int32) error
	Reader() *windowing.Reader
}

// newEngineLocked makes the pipeline's engine on its store: at start, and
// again after a rollback discarded the uncommitted state.
func (p *pipeline) newEngineLocked() (engine, error) {
	if j := p.cfg.Join; j != nil {
		rows := &joinRows{p: p, w: sink.NewJoinRows(p.cfg.Inputs[j.Left].As, p.cfg.Inputs[j.Right].As, j.Interval)}
		return windowing.NewJoiner(*j, p.cfg.Watermark, rows, windowing.JoinOptions{
			ShardByPartition: true, Shards: p.engOpts.Shards, Store: p.mu.store, MaxPendingBytes: p.engOpts.MaxPendingBytes, Evolve: p.engOpts.Evolve})
	}
	eng, err := windowing.New(p.cfg.Spec, p.cfg.Watermark, p.mu.store, p, p.engOpts)
	if ev := p.engOpts.Evolve; err == nil && ev != nil && ev.DrainBegins {
		// The start's drain passed its check against the state read
		// before it; an engine made again (a rollback's) continues that
		// drain, on state that has read past the cut since.
		c := *ev
		c.DrainBegins = false
		p.engOpts.Evolve = &c
	}
	return eng, err
}

// joinRows is a join's windowing.JoinEmitter: each row is produced to the
// output topic as it comes (in the transaction, under exactly_once), and a
// dropped record goes where a pane pipeline's goes (Dropped). The Joiner
// is the loop's: its calls run holding mu.
type joinRows struct {
	p *pipeline
	w *sink.JoinRows
}

// Row implements windowing.JoinEmitter.
func (e *joinRows) Row(r *windowing.JoinRow) error {
	p := e.p
	rec := e.w.Record(p.cfg.OutputTopic, r)
	if p.cfg.OutputTimestamp == config.EmitTime {
		rec.Timestamp = time.Time{} // the producer stamps it with the time it is produced
	}
	p.produceLocked(rec)
	if !r.Retraction {
		p.paneCounter(r.Timing).Inc()
	}
	if p.stdout != nil {
		p.stdout.writeLine(rec.Value)
	}
	return nil
}

// Dropped implements windowing.JoinEmitter.
func (e *joinRows) Dropped(ev *windowing.Event, reason windowing.DropReason, _ windowing.Span) error {
	return e.p.Dropped(ev, reason)
}
