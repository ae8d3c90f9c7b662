package windowing_test

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

var update = flag.Bool("update", false, "rewrite the expected output of testdata/timeline/*.txt")

// TestTimeline runs the scenarios of testdata/timeline/*.txt: each is a
// spec, then steps (records, ticks, the end of input), and after each step
// the engine's output and state drawn on an ASCII timeline. With -update it
// rewrites the expected output; check every rewritten step by hand against
// docs/SEMANTICS.md before keeping it.
//
// The format is datadriven's (github.com/cockroachdb/datadriven), parsed
// here: a directive line (command and key=value arguments), input lines, a
// line "----", the expected output, and a blank line. Lines starting with
// "#" between directives are comments.
//
// Commands:
//
//	spec key=value ...        a new engine over an empty in-memory store;
//	                          partitions 0..N-1 assigned at processing time 0
//	record [now=T]            one record per input line: p=P k=KEY t=T [x=X] [now=T]
//	                          [end=close|discard] (transaction windows)
//	tick now=T                a processing-time tick
//	finish                    end of input: the frontier moves to +inf
//
// Spec keys: window (tumbling, hopping, session, transaction), size, hop,
// gap, timeout, offset,
// lateness, early-count, early-every, on-time (true), late (false),
// late-every, closing (always, if_changed, never), mode (accumulating,
// discarding, retracting), max-delay, every, idle, partitions (1), view
// (LO..HI, the drawn range of event time) and unit (ms per column).
// Aggregates are always n (count) and s (sum of x; x defaults to 1).
//
// The drawing: a row per record (* at its event time), per pane or
// retraction (its window, drawn with the letter of its timing: E, O, L; R
// for a retraction), per dropped record (x); then the axis, the frontier F
// and each partition's watermark (= up to it, ^ at it; < when it is below
// the view), and every open window: # from its start to its end, ~ over its
// late phase (end to end + lateness).
func TestTimeline(t *testing.T) {
	files, err := filepath.Glob("testdata/timeline/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no testdata/timeline/*.txt")
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) { runTimeline(t, path) })
	}
}

// tlBlock is one directive of a timeline file.
type tlBlock struct {
	pre    []string // comment and blank lines before it
	cmd    string   // the directive line
	line   int      // its line number
	input  []string
	output []string
}

func parseTimeline(t *testing.T, path string) (blocks []*tlBlock, tail []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var pre []string
	for i := 0; i < len(lines); {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			pre = append(pre, l)
			i++
			continue
		}
		b := &tlBlock{pre: pre, cmd: l, line: i + 1}
		pre = nil
		i++
		for ; i < len(lines) && lines[i] != "----"; i++ {
			b.input = append(b.input, lines[i])
		}
		if i == len(lines) {
			t.Fatalf("%s:%d: %q has no ----", path, b.line, b.cmd)
		}
		i++
		for ; i < len(lines) && lines[i] != ""; i++ {
			b.output = append(b.output, lines[i])
		}
		i++ // the blank line that ends the output
		blocks = append(blocks, b)
	}
	return blocks, pre
}

