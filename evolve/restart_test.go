package evolve_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/evolve"
	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// pane is what a test keeps of an emitted pane.
type pane struct {
	id      string
	timing  windowing.Timing
	final   bool
	mode    windowing.Mode
	retract bool
	values  map[string]string
	partial string
}

// node runs one pipeline definition on a state directory, as one start
// of the service does: plan, engine, store the definition; stop commits.
type node struct {
	t     *testing.T
	fs    vfs.FS
	p     *config.Pipeline
	db    *state.DB
	eng   *windowing.Engine
	panes *[]pane
	drops *int
}

func (n *node) Pane(p *windowing.Pane) error {
	v := map[string]string{}
	for i, a := range n.p.Spec.Aggregates {
		v[a.Name] = string(windowing.AppendValue(nil, p.Values[i]))
	}
	var partial []string
	for i, a := range n.p.Spec.Aggregates {
		if p.Partial&(1<<uint(i)) != 0 {
			partial = append(partial, a.Name)
		}
	}
	*n.panes = append(*n.panes, pane{id: p.ID(), timing: p.Timing, final: p.Final, mode: p.Mode, retract: p.Retraction, values: v, partial: strings.Join(partial, ",")})
	return nil
}

func (n *node) Dropped(*windowing.Event, windowing.DropReason) error { *n.drops++; return nil }

// start opens the state in fs under p; the error is the plan's or the
// engine's refusal.
func start(t *testing.T, fs vfs.FS, p *config.Pipeline, panes *[]pane, drops *int) (*node, error) {
	t.Helper()
	db, err := state.Open("state", state.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := db.GetMeta("definition")
	if err != nil {
		t.Fatal(err)
	}
	stored = append([]byte(nil), stored...)
	if len(stored) == 0 {
		stored = nil
	}
	shards, _ := db.Shards()
	_, next, ev, err := evolve.Start(stored, len(shards) > 0, 0, evolve.Of(p, 2), "state")
	if err != nil {
		db.Close()
		return nil, err
	}
	n := &node{t: t, fs: fs, p: p, db: db, panes: panes, drops: drops}
	wm := watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, Every: 1}
	n.eng, err = windowing.New(p.Spec, wm, db, n, windowing.Options{Evolve: ev})
	if err != nil {
		db.Close()
		return nil, err // a drain the engine cannot continue
	}
	n.eng.Assign(0, 0, true)
	n.eng.Assign(1, 0, true)
	next.Seal(n.eng.Sealed())
	if err := db.PutMeta("definition", next.Encode()); err != nil {
		t.Fatal(err)
	}
	return n, nil
}

// rec processes a record of key at time ts with value v on partition 0.
func (n *node) rec(key string, ts int64, v float64) {
	n.t.Helper()
	in := make([]windowing.Input, len(n.p.Spec.Aggregates))
	for i := range in {
		in[i].Num = v
	}
	if err := n.eng.Record(&windowing.Event{Partition: 0, Key: key, Time: ts, Inputs: in}, 0); err != nil {
		n.t.Fatal(err)
	}
}

// recAt processes record index i (its offset) of key at ts with value v
// on partition part.
func (n *node) recAt(part int32, key string, ts int64, v float64, i int) {
	n.t.Helper()
	in := make([]windowing.Input, len(n.p.Spec.Aggregates))
	for j := range in {
		in[j].Num = v
	}
	if err := n.eng.Record(&windowing.Event{Partition: part, Offset: int64(i), Key: key, Time: ts, Inputs: in}, 0); err != nil {
		n.t.Fatal(err)
	}
}

// wm moves both partitions' watermarks, and so the frontier, to ts.
func (n *node) wm(ts int64) {
	n.t.Helper()
	for p := int32(0); p < 2; p++ {
		if err := n.eng.Record(&windowing.Event{Partition: p, Key: "~clock", Time: ts, Inputs: make([]windowing.Input, len(n.p.Spec.Aggregates))}, 0); err != nil {
			n.t.Fatal(err)
		}
	}
}

func (n *node) stop() {
	n.t.Helper()
	if err := n.eng.Checkpoint(true); err != nil {
		n.t.Fatal(err)
	}
	if err := n.db.Close(); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) finish() {
	n.t.Helper()
	if err := n.eng.Finish(); err != nil {
		n.t.Fatal(err)
	}
	n.stop()
}

func agg(name string, op windowing.AggOp) windowing.AggSpec {
	a := windowing.AggSpec{Name: name, Op: op}
	if op != windowing.Count {
		a.Field = "v"
	}
	return a
}

func tumbling(size int64, aggs ...windowing.AggSpec) *config.Pipeline {
	return &config.Pipeline{Name: "t", Spec: windowing.Spec{
		Window:     windowing.WindowSpec{Kind: windowing.Tumbling, Size: size, Hop: size},
		Trigger:    windowing.TriggerSpec{OnTime: true, Late: true},
		Aggregates: aggs,
	}}
}

// finals returns the final panes of key other than the clock's.
func finals(ps []pane) []pane {
	var out []pane
	for _, p := range ps {
		if p.final && !strings.HasPrefix(p.id, "~clock") {
			out = append(out, p)
		}
	}
	return out
}

func fmtPanes(ps []pane) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%s %v final=%t %v partial=%q\n", p.id, p.timing, p.final, p.values, p.partial)
	}
	return b.String()
}
