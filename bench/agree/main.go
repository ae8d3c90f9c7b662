// Command agree is the batch side of bench/compare.sh: it computes the exact
// tumbling-window counts and sums of a preloaded input and checks every
// system's final panes against them and against each other.
//
//	go run ./bench/agree -size-ms 10000 -input 'DIR/p*.tsv' -expect
//	go run ./bench/agree -size-ms 10000 -input 'DIR/p*.tsv' windowd=w.jsonl kstreams=k.jsonl flink=f.jsonl
//
// The input files hold "key<TAB>value" lines, the records as produced (the
// Kafka key, then the JSON value with "ts", Unix ms, and "x"). Records whose
// key starts with -ignore (default "~flush") are left out: they only move
// event time past the last windows, and their own windows never close.
// The batch computation sums x in exact cents (x has at most two decimals).
//
// A system's file holds its output topic's values, one JSON object a line:
// either windowd's panes ({"key","window":{"start","end"},"pane":{"final"},
// "aggregates":{COUNT,SUM}}, non-final panes skipped) or the peers'
// ({"key","start","end","count","sum"}). A pane agrees when its count is
// equal and its sum within -rel (1e-9) relative of the other's.
//
// A final pane written more than once is a duplicate: at least once, a
// replay after a restart may write it again, but never with another value
// (a duplicate whose count or sum differs from the earlier copy's counts as
// a differing pane). Systems named in -exactly-once (comma-separated:
// bench/compare.sh names its -eos systems) must write every final pane
// once: a duplicate of theirs is a disagreement.
//
// With -expect it prints the number of panes the input closes. Otherwise it
// prints tab-separated lines:
//
//	batch   PANES RECORDS
//	system  NAME FINALS AGREE MISSING EXTRA DIFFER DUPLICATES NONFINAL
//	pair    NAME_A NAME_B BOTH_EQUAL BOTH_DIFFER ONLY_A ONLY_B
//	example NAME TEXT   (up to 3 per system with a disagreement)
//
// and exits 1 when a system's finals differ from the batch in any way, or
// an -exactly-once system wrote a duplicate.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

type paneKey struct {
	key        string
	start, end int64
}

type agg struct {
	count int64
	sum   float64
}

func main() {
	sizeMs := flag.Int64("size-ms", 10000, "tumbling window size, ms")
	input := flag.String("input", "", "glob of the input files (key<TAB>value lines)")
	ignore := flag.String("ignore", "~flush", "leave out records whose key starts with this")
	expect := flag.Bool("expect", false, "print the number of panes the input closes and exit")
	rel := flag.Float64("rel", 1e-9, "relative tolerance of sums")
	countName := flag.String("count", "n", "windowd's count aggregate")
	sumName := flag.String("sum", "total", "windowd's sum aggregate")
	exactlyOnce := flag.String("exactly-once", "", "comma-separated systems that must write every final pane once (a duplicate is a disagreement)")
	flag.Parse()

	files, err := filepath.Glob(*input)
	if err != nil || len(files) == 0 {
		fail("no input files match %q", *input)
	}
	batch, records := compute(files, *sizeMs, *ignore)
	if *expect {
		fmt.Println(len(batch))
		return
	}
	fmt.Printf("batch\t%d\t%d\n", len(batch), records)

	eos := map[string]bool{}
	for _, name := range strings.Split(*exactlyOnce, ",") {
		if name = strings.TrimSpace(name); name != "" {
			eos[name] = true
		}
	}

	type system struct {
		name  string
		panes map[paneKey]agg
	}
	var systems []system
	bad := false
	for _, arg := range flag.Args() {
		name, file, ok := strings.Cut(arg, "=")
		if !ok {
			fail("expected NAME=FILE, got %q", arg)
		}
		out, err := readPanes(file, *countName, *sumName, *ignore)
		if err != nil {
			fail("%s: %v", file, err)
		}
		systems = append(systems, system{name, out.panes})
		v := judge(batch, out, *rel, eos[name])
		fmt.Printf("system\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", name, len(out.panes), v.agree, v.missing, v.extra, v.differ, out.dups, out.nonfin)
		for _, e := range v.examples {
			fmt.Printf("example\t%s\t%s\n", name, e)
		}
		if !v.ok {
			bad = true
		}
	}
	for i := range systems {
		for j := i + 1; j < len(systems); j++ {
			a, b := systems[i], systems[j]
			var eq, ne, onlyA, onlyB int
			for k, x := range a.panes {
				y, ok := b.panes[k]
				switch {
				case !ok:
					onlyA++
				case equal(x, y, *rel):
					eq++
				default:
					ne++
				}
			}
			for k := range b.panes {
				if _, ok := a.panes[k]; !ok {
					onlyB++
				}
			}
			fmt.Printf("pair\t%s\t%s\t%d\t%d\t%d\t%d\n", a.name, b.name, eq, ne, onlyA, onlyB)
		}
	}
	if bad {
		os.Exit(1)
	}
}

// verdict: one system's final panes against the batch computation.
type verdict struct {
	agree, missing, extra, differ int
	examples                      []string // up to 3
	ok                            bool
}

