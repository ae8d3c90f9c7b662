package windowing_test

import (
	"flag"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

var sessionSeeds = flag.Int("session-seeds", 10000, "random cases of TestSessionEarlyTriggersAcrossMerges")

// refSession is a session of refTriggers, the reference of early triggers
// written from docs/SEMANTICS.md (Triggers) rather than from the engine.
type refSession struct {
	start, end int64
	pending    int64 // records not yet in a pane
	armed      bool  // an `every` timer runs...
	timer      int64 // ...and comes due here: d after the arrival of the first of pending
	index      uint32
}

// refTriggers follows the contract's words for one key's open sessions
// under discarding panes: `count: n` fires when n records not yet in a pane
// have arrived; `every: d` fires d after the arrival of the first record
// not yet in a pane. A merged session holds the records of all it merged:
// its pending records add up and its timer is that of the earliest of them.
type refTriggers struct {
	gap, every, count int64
	sessions          []refSession
	panes             []string
}

func (r *refTriggers) pane(s *refSession, timing string, final bool) {
	r.panes = append(r.panes, fmt.Sprintf("[%d,%d) %s %d n=%d final=%v", s.start, s.end, timing, s.index, s.pending, final))
	s.pending, s.armed = 0, false
	s.index++
}

func (r *refTriggers) record(t, now int64) {
	merged := refSession{start: t, end: t + r.gap}
	keep := r.sessions[:0:0]
	for _, s := range r.sessions {
		if s.start < merged.end && merged.start < s.end {
			merged.start, merged.end = min(merged.start, s.start), max(merged.end, s.end)
			merged.pending += s.pending
			merged.index = max(merged.index, s.index)
			if s.armed && (!merged.armed || s.timer < merged.timer) {
				merged.armed, merged.timer = true, s.timer
			}
			continue
		}
		keep = append(keep, s)
	}
	merged.pending++
	if r.every > 0 && !merged.armed {
		merged.armed, merged.timer = true, now+r.every
	}
	if r.count > 0 && merged.pending >= r.count {
		r.pane(&merged, "EARLY", false)
	}
	r.sessions = append(keep, merged)
}

func (r *refTriggers) tick(now int64) {
	for i := range r.sessions {
		if s := &r.sessions[i]; s.armed && s.timer <= now {
			r.pane(s, "EARLY", false)
		}
	}
}

func (r *refTriggers) finish() {
	for i := range r.sessions {
		r.pane(&r.sessions[i], "ON_TIME", true)
	}
}

type paneText struct{ panes []string }

func (c *paneText) Pane(p *windowing.Pane) error {
	c.panes = append(c.panes, fmt.Sprintf("[%d,%d) %s %d n=%d final=%v", p.Start, p.End, p.Timing, p.Index, p.Values[0].Int, p.Final))
	return nil
}

func (c *paneText) Dropped(*windowing.Event, windowing.DropReason) error { return nil }

// TestSessionEarlyTriggersAcrossMerges: random session streams of one key,
// with processing time moving between records and merges of open sessions,
// give the EARLY panes refTriggers names, step by step (issue 48: a merge
// re-armed the `every` timer instead of keeping the earliest one). The
// frontier stays behind every window until the end of input, so only the
// early triggers fire before it.
func TestSessionEarlyTriggersAcrossMerges(t *testing.T) {
	n := *sessionSeeds
	if testing.Short() {
		n = min(n, 1000)
	}
	for seed := int64(1); seed <= int64(n); seed++ {
		rng := rand.New(rand.NewSource(seed))
		ref := &refTriggers{gap: int64(2 + rng.Intn(20))}
		switch rng.Intn(3) {
		case 0:
			ref.every = int64(1 + rng.Intn(80))
		case 1:
			ref.count = int64(2 + rng.Intn(4))
		default:
			ref.every, ref.count = int64(1+rng.Intn(80)), int64(2+rng.Intn(4))
		}
		spec := windowing.Spec{
			Window:     windowing.WindowSpec{Kind: windowing.Session, Gap: ref.gap},
			Trigger:    windowing.TriggerSpec{EarlyEvery: ref.every, EarlyCount: ref.count, OnTime: true},
			Mode:       windowing.Discarding,
			Aggregates: []windowing.AggSpec{{Name: "n", Op: windowing.Count}},
		}
		db, err := state.Open("db", state.Options{FS: vfs.NewMem()})
		if err != nil {
			t.Fatal(err)
		}
		got := &paneText{}
		wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, MaxDelay: 1 << 40, Every: 1}
		eng, err := windowing.New(spec, wm, db, got, windowing.Options{})
		if err != nil {
			t.Fatal(err)
		}
		eng.Assign(0, 0, true)
		var now int64
		var steps []string
		check := func(step string) {
			steps = append(steps, step)
			slices.Sort(got.panes)
			slices.Sort(ref.panes)
			if !slices.Equal(got.panes, ref.panes) {
				t.Fatalf("seed %d (gap %d, every %d, count %d)\nsteps:\n  %s\nengine: %q\nreference: %q",
					seed, ref.gap, ref.every, ref.count, joinSteps(steps), got.panes, ref.panes)
			}
			got.panes, ref.panes = got.panes[:0], ref.panes[:0]
		}
		for range 4 + rng.Intn(16) {
			if rng.Intn(3) == 0 {
				now += int64(rng.Intn(60))
				if err := eng.Tick(now); err != nil {
					t.Fatal(err)
				}
				ref.tick(now)
				check(fmt.Sprintf("clock %d", now))
				continue
			}
			ts := int64(rng.Intn(60))
			ev := windowing.Event{Key: "a", Time: ts, Inputs: make([]windowing.Input, 1)}
			if err := eng.Record(&ev, now); err != nil {
				t.Fatal(err)
			}
			ref.record(ts, now)
			check(fmt.Sprintf("a@%d", ts))
		}
		if err := eng.Finish(); err != nil {
			t.Fatal(err)
		}
		ref.finish()
		check("end")
		db.Close()
	}
}

func joinSteps(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += "\n  "
		}
		out += x
	}
	return out
}
