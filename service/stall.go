package service

import (
	"context"
	"fmt"
	"time"

	"github.com/windowd/windowd/kafka"
)

// stall is what a watcher (restorewatch.go, offsetwatch.go) keeps of one
// wait: when it last asked the broker why, the answer, and the last answer
// it logged. A cause is logged once, however long it lasts.
type stall struct {
	asked     time.Time
	why, said string
}

// update asks again (ask) once every has passed since it last did, and
// hands a new answer to log (lost: a transaction the broker lost). It
// returns the last answer; "" when ctx ended before the first.
func (s *stall) update(ctx context.Context, now time.Time, every time.Duration, ask func() (why string, lost bool),
	log func(why string, lost bool)) string {
	if now.Sub(s.asked) >= every {
		s.asked = now
		why, lost := ask()
		if ctx.Err() != nil {
			return s.why
		}
		s.why = why
		if why != s.said {
			s.said = why
			log(why, lost)
		}
	}
	return s.why
}

// describeOpen lists the first shown of open, and how many more; lost:
// one of them (shown or not) is a transaction the broker lost.
func describeOpen(open []kafka.OpenTxn, shown int) (text string, lost bool) {
	lostShown := false
	for i, t := range open {
		lost = lost || t.Lost
		if i < shown {
			if i > 0 {
				text += "; "
			}
			text += t.String()
			lostShown = lostShown || t.Lost
		}
	}
	if len(open) > shown {
		text += fmt.Sprintf("; and %d more open there", len(open)-shown)
	}
	if lost && !lostShown {
		text += "; one of them the broker left hanging"
	}
	return text, lost
}
