package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/evolve"
	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/windowing"
)

// exampleA is testdata/example_a.yaml, as text and loaded.
func exampleA(t *testing.T) (string, *config.Config) {
	t.Helper()
	orig, err := os.ReadFile("testdata/example_a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load("testdata/example_a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(orig), cfg
}

// TestValidateAgainstState: `validate --against-state` prints the plan a
// start would follow and exits 1 when the start would be refused.
func TestValidateAgainstState(t *testing.T) {
	orig, cfg := exampleA(t)
	dir := t.TempDir()
	db, err := state.Open(filepath.Join(dir, "example-a"), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PutMeta("definition", evolve.Of(&cfg.Pipelines[0], 4).Encode()); err != nil {
		t.Fatal(err)
	}
	if err := db.Commit(true); err != nil {
		t.Fatal(err)
	}
	db.Close()

	added := writeConfig(t, strings.Replace(orig, "- {name: n, op: count}", "- {name: n, op: count}\n      - {name: s, op: sum, field: v}", 1))
	code, out, errs := runCLI(t, "", "validate", "--config", added, "--against-state", dir)
	if code != 0 || !strings.Contains(out, "compatible, applied: aggregate s") || !strings.HasSuffix(out, "OK\n") {
		t.Fatalf("aggregate added: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	resized := writeConfig(t, strings.Replace(orig, "size: 10s", "size: 20s", 1))
	code, out, errs = runCLI(t, "", "validate", "--config", resized, "--against-state", dir)
	if code != 1 || !strings.Contains(out, "incompatible: window") || !strings.Contains(out, "choices") || !strings.Contains(out, "drain") {
		t.Fatalf("window resized: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	drained := writeConfig(t, strings.Replace(orig, "size: 10s}", "size: 20s}\n    drain: {window: {type: tumbling, size: 10s}, until: \"2026-12-04T06:00:00Z\"}", 1))
	code, out, errs = runCLI(t, "", "validate", "--config", drained, "--against-state", dir)
	if code != 0 || !strings.Contains(out, "compatible, by rule: window") || !strings.Contains(out, "drained: records before 2026-12-04T06:00:00Z go to the old windows") {
		t.Fatalf("window resized with a drain: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestValidateAgainstStateDrainCut: `validate --against-state` also fails
// where the plan is accepted but the engine refuses the start: here a
// drain whose cut is not after the records the state has read. Before, it
// printed OK, and the deploy it was to stop (the Helm chart's init
// container) crash-looped on the refusal instead.
func TestValidateAgainstStateDrainCut(t *testing.T) {
	orig, cfg := exampleA(t)
	p := &cfg.Pipelines[0]
	dir := t.TempDir()
	db, err := state.Open(filepath.Join(dir, p.Name), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The state has read a record at 07:00.
	eng, err := windowing.New(p.Spec, p.Watermark, db, noPanes{}, windowing.Options{ShardByPartition: true})
	if err != nil {
		t.Fatal(err)
	}
	eng.Assign(0, 0, true)
	at := time.Date(2026, 12, 4, 7, 0, 0, 0, time.UTC).UnixMilli()
	if err := eng.Record(&windowing.Event{Partition: 0, Key: "k", Time: at, Inputs: make([]windowing.Input, len(p.Spec.Aggregates))}, 0); err != nil {
		t.Fatal(err)
	}
	if err := db.PutMeta("definition", evolve.Of(p, 4).Encode()); err != nil {
		t.Fatal(err)
	}
	if err := eng.Checkpoint(true); err != nil {
		t.Fatal(err)
	}
	db.Close()

	for _, c := range []struct {
		until string
		ok    bool
	}{
		{"2026-12-04T06:00:00Z", false}, // before the record read
		{"2026-12-04T08:00:00Z", true},
	} {
		drained := writeConfig(t, strings.Replace(orig, "size: 10s}", "size: 20s}\n    drain: {window: {type: tumbling, size: 10s}, until: \""+c.until+"\"}", 1))
		code, out, errs := runCLI(t, "", "validate", "--config", drained, "--against-state", dir)
		if c.ok {
			if code != 0 || !strings.HasSuffix(out, "OK\n") {
				t.Fatalf("drain until %s: exit %d, stdout %q, stderr %q; want OK", c.until, code, out, errs)
			}
			continue
		}
		if code != 1 || !strings.Contains(out, "a start would be refused") || !strings.Contains(out, "is not after every record already read") {
			t.Fatalf("drain until %s: exit %d, stdout %q, stderr %q; want the engine's refusal", c.until, code, out, errs)
		}
	}

	// Under exactly_once a start after an unclean stop discards the state
	// (it restores from the changelog): its frontier refuses nothing. A
	// clean stop's state is what the start runs on.
	early := strings.Replace(orig, "size: 10s}", "size: 20s}\n    drain: {window: {type: tumbling, size: 10s}, until: \"2026-12-04T06:00:00Z\"}", 1)
	eos := writeConfig(t, strings.Replace(early, "    output: {topic: events-windows}", "    output: {topic: events-windows}\n    delivery: exactly_once", 1))
	code, out, errs := runCLI(t, "", "validate", "--config", eos, "--against-state", dir)
	if code != 0 || !strings.HasSuffix(out, "OK\n") {
		t.Fatalf("exactly_once, unclean stop: exit %d, stdout %q, stderr %q; want OK", code, out, errs)
	}
	if db, err = state.Open(filepath.Join(dir, p.Name), state.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := db.PutMeta("clean", []byte{1}); err != nil {
		t.Fatal(err)
	}
	if err := db.Commit(true); err != nil {
		t.Fatal(err)
	}
	db.Close()
	code, out, errs = runCLI(t, "", "validate", "--config", eos, "--against-state", dir)
	if code != 1 || !strings.Contains(out, "is not after every record already read") {
		t.Fatalf("exactly_once, clean stop: exit %d, stdout %q, stderr %q; want the engine's refusal", code, out, errs)
	}
}
