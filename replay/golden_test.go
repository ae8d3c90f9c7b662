package replay

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tidwall/gjson"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/windowing"
)

var update = flag.Bool("update", false, "rewrite the output sections of testdata/*.txt")

// goldenCase is one testdata file: free text (a description and an ASCII
// timeline), then sections introduced by "-- name --" lines:
//
//	pipeline   the pipeline's fields (name, input and output are supplied)
//	input      the replay input, JSON lines
//	output     the panes, one per line: key [start,end) TIMING index name=value ... [final] [quiet]
//	           (a retraction is prefixed by "retract"; a calendar window's
//	           local bounds follow its bounds: [start,end) local=[ls,le) zone;
//	           a count window's first and last records' times: times=t1..t2)
//	errors     the dead-letter and late-drop lines of the error stream (optional)
//	summary    records, filtered and dead_letters of the summary (optional)
type goldenCase struct {
	head     string
	sections map[string]string
	order    []string
}

func parseGolden(t *testing.T, data string) goldenCase {
	t.Helper()
	gc := goldenCase{sections: map[string]string{}}
	cur := ""
	var b strings.Builder
	flush := func() {
		if cur == "" {
			gc.head = b.String()
		} else {
			gc.sections[cur] = b.String()
			gc.order = append(gc.order, cur)
		}
		b.Reset()
	}
	for _, line := range strings.SplitAfter(data, "\n") {
		trim := strings.TrimSpace(line)
		if strings.HasPrefix(trim, "-- ") && strings.HasSuffix(trim, " --") {
			flush()
			cur = strings.TrimSuffix(strings.TrimPrefix(trim, "-- "), " --")
			continue
		}
		b.WriteString(line)
	}
	flush()
	return gc
}

func (gc goldenCase) format() string {
	var b strings.Builder
	b.WriteString(gc.head)
	for _, name := range gc.order {
		fmt.Fprintf(&b, "-- %s --\n", name)
		b.WriteString(gc.sections[name])
	}
	return b.String()
}

// goldenConfig wraps a pipeline section into a whole configuration file.
func goldenConfig(pipeline string) string {
	var b strings.Builder
	b.WriteString("kafka: {brokers: embedded}\npipelines:\n  - name: golden\n")
	if !strings.HasPrefix(pipeline, "inputs:") && !strings.Contains(pipeline, "\ninputs:") {
		b.WriteString("    input: {topic: in}\n")
	}
	b.WriteString("    output: {topic: out}\n")
	for _, line := range strings.Split(strings.TrimRight(pipeline, "\n"), "\n") {
		b.WriteString("    " + line + "\n")
	}
	return b.String()
}

// compactPanes renders replay's JSON output in the golden notation.
func compactPanes(t *testing.T, out string, aggs []windowing.AggSpec) string {
	t.Helper()
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		if !gjson.Valid(line) {
			t.Fatalf("output line is not JSON: %s", line)
		}
		v := gjson.Parse(line)
		if v.Get("retraction").Bool() {
			b.WriteString("retract ")
		}
		if v.Get("matched").Exists() {
			compactJoinRow(&b, v)
			continue
		}
		fmt.Fprintf(&b, "%s [%s,%s) ", v.Get("key").Str, v.Get("window.start").Raw, v.Get("window.end").Raw)
		if t := v.Get("window.first_time"); t.Exists() {
			fmt.Fprintf(&b, "times=%s..%s ", t.Raw, v.Get("window.last_time").Raw)
		}
		if z := v.Get("window.time_zone"); z.Exists() {
			fmt.Fprintf(&b, "local=[%s,%s) %s ", v.Get("window.local_start").Str, v.Get("window.local_end").Str, z.Str)
		}
		fmt.Fprintf(&b, "%s %s", v.Get("pane.timing").Str, v.Get("pane.index").Raw)
		for _, a := range aggs {
			fmt.Fprintf(&b, " %s=%s", a.Name, v.Get("aggregates."+a.Name).Raw)
		}
		if v.Get("pane.final").Bool() {
			b.WriteString(" final")
		}
		if v.Get("pane.quiet").Bool() {
			b.WriteString(" quiet")
		}
		if v.Get("pane.timeout").Bool() {
			b.WriteString(" timeout")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// compactJoinRow renders a join's row: key, each side (as=value, or
// as=null), the window or interval, timing, final and matched.
func compactJoinRow(b *strings.Builder, v gjson.Result) {
	b.WriteString(v.Get("key").Str)
	v.ForEach(func(k, x gjson.Result) bool {
		switch k.Str {
		case "key", "window", "interval", "pane", "matched", "retraction":
		default:
			fmt.Fprintf(b, " %s=%s", k.Str, x.Raw)
		}
		return true
	})
	span := v.Get("window")
	if !span.Exists() {
		span = v.Get("interval")
	}
	fmt.Fprintf(b, " [%s,%s) %s", span.Get("start").Raw, span.Get("end").Raw, v.Get("pane.timing").Str)
	if v.Get("pane.final").Bool() {
		b.WriteString(" final")
	}
	if v.Get("matched").Bool() {
		b.WriteString(" matched")
	}
	b.WriteString("\n")
}

// loadGolden reads a golden file: its sections, its pipeline, its input
// and the input's partition count.
func loadGolden(t *testing.T, file string) (gc goldenCase, p *config.Pipeline, input string, partitions int) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	gc = parseGolden(t, string(data))
	cfg, err := config.Parse(file+"#pipeline", []byte(goldenConfig(gc.sections["pipeline"])))
	if err != nil {
		t.Fatalf("%s: config: %v", file, err)
	}
	p = &cfg.Pipelines[0]
	input = gc.sections["input"]
	if partitions, err = ScanPartitions(p, nil, strings.NewReader(input)); err != nil {
		t.Fatal(err)
	}
	return gc, p, input, partitions
}

// goldenFiles returns the golden files, testdata/*.txt; none is a failure.
func goldenFiles(tb testing.TB) []string {
	tb.Helper()
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		tb.Fatalf("no golden files: %v", err)
	}
	return files
}

func TestGolden(t *testing.T) {
	files := goldenFiles(t)
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			gc, p, input, n := loadGolden(t, file)
			var out, errs bytes.Buffer
			sum, err := Run(Options{Pipeline: p, Input: strings.NewReader(input), Partitions: n, FS: vfs.NewMem(), Out: &out, Errs: &errs})
			if err != nil {
				t.Fatalf("replay: %v", err)
			}
			gotSum := fmt.Sprintf("records=%d filtered=%d dead_letters=%d\n", sum.Records, sum.Filtered, sum.DeadLetters)
			got := compactPanes(t, out.String(), p.Spec.Aggregates)
			gotErrs := errs.String()
			if *update {
				gc.sections["output"] = got
				if _, ok := gc.sections["errors"]; ok || gotErrs != "" {
					if !ok {
						gc.order = append(gc.order, "errors")
					}
					gc.sections["errors"] = gotErrs
				}
				if _, ok := gc.sections["summary"]; ok {
					gc.sections["summary"] = gotSum
				}
				if err := os.WriteFile(file, []byte(gc.format()), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if want := gc.sections["output"]; got != want {
				t.Errorf("output differs\n--- got ---\n%s--- want ---\n%s", got, want)
			}
			if want := gc.sections["errors"]; gotErrs != want {
				t.Errorf("errors differ\n--- got ---\n%s--- want ---\n%s", gotErrs, want)
			}
			if want, ok := gc.sections["summary"]; ok && gotSum != want {
				t.Errorf("summary differs: got %s want %s", gotSum, want)
			}
		})
	}
}