func runTimeline(t *testing.T, path string) {
	blocks, tail := parseTimeline(t, path)
	var r *tlRunner
	defer func() {
		if r != nil {
			r.close()
		}
	}()
	failed := false
	for _, b := range blocks {
		cmd, args := parseArgs(t, path, b.line, b.cmd)
		var out []string
		switch cmd {
		case "spec":
			if r != nil {
				r.close()
			}
			for _, in := range b.input {
				_, more := parseArgs(t, path, b.line, "spec "+in)
				for k, v := range more {
					args[k] = v
				}
			}
			r = newTLRunner(t, path, b.line, args)
			out = append(out, r.describe()...)
			out = append(out, r.draw()...)
		case "record":
			if r == nil {
				t.Fatalf("%s:%d: record before spec", path, b.line)
			}
			if v, ok := args["now"]; ok {
				r.now = atoi(t, path, b.line, v)
			}
			for _, in := range b.input {
				_, a := parseArgs(t, path, b.line, "record "+in)
				out = append(out, r.record(t, path, b.line, a)...)
			}
			out = append(out, r.draw()...)
		case "tick":
			if r == nil {
				t.Fatalf("%s:%d: tick before spec", path, b.line)
			}
			r.now = atoi(t, path, b.line, args["now"])
			r.col.rows = nil
			if err := r.eng.Tick(r.now); err != nil {
				t.Fatalf("%s:%d: %v", path, b.line, err)
			}
			out = append(out, fmt.Sprintf("tick now=%d", r.now))
			out = append(out, r.col.rows...)
			out = append(out, r.draw()...)
		case "finish":
			if r == nil {
				t.Fatalf("%s:%d: finish before spec", path, b.line)
			}
			r.col.rows = nil
			if err := r.eng.Finish(); err != nil {
				t.Fatalf("%s:%d: %v", path, b.line, err)
			}
			out = append(out, "end of input")
			out = append(out, r.col.rows...)
			out = append(out, r.draw()...)
		default:
			t.Fatalf("%s:%d: unknown command %q", path, b.line, cmd)
		}
		if *update {
			b.output = out
			continue
		}
		if got, want := strings.Join(out, "\n"), strings.Join(b.output, "\n"); got != want {
			failed = true
			t.Errorf("%s:%d: %s\n%s\ngot:\n%s\nwant:\n%s", path, b.line, b.cmd, strings.Join(b.input, "\n"), got, want)
		}
	}
	if *update {
		var sb strings.Builder
		for _, b := range blocks {
			for _, l := range b.pre {
				sb.WriteString(l + "\n")
			}
			sb.WriteString(b.cmd + "\n")
			for _, l := range b.input {
				sb.WriteString(l + "\n")
			}
			sb.WriteString("----\n")
			for _, l := range b.output {
				sb.WriteString(l + "\n")
			}
			sb.WriteString("\n")
		}
		for _, l := range tail {
			if strings.TrimSpace(l) != "" {
				sb.WriteString(l + "\n")
			}
		}
		if err := os.WriteFile(path, []byte(strings.TrimRight(sb.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if failed {
		t.Log("rerun with -update to rewrite, then check the diff by hand against docs/SEMANTICS.md")
	}
}

// parseArgs splits a directive line into its command and key=value
// arguments (a bare key is key=true).
func parseArgs(t *testing.T, path string, line int, s string) (string, map[string]string) {
	t.Helper()
	fields := strings.Fields(s)
	if len(fields) == 0 {
		t.Fatalf("%s:%d: empty directive", path, line)
	}
	args := map[string]string{}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			v = "true"
		}
		args[k] = v
	}
	return fields[0], args
}

func atoi(t *testing.T, path string, line int, s string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%s:%d: %q: %v", path, line, s, err)
	}
	return v
}

// tlRunner is one scenario's engine and drawing settings.
type tlRunner struct {
	spec       windowing.Spec
	wm         watermark.Spec
	partitions int
	lo, hi     int64 // drawn event time
	unit       int64 // ms per column
	db         *state.DB
	eng        *windowing.Engine
	col        *tlCollector
	now        int64
}

// labelWidth is the width of a row's label; the timeline starts after it.
const labelWidth = 16

func newTLRunner(t *testing.T, path string, line int, args map[string]string) *tlRunner {
	t.Helper()
	num := func(k string, def int64) int64 {
		if v, ok := args[k]; ok {
			return atoi(t, path, line, v)
		}
		return def
	}
	r := &tlRunner{partitions: int(num("partitions", 1)), unit: num("unit", 1000)}
	r.spec.Aggregates = []windowing.AggSpec{{Name: "n", Op: windowing.Count}, {Name: "s", Op: windowing.Sum, Field: "x"}}
	switch args["window"] {
	case "tumbling":
		r.spec.Window = windowing.WindowSpec{Kind: windowing.Tumbling, Size: num("size", 0), Hop: num("size", 0), Offset: num("offset", 0)}
	case "hopping":
		r.spec.Window = windowing.WindowSpec{Kind: windowing.Hopping, Size: num("size", 0), Hop: num("hop", 0), Offset: num("offset", 0)}
	case "session":
		r.spec.Window = windowing.WindowSpec{Kind: windowing.Session, Gap: num("gap", 0)}
	case "transaction":
		r.spec.Window = windowing.WindowSpec{Kind: windowing.Transaction, Gap: num("timeout", 0)}
	default:
		t.Fatalf("%s:%d: window=%q", path, line, args["window"])
	}
	r.spec.AllowedLateness = num("lateness", 0)
	r.spec.Trigger = windowing.TriggerSpec{
		EarlyCount: num("early-count", 0),
		EarlyEvery: num("early-every", 0),
		OnTime:     args["on-time"] != "false",
		Late:       args["late"] == "true" || args["late-every"] != "",
		LateEvery:  num("late-every", 0),
	}
	switch args["closing"] {
	case "", "always":
	case "if_changed":
		r.spec.Trigger.Closing = windowing.ClosingIfChanged
	case "never":
		r.spec.Trigger.Closing = windowing.ClosingNever
	default:
		t.Fatalf("%s:%d: closing=%q", path, line, args["closing"])
	}
	switch args["mode"] {
	case "", "accumulating":
	case "discarding":
		r.spec.Mode = windowing.Discarding
	case "retracting":
		r.spec.Mode = windowing.Retracting
	default:
		t.Fatalf("%s:%d: mode=%q", path, line, args["mode"])
	}
	r.wm = watermark.Spec{Strategy: watermark.BoundedOutOfOrderness, MaxDelay: num("max-delay", 0), Every: num("every", 1), IdleTimeout: num("idle", 0),
		QuietAdvance: args["quiet"] == "true"}
	lo, hi, ok := strings.Cut(args["view"], "..")
	if !ok {
		t.Fatalf("%s:%d: view=LO..HI is required", path, line)
	}
	r.lo, r.hi = atoi(t, path, line, lo), atoi(t, path, line, hi)
	if r.unit <= 0 || r.hi <= r.lo || (r.hi-r.lo)%r.unit != 0 {
		t.Fatalf("%s:%d: view %d..%d is not a positive multiple of unit %d", path, line, r.lo, r.hi, r.unit)
	}
	var err error
	if r.db, err = state.Open("db", state.Options{FS: vfs.NewMem()}); err != nil {
		t.Fatal(err)
	}
	r.col = &tlCollector{r: r}
	if r.eng, err = windowing.New(r.spec, r.wm, r.db, r.col, windowing.Options{}); err != nil {
		t.Fatal(err)
	}
	for p := 0; p < r.partitions; p++ {
		r.eng.Assign(int32(p), 0, true)
	}
	return r
}

func (r *tlRunner) close() { r.db.Close() }

// quietText is the quiet advance in the spec line: shown only when on, so
// that the scenarios without it read as before.
func quietText(wm watermark.Spec) string {
	if wm.QuietAdvance {
		return " quiet=true"
	}
	return ""
}

// describe restates the spec as the engine got it.
func (r *tlRunner) describe() []string {
	s, w := r.spec, r.spec.Window
	win := fmt.Sprintf("%s size=%d hop=%d offset=%d", w.Kind, w.Size, w.Hop, w.Offset)
	switch w.Kind {
	case windowing.Session:
		win = fmt.Sprintf("session gap=%d", w.Gap)
	case windowing.Transaction:
		win = fmt.Sprintf("transaction timeout=%d", w.Gap)
	}
	tr := s.Trigger
	return []string{
		fmt.Sprintf("window %s lateness=%d mode=%s", win, s.AllowedLateness, s.Mode),
		fmt.Sprintf("trigger early-count=%d early-every=%d on-time=%v late=%v late-every=%d closing=%s", tr.EarlyCount, tr.EarlyEvery, tr.OnTime, tr.Late, tr.LateEvery, tr.Closing),
		fmt.Sprintf("watermark max-delay=%d every=%d idle=%d partitions=%d", r.wm.MaxDelay, r.wm.Every, r.wm.IdleTimeout, r.partitions) + quietText(r.wm),
	}
}

func (r *tlRunner) record(t *testing.T, path string, line int, a map[string]string) []string {
	t.Helper()
	if v, ok := a["now"]; ok {
		r.now = atoi(t, path, line, v)
	}
	x := 1.0
	if v, ok := a["x"]; ok {
		var err error
		if x, err = strconv.ParseFloat(v, 64); err != nil {
			t.Fatalf("%s:%d: x=%q: %v", path, line, v, err)
		}
	}
	ev := windowing.Event{
		Partition: int32(atoi(t, path, line, a["p"])),
		Key:       a["k"],
		Time:      atoi(t, path, line, a["t"]),
		Inputs:    []windowing.Input{{}, {Num: x}},
	}
	switch a["end"] {
	case "":
	case "close":
		ev.Ends = windowing.Closes
	case "discard":
		ev.Ends = windowing.Discards
	default:
		t.Fatalf("%s:%d: end=%q", path, line, a["end"])
	}
	if ev.Key == "" {
		t.Fatalf("%s:%d: record without k=", path, line)
	}
	r.col.rows = nil
	if err := r.eng.Record(&ev, r.now); err != nil {
		t.Fatalf("%s:%d: %v", path, line, err)
	}
	label := fmt.Sprintf("p%d %s@%d", ev.Partition, ev.Key, ev.Time)
	if a["end"] != "" {
		label += " " + a["end"]
	}
	head := r.row(label, func(c0, c1 int64) byte {
		if c0 <= ev.Time && ev.Time < c1 {
			return '*'
		}
		return ' '
	}, fmt.Sprintf("x=%g now=%d", x, r.now))
	return append([]string{head}, r.col.rows...)
}

// row is one drawn line: label, the columns of the view (cell gets each
// column's [c0, c1)), and a note.
func (r *tlRunner) row(label string, cell func(c0, c1 int64) byte, note string) string {
	b := []byte(fmt.Sprintf("%-*s", labelWidth, label))
	if len(b) > labelWidth {
		b = append(b[:labelWidth-1], ' ')
	}
	for c0 := r.lo; c0 < r.hi; c0 += r.unit {
		b = append(b, cell(c0, c0+r.unit))
	}
	if note != "" {
		b = append(b, "  "...)
		b = append(b, note...)
	}
	return strings.TrimRight(string(b), " ")
}

// span draws [start, end) with ch, and [end, late) with tail.
func (r *tlRunner) span(start, end, late int64, ch, tail byte) func(c0, c1 int64) byte {
	return func(c0, c1 int64) byte {
		switch {
		case start < c1 && c0 < end:
			return ch
		case end < c1 && c0 < late:
			return tail
		}
		return ' '
	}
}

// mark draws a time position: = below it, ^ in its column, < in the first
// column when it is below the view.
func (r *tlRunner) mark(v int64) func(c0, c1 int64) byte {
	return func(c0, c1 int64) byte {
		switch {
		case v < r.lo && c0 == r.lo:
			return '<'
		case v >= c1:
			return '='
		case c0 <= v:
			return '^'
		}
		return ' '
	}
}

func timeString(v int64) string {
	switch v {
	case math.MinInt64:
		return "-inf"
	case math.MaxInt64:
		return "+inf"
	}
	return strconv.FormatInt(v, 10)
}

// draw renders the axis, the frontier, the partition watermarks and the open
// windows.
func (r *tlRunner) draw() []string {
	var out []string
	// Axis: a value every 10 columns, | under it, . halfway.
	ticks := []byte(strings.Repeat(" ", labelWidth))
	labels := []byte(strings.Repeat(" ", labelWidth))
	for i, c0 := 0, r.lo; c0 < r.hi; i, c0 = i+1, c0+r.unit {
		switch {
		case i%10 == 0:
			ticks = append(ticks, '|')
			if len(labels) <= labelWidth+i {
				for len(labels) < labelWidth+i {
					labels = append(labels, ' ')
				}
				labels = append(labels, strconv.FormatInt(c0, 10)...)
			}
		case i%5 == 0:
			ticks = append(ticks, '.')
		default:
			ticks = append(ticks, ' ')
		}
	}
	out = append(out, "  "+strings.TrimRight(string(labels[2:]), " "), "  "+strings.TrimRight(string(ticks[2:]), " "))
	f := r.eng.Frontier()
	out = append(out, r.row("F", r.mark(f), "F="+timeString(f)))
	for _, st := range r.eng.Watermarks().Status() {
		note := "wm=" + timeString(st.Watermark)
		if st.Idle {
			note += " idle"
		}
		out = append(out, r.row(fmt.Sprintf("p%d", st.Partition), r.mark(st.Watermark), note))
	}
	ws, complete := r.eng.Windows()
	if !complete {
		out = append(out, "(the cache evicted keys: windows not drawn)")
		return out
	}
	for _, w := range ws {
		phase := "open"
		if w.OnTimeDone {
			phase = "late phase"
		}
		note := fmt.Sprintf("[%d,%d) %s next=#%d", w.Start, w.End, phase, w.NextIndex)
		if !w.Sliced {
			note += fmt.Sprintf(" pending=%d %s", w.Pending, values(w.Values))
		}
		out = append(out, r.row(w.Key, r.span(w.Start, w.End, satAdd(w.End, r.spec.AllowedLateness), '#', '~'), note))
	}
	return out
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func values(vs []windowing.Value) string {
	var b []byte
	for i, name := range []string{"n", "s"} {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, name...)
		b = append(b, '=')
		if i < len(vs) {
			b = windowing.AppendValue(b, vs[i])
		}
	}
	return string(b)
}

// tlCollector draws what the engine emits during one step.
type tlCollector struct {
	r    *tlRunner
	rows []string
}

var timingLetter = [...]byte{windowing.Early: 'E', windowing.OnTime: 'O', windowing.Late: 'L'}

func (c *tlCollector) Pane(p *windowing.Pane) error {
	label := "  " + p.Timing.String() + " " + p.Key
	ch := timingLetter[p.Timing]
	if p.Retraction {
		label = "  RETRACT " + p.Key
		ch = 'R'
	}
	note := fmt.Sprintf("[%d,%d) %s #%d %s", p.Start, p.End, p.Timing, p.Index, values(p.Values))
	if p.Final {
		note += " final"
	}
	if p.Quiet {
		note += " quiet"
	}
	if p.TimedOut {
		note += " timeout"
	}
	c.rows = append(c.rows, c.r.row(label, c.r.span(p.Start, p.End, p.End, ch, ' '), note))
	return nil
}

func (c *tlCollector) Dropped(ev *windowing.Event, reason windowing.DropReason) error {
	c.rows = append(c.rows, c.r.row("  DROPPED", func(c0, c1 int64) byte {
		if c0 <= ev.Time && ev.Time < c1 {
			return 'x'
		}
		return ' '
	}, reason.String()))
	return nil
}
