package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestToCents(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "318.47": 31847, "225.4": 22540, "7": 700, "-1.05": -105, "0.01": 1} {
		got, err := toCents(in)
		if err != nil || got != want {
			t.Errorf("toCents(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := toCents("1.234"); err == nil {
		t.Error("toCents(1.234): no error for three decimals")
	}
}

// The batch side and both pane formats: windowd's (non-final panes
// skipped) and the peers'; the flush key is left out everywhere.
func TestComputeAndReadPanes(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "p0.tsv")
	write(t, in, "u1\t{\"user\":\"u1\",\"ts\":1000,\"x\":0.1}\n"+
		"u1\t{\"user\":\"u1\",\"ts\":9999,\"x\":0.2}\n"+
		"u2\t{\"user\":\"u2\",\"ts\":10000,\"x\":5}\n"+
		"~flush-0\t{\"user\":\"~flush\",\"ts\":99999999,\"x\":0}\n")
	batch, records := compute([]string{in}, 10000, "~flush")
	if records != 3 || len(batch) != 2 {
		t.Fatalf("compute: %d records, %d panes; want 3, 2", records, len(batch))
	}
	if a := batch[paneKey{"u1", 0, 10000}]; a.count != 2 || a.sum != 0.3 {
		t.Errorf("u1 [0,10000): %+v", a)
	}

	w := filepath.Join(dir, "w.jsonl")
	write(t, w, `{"key":"u1","window":{"start":0,"end":10000},"pane":{"timing":"EARLY","index":0,"final":false},"retraction":false,"aggregates":{"n":1,"total":0.1}}
{"key":"u1","window":{"start":0,"end":10000},"pane":{"timing":"ON_TIME","index":1,"final":true},"retraction":false,"aggregates":{"n":2,"total":0.30000000000000004}}
{"key":"u2","window":{"start":10000,"end":20000},"pane":{"timing":"ON_TIME","index":0,"final":true},"retraction":false,"aggregates":{"n":1,"total":5}}
`)
	out, err := readPanes(w, "n", "total", "~flush")
	if err != nil || len(out.panes) != 2 || out.dups != 0 || out.nonfin != 1 {
		t.Fatalf("windowd panes: %v, %d dups, %d non-final, %v", out.panes, out.dups, out.nonfin, err)
	}
	for k, want := range batch {
		if !equal(out.panes[k], want, 1e-9) {
			t.Errorf("windowd %v: %+v, batch %+v", k, out.panes[k], want)
		}
	}
	if v := judge(batch, out, 1e-9, true); !v.ok || v.agree != 2 {
		t.Errorf("windowd: %+v", v)
	}

	p := filepath.Join(dir, "p.jsonl")
	write(t, p, `{"key":"u1","start":0,"end":10000,"count":2,"sum":0.3}
{"key":"u2","start":10000,"end":20000,"count":1,"sum":5.0}
{"key":"u2","start":10000,"end":20000,"count":1,"sum":5.0}
{"key":"~flush-0","start":99990000,"end":100000000,"count":1,"sum":0.0}
`)
	out, err = readPanes(p, "n", "total", "~flush")
	if err != nil || len(out.panes) != 2 || out.dups != 1 || len(out.conflicts) != 0 {
		t.Fatalf("peer panes: %v, %d dups, %v", out.panes, out.dups, err)
	}
	// A duplicate is fine at least once, a disagreement under exactly once.
	if v := judge(batch, out, 1e-9, false); !v.ok || v.agree != 2 {
		t.Errorf("at least once: %+v", v)
	}
	if v := judge(batch, out, 1e-9, true); v.ok || v.agree != 2 || len(v.examples) != 1 {
		t.Errorf("exactly once: %+v", v)
	}

	// A final pane written twice with different values differs, though
	// its last copy is right.
	c := filepath.Join(dir, "c.jsonl")
	write(t, c, `{"key":"u1","start":0,"end":10000,"count":1,"sum":0.1}
{"key":"u1","start":0,"end":10000,"count":2,"sum":0.3}
{"key":"u2","start":10000,"end":20000,"count":1,"sum":5.0}
`)
	out, err = readPanes(c, "n", "total", "~flush")
	if err != nil || out.dups != 1 || len(out.conflicts) != 1 {
		t.Fatalf("conflicting panes: %+v, %v", out, err)
	}
	if v := judge(batch, out, 1e-9, false); v.ok || v.agree != 1 || v.differ != 1 {
		t.Errorf("conflicting panes: %+v", v)
	}
	if equal(agg{2, 0.3}, agg{2, 0.3001}, 1e-9) || equal(agg{2, 0.3}, agg{3, 0.3}, 1e-9) {
		t.Error("equal: a different sum or count passed")
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
