package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/evolve"
	"github.com/windowd/windowd/state"
)

// TestValidateAgainstState: `validate --against-state` prints the plan a
// start would follow and exits 1 when the start would be refused.
func TestValidateAgainstState(t *testing.T) {
	orig, err := os.ReadFile("testdata/example_a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load("testdata/example_a.yaml")
	if err != nil {
		t.Fatal(err)
	}
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

	added := writeConfig(t, strings.Replace(string(orig), "- {name: n, op: count}", "- {name: n, op: count}\n      - {name: s, op: sum, field: v}", 1))
	code, out, errs := runCLI(t, "", "validate", "--config", added, "--against-state", dir)
	if code != 0 || !strings.Contains(out, "compatible, applied: aggregate s") || !strings.HasSuffix(out, "OK\n") {
		t.Fatalf("aggregate added: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	resized := writeConfig(t, strings.Replace(string(orig), "size: 10s", "size: 20s", 1))
	code, out, errs = runCLI(t, "", "validate", "--config", resized, "--against-state", dir)
	if code != 1 || !strings.Contains(out, "incompatible: window") || !strings.Contains(out, "choices") || !strings.Contains(out, "drain") {
		t.Fatalf("window resized: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	drained := writeConfig(t, strings.Replace(string(orig), "size: 10s}", "size: 20s}\n    drain: {window: {type: tumbling, size: 10s}, until: \"2026-12-04T06:00:00Z\"}", 1))
	code, out, errs = runCLI(t, "", "validate", "--config", drained, "--against-state", dir)
	if code != 0 || !strings.Contains(out, "compatible, by rule: window") || !strings.Contains(out, "drained: records before 2026-12-04T06:00:00Z go to the old windows") {
		t.Fatalf("window resized with a drain: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}
