package evolve_test

import (
	"strings"
	"testing"

	"github.com/windowd/windowd/evolve"
	"github.com/windowd/windowd/windowing"
)

// TestStartWithoutStateOnALoggedChangelog: a start on an empty state
// directory whose pipeline's changelog holds state (logged: its partition
// count before it grew with the input) plans as a start on the state
// would: the configured drain stays, and an input grown since the
// changelog was keyed is the growth rule's (refused off a multiple). With
// nothing logged the start is a fresh pipeline's.
func TestStartWithoutStateOnALoggedChangelog(t *testing.T) {
	drain := drained(tumbling(20, agg("n", windowing.Count)), 20)
	for _, c := range []struct {
		name            string
		d               *evolve.Definition
		logged          int32
		refused         string
		drain           bool
		grewFrom, idsAt int32
	}{
		{"fresh pipeline, drain configured", evolve.Of(drain, 2), 0, "", false, 0, 2},
		{"changelog holds state, drain configured", evolve.Of(drain, 2), 2, "", true, 0, 2},
		{"fresh pipeline of 4 partitions", evolve.Of(tumbling(10, agg("n", windowing.Count)), 4), 0, "", false, 0, 4},
		{"changelog of 2, input of 4", evolve.Of(tumbling(10, agg("n", windowing.Count)), 4), 2, "", false, 2, 2},
		{"changelog of 2, input of 3", evolve.Of(tumbling(10, agg("n", windowing.Count)), 3), 2, "incompatible: input partitions: 2 → 3", false, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, next, ev, err := evolve.Start(nil, false, c.logged, c.d, "state")
			if c.refused != "" {
				if err == nil || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("start: %v, want a refusal with %q", err, c.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (next.Drain != nil) != c.drain || (ev.Drain != nil) != c.drain {
				t.Errorf("drain in the definition %v, in the engine's evolution %v; want %v", next.Drain != nil, ev.Drain != nil, c.drain)
			}
			if next.GrewFrom != c.grewFrom || next.PaneIDPartitionsFrom() != c.idsAt {
				t.Errorf("grew from %d, pane ids with a partition from %d; want %d and %d", next.GrewFrom, next.PaneIDPartitionsFrom(), c.grewFrom, c.idsAt)
			}
		})
	}
}

// TestAdoptEarlierFirstGrowth: the input grew 2 → 4 and, while stopped
// with its state directory gone, 4 → 8. The start knows only the
// changelog's 4; the restored definition knows the count before the first
// growth, 2, from which pane ids carry their partition.
func TestAdoptEarlierFirstGrowth(t *testing.T) {
	p := tumbling(10, agg("n", windowing.Count))
	_, d, _, err := evolve.Start(nil, false, 4, evolve.Of(p, 8), "state")
	if err != nil {
		t.Fatal(err)
	}
	if d.PaneIDPartitionsFrom() != 4 {
		t.Fatalf("before the restore: pane ids with a partition from %d, want 4", d.PaneIDPartitionsFrom())
	}
	r := evolve.Of(p, 2)
	if err := r.Grow(4); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Adopt(r, "changelog"); err != nil {
		t.Fatal(err)
	}
	if d.GrewFrom != 2 || d.PaneIDPartitionsFrom() != 2 {
		t.Fatalf("after the restore: grew from %d, pane ids with a partition from %d; want 2 and 2", d.GrewFrom, d.PaneIDPartitionsFrom())
	}
}
