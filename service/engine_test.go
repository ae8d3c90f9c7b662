package service

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// An engine made again after the start (a rollback's) continues the drain
// the start began: its state has read records past the cut since, which
// only the start's check is about. Before, the drain check ran again on
// that state and refused, and the pipeline stopped at its first rollback
// after a window change.
func TestDrainContinuesAfterRollback(t *testing.T) {
	cfg, err := config.Parse("d.yaml", []byte(`kafka: {brokers: embedded}
pipelines:
  - name: d
    input: {topic: in}
    key: {field: user}
    timestamp: {field: ts}
    watermark: {max_delay: 0s}
    window: {type: tumbling, size: 20s}
    aggregates: [{name: n, op: count}]
    output: {topic: out}
`))
	if err != nil {
		t.Fatal(err)
	}
	db, err := state.Open("s", state.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pc := &cfg.Pipelines[0]
	p := &pipeline{setup: setup{cfg: pc, log: zap.NewNop()}}
	p.mu.store = &trackingStore{DB: db, dirty: map[int32]map[string][]byte{}}
	p.engOpts = windowing.Options{ShardByPartition: true, Evolve: &windowing.Evolution{Sealed: watermark.MinTime, DrainBegins: true,
		Drain: &windowing.Drain{Window: windowing.WindowSpec{Kind: windowing.Tumbling, Size: 10_000, Hop: 10_000}, Cut: 40_000, End: 40_000}}}
	eng, err := p.newEngineLocked()
	if err != nil {
		t.Fatal(err)
	}
	eng.Assign(0, 0, true)
	ev := windowing.Event{Key: "a", Time: 45_000, Inputs: make([]windowing.Input, 1)}
	if err := eng.Record(&ev, 0); err != nil {
		t.Fatal(err)
	}
	if err := eng.Checkpoint(true); err != nil {
		t.Fatal(err)
	}
	if _, err := p.newEngineLocked(); err != nil {
		t.Fatalf("the engine made again after a record past the cut: %v", err)
	}
}
