package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/windowd/windowd/state"
)

func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errs bytes.Buffer
	code = run(args, strings.NewReader(stdin), &out, &errs)
	return code, out.String(), errs.String()
}

// writeConfig writes a configuration file in a temporary directory and
// returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestValidateListsEveryMistake(t *testing.T) {
	code, out, errs := runCLI(t, "", "validate", "--config", "testdata/three_mistakes.yaml")
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q; want exit 1 and no output", code, out)
	}
	lines := strings.Split(strings.TrimRight(errs, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 error lines, got %d:\n%s", len(lines), errs)
	}
	pos := regexp.MustCompile(`^testdata/three_mistakes\.yaml:(\d+):(\d+): `)
	wantLines := []string{"7", "8", "10"}
	for i, l := range lines {
		m := pos.FindStringSubmatch(l)
		if m == nil || m[1] != wantLines[i] {
			t.Errorf("line %d = %q, want testdata/three_mistakes.yaml:%s:col: ...", i, l, wantLines[i])
		}
	}
}

func TestValidateOK(t *testing.T) {
	code, out, errs := runCLI(t, "", "validate", "--config", "testdata/example_a.yaml")
	if code != 0 || out != "OK\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestReplayExampleA checks replay's stdout byte for byte against the pane
// JSON of docs/SEMANTICS.md, Output, for worked example A (Worked examples).
func TestReplayExampleA(t *testing.T) {
	want, err := os.ReadFile("testdata/example_a.out")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--input", "testdata/example_a.jsonl"},
		{"--input", "testdata/example_a.jsonl", "--partitions", "1", "--state-dir", filepath.Join(t.TempDir(), "state")},
		{"--input", "testdata/example_a.jsonl", "--workers", "0"},
		{"--input", "testdata/example_a.jsonl", "--workers", "3"},
	} {
		code, out, errs := runCLI(t, "", append([]string{"replay", "--config", "testdata/example_a.yaml"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		if out != string(want) {
			t.Fatalf("%v: stdout differs\n--- got ---\n%s--- want ---\n%s", args, out, want)
		}
		if !strings.Contains(errs, `{"summary":{"lines":5,"records":5,"clocks":0,"dead_letters":0,"filtered":0,"late_dropped":0,"panes":6,"retractions":0}}`) {
			t.Fatalf("%v: summary missing from stderr: %s", args, errs)
		}
	}
}

// TestReplayConfigWorkers checks that a pipeline's workers set replay's
// default --workers (docs/OPERATIONS.md, Workers), and that the flag
// overrides it: the output is each worker count's own order of panes.
func TestReplayConfigWorkers(t *testing.T) {
	dir := t.TempDir()
	yaml, err := os.ReadFile("testdata/example_a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	withWorkers := filepath.Join(dir, "workers.yaml")
	if err := os.WriteFile(withWorkers, bytes.Replace(yaml, []byte("    accumulation:"), []byte("    workers: 3\n    accumulation:"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	var in strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&in, `{"partition":%d,"key":"k%d","value":{"ts":%d}}`+"\n", i%2, i%97, i*50)
	}
	input := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(input, []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	replay := func(config string, extra ...string) string {
		t.Helper()
		code, out, errs := runCLI(t, "", append([]string{"replay", "--config", config, "--input", input}, extra...)...)
		if code != 0 {
			t.Fatalf("%s %v: exit %d: %s", config, extra, code, errs)
		}
		return out
	}
	one, three := replay("testdata/example_a.yaml"), replay("testdata/example_a.yaml", "--workers", "3")
	if one == three {
		t.Fatal("test input too small: 1 and 3 workers print the panes in the same order")
	}
	if got := replay(withWorkers); got != three {
		t.Error("workers: 3 in the configuration: the output is not --workers 3's")
	}
	if got := replay(withWorkers, "--workers", "1"); got != one {
		t.Error("workers: 3 and --workers 1: the output is not one worker's")
	}
}

func TestReplayStdin(t *testing.T) {
	in, err := os.ReadFile("testdata/example_a.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile("testdata/example_a.out")
	for _, extra := range [][]string{nil, {"--partitions", "1"}} {
		code, out, errs := runCLI(t, string(in), append([]string{"replay", "--config", "testdata/example_a.yaml", "--input", "-"}, extra...)...)
		if code != 0 || out != string(want) {
			t.Fatalf("%v: exit %d, stderr %s, stdout\n%s", extra, code, errs, out)
		}
	}
}

func TestReplayFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unreadable input", []string{"replay", "--config", "testdata/example_a.yaml", "--input", "testdata/missing.jsonl"},
			"windowd replay: open testdata/missing.jsonl: no such file or directory\n"},
		{"bad config", []string{"replay", "--config", "testdata/three_mistakes.yaml", "--input", "testdata/example_a.jsonl"},
			"testdata/three_mistakes.yaml:7:"},
		{"missing config file", []string{"replay", "--config", "testdata/nope.yaml"}, "nope.yaml"},
		{"unknown pipeline", []string{"replay", "--config", "testdata/example_a.yaml", "--pipeline", "x", "--input", "testdata/example_a.jsonl"},
			"windowd replay: testdata/example_a.yaml has no pipeline \"x\"\n"},
		{"zero partitions", []string{"replay", "--config", "testdata/example_a.yaml", "--input", "testdata/example_a.jsonl", "--partitions", "0"},
			"windowd replay: --partitions must be between 1 and 10000 (docs/OPERATIONS.md, Limits)\n"},
		{"too many partitions", []string{"replay", "--config", "testdata/example_a.yaml", "--input", "testdata/example_a.jsonl", "--partitions", "2147483647"},
			"windowd replay: --partitions must be between 1 and 10000 (docs/OPERATIONS.md, Limits)\n"},
		{"negative workers", []string{"replay", "--config", "testdata/example_a.yaml", "--input", "testdata/example_a.jsonl", "--workers", "-1"},
			"windowd replay: --workers must be between 0 (one per core) and 64\n"},
		// One message that names the path once (it was printed twice).
		{"directory as input", []string{"replay", "--config", "testdata/example_a.yaml", "--input", "testdata"},
			"windowd replay: --input testdata is a directory, not a JSON-lines file\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, "", tc.args...)
			if code == 0 || out != "" {
				t.Fatalf("exit %d, stdout %q: want a failure", code, out)
			}
			if !strings.Contains(errs, tc.want) {
				t.Fatalf("stderr %q does not contain %q", errs, tc.want)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	if code, _, errs := runCLI(t, "", "frobnicate"); code != 2 || !strings.Contains(errs, "unknown command") {
		t.Fatalf("exit %d, %q", code, errs)
	}
	if code, out, _ := runCLI(t, "", "version"); code != 0 || !strings.HasPrefix(out, "windowd ") {
		t.Fatalf("version: exit %d, %q", code, out)
	}
}

// TestMemoryLimitCountsEveryPipeline: each pipeline has its own window
// cache of state.cache_bytes and its own Pebble database, so the soft limit
// grows with the number of pipelines (it once counted one cache whatever
// the number), and a build without cgo, where Pebble's block cache and
// memtables are Go heap, counts them too.
func TestMemoryLimitCountsEveryPipeline(t *testing.T) {
	const mib = 1 << 20
	pebble := int64(0)
	if !cgoEnabled {
		pebble = state.PebbleMemoryBytes
	}
	for _, c := range []struct {
		pipelines int
		cache     int64
		want      int64
	}{
		{1, 64 * mib, 2*64*mib + pebble + 192*mib},
		{3, 64 * mib, 3*(2*64*mib+pebble) + 192*mib},
		{2, 16 * mib, 2*(2*16*mib+pebble) + 192*mib},
		{0, 64 * mib, 2*64*mib + pebble + 192*mib},
	} {
		if got := memoryLimit(c.pipelines, c.cache); got != c.want {
			t.Errorf("memoryLimit(%d, %d MiB) = %d MiB, want %d MiB", c.pipelines, c.cache/mib, got/mib, c.want/mib)
		}
	}
}

// TestGCPercent: windowd sets GOGC to gcPercent, unless GOGC is set, which
// then decides.
func TestGCPercent(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	t.Setenv("GOGC", "")
	if got := setGCPercent(); got != gcPercent {
		t.Errorf("GOGC unset: setGCPercent() = %d, want %d", got, gcPercent)
	}
	if now := debug.SetGCPercent(100); now != gcPercent {
		t.Errorf("GOGC unset: the runtime's percentage is %d, want %d", now, gcPercent)
	}
	t.Setenv("GOGC", "50")
	if got := setGCPercent(); got != -1 {
		t.Errorf("GOGC=50: setGCPercent() = %d, want -1", got)
	}
	if now := debug.SetGCPercent(100); now != 100 {
		t.Errorf("GOGC=50: setGCPercent changed the runtime's percentage to %d", now)
	}
}

func TestVersion(t *testing.T) {
	vcs := &debug.BuildInfo{Main: debug.Module{Path: "github.com/windowd/windowd", Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "9acad53d1f0e2b7c4a5d6e7f8091a2b3c4d5e6f7"},
		{Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	for _, c := range []struct {
		info *debug.BuildInfo
		want string
	}{
		{&debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0 go1.26.0"},
		{vcs, "devel 9acad53d1f0e 2026-12-01T10:00:00Z (modified) go1.26.0"},
		{&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "(devel) go1.26.0"},
		{nil, "(devel) go1.26.0"},
	} {
		if got := versionOf(c.info, "go1.26.0"); got != c.want {
			t.Errorf("versionOf = %q, want %q", got, c.want)
		}
	}
	stampedVersion = "v0.9.0-rc1"
	if code, out, _ := runCLI(t, "", "version"); code != 0 || out != "windowd v0.9.0-rc1 "+runtime.Version()+"\n" {
		t.Errorf("windowd version with a stamped version: exit %d, %q", code, out)
	}
	stampedVersion = ""
	code, out, _ := runCLI(t, "", "version")
	if code != 0 || !strings.HasPrefix(out, "windowd ") || !strings.HasSuffix(out, " "+runtime.Version()+"\n") {
		t.Errorf("windowd version: exit %d, %q: want the Go version", code, out)
	}
}

// TestVersionOfBuiltBinary builds windowd as a user would, in this clone:
// `windowd version` names the commit, not just (devel).
func TestVersionOfBuiltBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the binary")
	}
	rev, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git clone (%v): no VCS stamp to check", err)
	}
	bin := filepath.Join(t.TempDir(), "windowd")
	if out, err := exec.Command("go", "build", "-buildvcs=auto", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if meta, err := exec.Command("go", "version", "-m", bin).Output(); err != nil || !strings.Contains(string(meta), "vcs.revision=") {
		// GOFLAGS=-buildvcs=false (go env), or a git worktree, which the
		// go command does not stamp: versionOf's cases run in TestVersion.
		t.Skip("go build stamped no VCS revision here (-buildvcs=false in go env, or a git worktree)")
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	// A clean clone gets a pseudo-version naming the commit
	// (v0.0.0-<time>-<revision>); a modified one "devel <revision> …".
	if !strings.HasPrefix(string(out), "windowd ") || !strings.Contains(string(out), string(rev[:12])) {
		t.Errorf("windowd version = %q, want it to name commit %s", out, rev[:12])
	}
}

// TestPipelinesOnly: a configuration of pipelines only (no kafka section)
// validates, with a note that run needs brokers, and replays; run refuses it
// with a message naming kafka.brokers.
func TestPipelinesOnly(t *testing.T) {
	path := writeConfig(t, `pipelines:
  - name: p
    input: {topic: in}
    key: {field: user}
    timestamp: {field: ts}
    window: {type: tumbling, size: 1s}
    aggregates: [{name: n, op: count}]
    output: {topic: out}
`)
	code, out, errs := runCLI(t, "", "validate", "--config", path)
	if code != 0 || !strings.HasPrefix(out, "OK\n") || !strings.Contains(out, "run needs kafka.brokers") {
		t.Errorf("validate: exit %d, %q %q", code, out, errs)
	}
	code, out, errs = runCLI(t, `{"key":"u","value":{"user":"u","ts":1500}}`+"\n", "replay", "--config", path, "--input", "-")
	if code != 0 || !strings.Contains(out, `"window":{"start":1000,"end":2000}`) {
		t.Errorf("replay: exit %d, %q %q", code, out, errs)
	}
	code, _, errs = runCLI(t, "", "run", "--config", path)
	if code != 1 || !strings.Contains(errs, "kafka.brokers is required to run") {
		t.Errorf("run: exit %d, %q", code, errs)
	}
}