// judge compares a system's output with the batch computation. A pane
// written twice with different values differs, whatever its last value;
// under exactly once (eos) any duplicate is a disagreement.
func judge(batch map[paneKey]agg, out output, rel float64, eos bool) verdict {
	var v verdict
	example := func(format string, args ...any) {
		if len(v.examples) < 3 {
			v.examples = append(v.examples, fmt.Sprintf(format, args...))
		}
	}
	if eos && out.dups > 0 {
		example("%d duplicate final panes under exactly once", out.dups)
	}
	for k, want := range batch {
		got, ok := out.panes[k]
		other, conflict := out.conflicts[k]
		conflict = conflict && !equal(other, got, rel)
		switch {
		case !ok:
			v.missing++
			example("missing %s [%d,%d) count %d sum %.2f", k.key, k.start, k.end, want.count, want.sum)
		case conflict:
			v.differ++
			example("differs %s [%d,%d): written as count %d sum %v and as count %d sum %v, batch count %d sum %.2f", k.key, k.start, k.end, other.count, other.sum, got.count, got.sum, want.count, want.sum)
		case equal(got, want, rel):
			v.agree++
		default:
			v.differ++
			example("differs %s [%d,%d): count %d sum %v, batch count %d sum %.2f", k.key, k.start, k.end, got.count, got.sum, want.count, want.sum)
		}
	}
	for k, got := range out.panes {
		if _, ok := batch[k]; !ok {
			v.extra++
			example("extra %s [%d,%d) count %d sum %v", k.key, k.start, k.end, got.count, got.sum)
		}
	}
	v.ok = v.agree == len(batch) && v.extra == 0 && !(eos && out.dups > 0)
	return v
}

func equal(a, b agg, rel float64) bool {
	if a.count != b.count {
		return false
	}
	d := math.Abs(a.sum - b.sum)
	return d <= rel*math.Max(math.Abs(a.sum), math.Abs(b.sum)) || d < 1e-12
}

// compute: the exact count and sum (in cents, then as a float) of every
// (key, window) of the input, and the number of records counted.
func compute(files []string, sizeMs int64, ignore string) (map[paneKey]agg, int) {
	cents := map[paneKey]int64{}
	counts := map[paneKey]int64{}
	records := 0
	sort.Strings(files)
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			fail("%v", err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			line := sc.Bytes()
			tab := bytes.IndexByte(line, '\t')
			if tab < 0 {
				fail("%s: a line without a tab", f)
			}
			key := string(line[:tab])
			if ignore != "" && strings.HasPrefix(key, ignore) {
				continue
			}
			var v struct {
				Ts int64       `json:"ts"`
				X  json.Number `json:"x"`
			}
			if err := json.Unmarshal(line[tab+1:], &v); err != nil {
				fail("%s: %v", f, err)
			}
			c, err := toCents(string(v.X))
			if err != nil {
				fail("%s: x %q: %v", f, v.X, err)
			}
			start := v.Ts - mod(v.Ts, sizeMs)
			k := paneKey{key, start, start + sizeMs}
			counts[k]++
			cents[k] += c
			records++
		}
		if err := sc.Err(); err != nil {
			fail("%s: %v", f, err)
		}
		fh.Close()
	}
	out := make(map[paneKey]agg, len(counts))
	for k, n := range counts {
		out[k] = agg{n, float64(cents[k]) / 100}
	}
	return out, records
}

func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// toCents: a decimal with at most two fractional digits, exactly, in cents.
func toCents(s string) (int64, error) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > 2 {
		return 0, fmt.Errorf("more than two decimals")
	}
	frac += strings.Repeat("0", 2-len(frac))
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, err
	}
	f, err := strconv.ParseInt(frac, 10, 64)
	if err != nil {
		return 0, err
	}
	c := w*100 + f
	if neg {
		c = -c
	}
	return c, nil
}

// output: a system's final panes by (key, window) (the last copy of
// each), the number of duplicates (a final pane seen again: at-least-once
// output), the panes whose copies disagree (with the value of a copy that
// differs from the last) and the number of non-final panes skipped.
type output struct {
	panes     map[paneKey]agg
	dups      int
	conflicts map[paneKey]agg
	nonfin    int
}

// readPanes reads a system's output file.
func readPanes(file, countName, sumName, ignore string) (output, error) {
	out := output{panes: map[paneKey]agg{}, conflicts: map[paneKey]agg{}}
	fh, err := os.Open(file)
	if err != nil {
		return out, err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var p struct {
			Key    *string `json:"key"`
			Start  int64   `json:"start"`
			End    int64   `json:"end"`
			Count  int64   `json:"count"`
			Sum    float64 `json:"sum"`
			Window *struct {
				Start int64 `json:"start"`
				End   int64 `json:"end"`
			} `json:"window"`
			Pane *struct {
				Final bool `json:"final"`
			} `json:"pane"`
			Retraction bool                       `json:"retraction"`
			Aggregates map[string]json.RawMessage `json:"aggregates"`
		}
		if err := json.Unmarshal(line, &p); err != nil {
			return out, fmt.Errorf("%v in %.200s", err, line)
		}
		if p.Key == nil { // a progress record, or something else: not a pane
			continue
		}
		k := paneKey{key: *p.Key}
		var a agg
		if p.Window != nil { // windowd
			if p.Pane == nil || !p.Pane.Final || p.Retraction {
				out.nonfin++
				continue
			}
			k.start, k.end = p.Window.Start, p.Window.End
			if err := json.Unmarshal(p.Aggregates[countName], &a.count); err != nil {
				return out, fmt.Errorf("aggregate %q: %v in %.200s", countName, err, line)
			}
			if err := json.Unmarshal(p.Aggregates[sumName], &a.sum); err != nil {
				return out, fmt.Errorf("aggregate %q: %v in %.200s", sumName, err, line)
			}
		} else {
			k.start, k.end = p.Start, p.End
			a = agg{p.Count, p.Sum}
		}
		if ignore != "" && strings.HasPrefix(k.key, ignore) {
			continue
		}
		if prev, seen := out.panes[k]; seen {
			out.dups++
			if prev != a {
				out.conflicts[k] = prev
			}
		}
		out.panes[k] = a
	}
	return out, sc.Err()
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "agree: "+format+"\n", args...)
	os.Exit(2)
}
