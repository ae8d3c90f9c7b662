package replay

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tidwall/gjson"
)

// replayed is a replay's output: panes per key in order, the other output
// lines (progress) in order, the error stream's lines sorted, the summary.
type replayed struct {
	byKey map[string][]string
	other []string
	errs  []string
	sum   Summary
}

func replayWith(t *testing.T, opts Options) replayed {
	t.Helper()
	var out, errs bytes.Buffer
	opts.Out, opts.Errs, opts.FS = &out, &errs, vfs.NewMem()
	sum, err := Run(opts)
	if err != nil {
		t.Fatalf("replay with %d workers: %v", opts.Workers, err)
	}
	r := replayed{byKey: map[string][]string{}, sum: sum}
	for _, line := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
		if k := gjson.Get(line, "key"); k.Exists() && gjson.Get(line, "pane").Exists() {
			r.byKey[k.Str] = append(r.byKey[k.Str], line)
		} else if line != "" {
			r.other = append(r.other, line)
		}
	}
	r.errs = sortedLines(errs.Bytes())
	return r
}

// TestWorkersEqualOneEngine: a replay with workers emits, for every key,
// the panes one engine emits, in the same order (pane ids, flags and
// values byte for byte), the same dead letters and late records, and the
// same summary. Every golden pipeline, its input repeated so that it
// spans several chunks, with late records, clocks moving back (dead
// letters) and every window kind.
func TestWorkersEqualOneEngine(t *testing.T) {
	files := goldenFiles(t)
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			_, p, input, n := loadGolden(t, file)
			reps := chunkLines*3/2/max(1, strings.Count(input, "\n")) + 1
			in := strings.Repeat(input, reps)
			one := replayWith(t, Options{Pipeline: p, Input: strings.NewReader(in), Partitions: n})
			for _, w := range []int{2, 5} {
				got := replayWith(t, Options{Pipeline: p, Input: strings.NewReader(in), Partitions: n, Workers: w})
				for k, want := range one.byKey {
					if !reflect.DeepEqual(got.byKey[k], want) {
						t.Fatalf("%d workers, key %q: panes differ\n got %q\nwant %q", w, k, got.byKey[k], want)
					}
				}
				if len(got.byKey) != len(one.byKey) {
					t.Fatalf("%d workers: panes of %d keys, one engine's of %d", w, len(got.byKey), len(one.byKey))
				}
				if !reflect.DeepEqual(got.errs, one.errs) {
					t.Fatalf("%d workers: error streams differ\n got %q\nwant %q", w, got.errs, one.errs)
				}
				if got.sum != one.sum {
					t.Fatalf("%d workers: summary %+v, one engine's %+v", w, got.sum, one.sum)
				}
			}
		})
	}
}

// TestWorkersProgress: with workers, no pane of a window that a progress
// line said was final comes after it, and the last progress line has the
// frontier at its end.
func TestWorkersProgress(t *testing.T) {
	for _, name := range []string{"example_a_retracting", "hopping", "session_retracting", "early_every"} {
		_, p, input, n := loadGolden(t, "testdata/"+name+".txt")
		in := strings.Repeat(input, chunkLines*3/max(1, strings.Count(input, "\n")))
		var out, errs bytes.Buffer
		if _, err := Run(Options{Pipeline: p, Input: strings.NewReader(in), Partitions: n, Workers: 3, Progress: true, FS: vfs.NewMem(), Out: &out, Errs: &errs}); err != nil {
			t.Fatal(err)
		}
		through, progress := int64(math.MinInt64), 0
		var last string
		for _, line := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
			if ft := gjson.Get(line, "progress.final_through"); ft.Exists() {
				through, last = ft.Int(), line
				progress++
				continue
			}
			if end := gjson.Get(line, "window.end").Int(); end <= through {
				t.Fatalf("%s: pane of a window ending at %d after a progress line final through %d: %s", name, end, through, line)
			}
		}
		if progress < 2 || !strings.Contains(last, fmt.Sprint(int64(math.MaxInt64))) {
			t.Fatalf("%s: %d progress lines, the last %s", name, progress, last)
		}
	}
}

// TestWorkersManyPanesAtOnce: a frontier step that fires more panes than
// a piece holds (the end of the input, 30,000 windows) sends them to the
// writer as it goes, in order per key, as one engine prints them.
func TestWorkersManyPanesAtOnce(t *testing.T) {
	_, p, _, _ := loadGolden(t, "testdata/example_a_accumulating.txt")
	var b strings.Builder
	for i := range 30000 {
		fmt.Fprintf(&b, `{"key":"k%d","value":{"ts":%d}}`+"\n", i, 1000+i%7)
	}
	one := replayWith(t, Options{Pipeline: p, Input: strings.NewReader(b.String()), Partitions: 1})
	got := replayWith(t, Options{Pipeline: p, Input: strings.NewReader(b.String()), Partitions: 1, Workers: 3})
	if len(one.byKey) != 30000 || !reflect.DeepEqual(got.byKey, one.byKey) || got.sum != one.sum {
		t.Fatalf("3 workers: panes of %d keys, one engine %d; summaries %+v and %+v", len(got.byKey), len(one.byKey), got.sum, one.sum)
	}
	if n := 30000 * len(one.byKey["k0"][0]); n < 4*pieceBytes {
		t.Fatalf("the panes take %d bytes, not several pieces", n)
	}
}

// TestScanSkipsExact: the partition scan, which decodes only the lines
// that could raise the largest partition found so far, finds what
// decoding every line finds: every golden input, and lines whose
// partition only a full read gets right.
func TestScanSkipsExact(t *testing.T) {
	tricky := []string{
		`{"partition":9,"key":"k","value":{"ts":1` + "\n", // not JSON
		`{"partition":"7","key":"k","value":{"ts":1}}` + "\n",
		`{"partition":3.5,"key":"k","value":{"ts":1}}` + "\n",
		`{"parti\u0074ion":6,"key":"k","value":{"ts":1}}` + "\n", // the name spelled with an escape
		`{"partition":2,"partition":8,"key":"k","value":{"ts":1}}` + "\n",
		`{"partition":5,"key":"k","value":{"no_ts":1}}` + "\n",
		`{"value":{"ts":1},"partition":4}` + "\n",
		`{"clock":5}` + "\n",
	}
	files := goldenFiles(t)
	for _, file := range files {
		_, p, input, _ := loadGolden(t, file)
		for _, in := range []string{input, strings.Join(tricky, "") + input, input + strings.Join(tricky, "")} {
			scanSkips = false
			want, err := ScanPartitions(p, nil, strings.NewReader(in))
			scanSkips = true
			if err != nil {
				t.Fatal(err)
			}
			if got, err := ScanPartitions(p, nil, strings.NewReader(in)); err != nil || got != want {
				t.Fatalf("%s: %d partitions (%v), decoding every line %d", file, got, err, want)
			}
		}
	}
}
