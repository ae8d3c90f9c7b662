package replay

import (
	"sync/atomic"

	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// Live is what a replay publishes while it runs, for a status line
// (`windowd replay` on a terminal, docs/OPERATIONS.md, Replay): read from
// another goroutine. Frontier is watermark.MinTime before the first.
type Live struct {
	Lines, Records, Panes, DeadLetters, Frontier atomic.Int64
}

// liveEvery is how many input lines pass between two publications: the
// loads and stores are off the per-record path.
const liveEvery = 1024

// publish stores the replay's counts in r.opts.Live: sum the lines',
// f and st the frontier and the engines' counts (a record without a
// representable window is a dead letter too).
func (r *runner) publish(sum *Summary, f int64, st windowing.Stats) {
	l := r.opts.Live
	l.Lines.Store(sum.Lines)
	l.Records.Store(sum.Records)
	l.Panes.Store(st.Panes[windowing.Early] + st.Panes[windowing.OnTime] + st.Panes[windowing.Late])
	l.DeadLetters.Store(sum.DeadLetters + st.OutOfRange)
	l.Frontier.Store(f)
}

// NewLive returns a Live with no frontier yet.
func NewLive() *Live {
	l := &Live{}
	l.Frontier.Store(watermark.MinTime)
	return l
}
