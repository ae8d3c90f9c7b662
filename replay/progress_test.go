package replay

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tidwall/gjson"

	"github.com/windowd/windowd/windowing"
)

// TestProgressPromise replays every golden case with --progress and checks
// the promise of docs/SEMANTICS.md, Progress records, line by line: no
// final pane of a window with end <= final_through, and no EARLY or
// ON_TIME pane of a window with end <= frontier, follows a progress line;
// the last line says everything is final. It also checks that the panes
// are those of a replay without progress lines.
func TestProgressPromise(t *testing.T) {
	files := goldenFiles(t)
	lines := 0
	for _, file := range files {
		_, p, input, n := loadGolden(t, file)
		if p.Spec.Window.Kind == windowing.CountWindow {
			continue // no event-time end: refused with --progress (TestCountWindowsNoProgress)
		}
		run := func(progress bool) string {
			var out, errs bytes.Buffer
			if _, err := Run(Options{Pipeline: p, Input: strings.NewReader(input), Partitions: n, FS: vfs.NewMem(), Out: &out, Errs: &errs, Progress: progress}); err != nil {
				t.Fatalf("%s: replay: %v", file, err)
			}
			return out.String()
		}
		plain, withProgress := run(false), run(true)
		var panes []string
		frontier, final := int64(-1<<63), int64(-1<<63)
		last := ""
		for _, l := range strings.Split(strings.TrimRight(withProgress, "\n"), "\n") {
			v := gjson.Parse(l)
			if pr := v.Get("progress"); pr.Exists() {
				frontier, final = pr.Get("frontier").Int(), pr.Get("final_through").Int()
				if final > frontier {
					t.Fatalf("%s: final_through after frontier: %s", file, l)
				}
				lines++
				last = l
				continue
			}
			panes = append(panes, l)
			end := v.Get("window.end").Int()
			if iv := v.Get("interval.end"); iv.Exists() {
				end = iv.Int() // a join row's
			}
			timing := v.Get("pane.timing").Str
			if v.Get("pane.final").Bool() && end <= final && !v.Get("retraction").Bool() {
				t.Fatalf("%s: final pane after a progress line final through %d:\n%s", file, final, l)
			}
			if (timing == "EARLY" || timing == "ON_TIME") && end <= frontier && !v.Get("retraction").Bool() {
				t.Fatalf("%s: %s pane after a progress line at frontier %d:\n%s", file, timing, frontier, l)
			}
		}
		if got := strings.Join(panes, "\n") + "\n"; plain != "" && got != plain {
			t.Fatalf("%s: panes differ with --progress", file)
		}
		if plain != "" && gjson.Get(last, "progress.final_through").Int() != 1<<63-1 {
			t.Fatalf("%s: the last progress line is not final through +infinity: %s", file, last)
		}
	}
	if lines < len(files) {
		t.Fatalf("only %d progress lines over %d cases", lines, len(files))
	}
}

// TestCountWindowsNoProgress: progress lines promise event-time
// completeness, which count windows do not have: --progress is refused.
func TestCountWindowsNoProgress(t *testing.T) {
	_, p, input, n := loadGolden(t, "testdata/count_tumbling.txt")
	var out bytes.Buffer
	_, err := Run(Options{Pipeline: p, Input: strings.NewReader(input), Partitions: n, FS: vfs.NewMem(), Out: &out, Errs: &out, Progress: true})
	if err == nil || !strings.Contains(err.Error(), "count windows") {
		t.Fatalf("replay --progress of count windows: %v, want it refused", err)
	}
}
