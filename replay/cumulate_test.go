package replay

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/windowd/windowd/config"
)

// cumRecord is one record of a cumulate test stream.
type cumRecord struct {
	key string
	t   int64
	x   int64
}

// cumWindow names a window of a key.
type cumWindow struct {
	key        string
	start, end int64
}

// cumTotals are the aggregates of the test pipelines over some records.
type cumTotals struct{ n, sum, min, max int64 }

func (c *cumTotals) add(x int64) {
	if c.n == 0 || x < c.min {
		c.min = x
	}
	if c.n == 0 || x > c.max {
		c.max = x
	}
	c.n++
	c.sum += x
}

// fixedEnds returns the period [lo, hi) of t for fixed cumulate windows
// and the window ends after t, by the definition: the period is the
// tumbling window of size and offset holding t, ends are lo + k·step.
func fixedEnds(t, size, step, offset int64) (lo int64, ends []int64) {
	lo = t - ((t-offset)%size+size)%size
	for e := lo + step; e <= lo+size; e += step {
		if e > t {
			ends = append(ends, e)
		}
	}
	return lo, ends
}

// localDayEnds returns the local day [lo, hi) of t in loc and the window
// ends after t: for each multiple h of step hours after midnight, the
// first instant at which the local clock reads h hours or more, found by
// walking the day in quarter hours (Rome's clock changes on whole hours),
// and the day's end. Independent of the code under test.
func localDayEnds(t int64, loc *time.Location, step time.Duration) (lo int64, ends []int64) {
	y, m, d := time.UnixMilli(t).In(loc).Date()
	day0 := time.Date(y, m, d, 0, 0, 0, 0, loc)
	hi := time.Date(y, m, d+1, 0, 0, 0, 0, loc).UnixMilli()
	lo = day0.UnixMilli()
	var all []int64
	for h := step; h < 24*time.Hour; h += step {
		for x := lo; x < hi; x += 15 * 60 * 1000 {
			lt := time.UnixMilli(x).In(loc)
			if lt.Day() == d && time.Duration(lt.Hour())*time.Hour+time.Duration(lt.Minute())*time.Minute >= h {
				if len(all) == 0 || x > all[len(all)-1] {
					all = append(all, x)
				}
				break
			}
		}
	}
	all = append(all, hi)
	for _, e := range all {
		if e > t {
			ends = append(ends, e)
		}
	}
	return lo, ends
}

// cumExpected computes, by brute force over the records, every window and
// its aggregates: a window exists when a record of its key falls in it.
func cumExpected(recs []cumRecord, windowsOf func(t int64) (int64, []int64)) map[cumWindow]cumTotals {
	want := map[cumWindow]cumTotals{}
	for _, r := range recs {
		lo, ends := windowsOf(r.t)
		for _, e := range ends {
			want[cumWindow{r.key, lo, e}] = cumTotals{}
		}
	}
	fillTotals(want, recs)
	return want
}

// fillTotals sets the aggregates of every window of want over recs.
func fillTotals(want map[cumWindow]cumTotals, recs []cumRecord) {
	for w := range want {
		var c cumTotals
		for _, r := range recs {
			if r.key == w.key && w.start <= r.t && r.t < w.end {
				c.add(r.x)
			}
		}
		want[w] = c
	}
}

// cumGot reads the replay's panes: each window's final aggregates (in
// discarding mode the sums of its panes), and checks that each window
// has exactly one final pane, the last of its panes.
func cumGot(t *testing.T, out string, discarding bool) map[cumWindow]cumTotals {
	t.Helper()
	got := map[cumWindow]cumTotals{}
	final := map[cumWindow]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		p := gjson.Parse(line)
		w := cumWindow{p.Get("key").Str, p.Get("window.start").Int(), p.Get("window.end").Int()}
		if final[w] {
			t.Fatalf("a pane after the final pane of %v: %s", w, line)
		}
		if p.Get("retraction").Bool() {
			continue
		}
		a := p.Get("aggregates")
		c := cumTotals{n: a.Get("n").Int(), sum: a.Get("s").Int(), min: a.Get("lo").Int(), max: a.Get("hi").Int()}
		if discarding {
			prev := got[w]
			c.sum += prev.sum
			c.n += prev.n
			c.min, c.max = 0, 0 // a discarding pane's min and max are of its own records
		}
		got[w] = c
		final[w] = p.Get("pane.final").Bool()
	}
	for w := range got {
		if !final[w] {
			t.Errorf("window %v has no final pane", w)
		}
	}
	return got
}

// cumPipeline is the test pipeline of window: count n, sum s, min lo, max
// hi of x, and the extra aggregates (", {...}").
func cumPipeline(t *testing.T, window, lateness, trigger, mode, extra string) *config.Pipeline {
	t.Helper()
	cfg, err := config.Parse("c.yaml", []byte(`pipelines:
  - name: c
    input: {topic: in}
    key: {field: k}
    timestamp: {field: t}
    watermark: {max_delay: 1s}
    window: `+window+`
    allowed_lateness: `+lateness+`
`+trigger+`    accumulation: `+mode+`
    aggregates: [{name: n, op: count}, {name: s, op: sum, field: x}, {name: lo, op: min, field: x}, {name: hi, op: max, field: x}`+extra+`]
    output: {topic: out}
`))
	if err != nil {
		t.Fatal(err)
	}
	return &cfg.Pipelines[0]
}

// Cumulating windows, fixed and calendar (Europe/Rome across both 2026
// DST days), every accumulation mode, sliced and per window (an early
// trigger turns slicing off), out-of-order and late records: every
// window a record falls in has exactly one final pane, whose aggregates
// equal a brute-force computation over the records.
func TestCumulateBruteForce(t *testing.T) {
	rome, err := time.LoadLocation("Europe/Rome")
	if err != nil {
		t.Fatal(err)
	}
	triggers := []string{"", "    trigger: {early: {count: 2}}\n", "    trigger: {late: {every: 0s}}\n"}
	modes := []string{"accumulating", "discarding", "retracting"}
	seeds := 120
	if testing.Short() {
		seeds = 30
	}
	for seed := range seeds {
		rng := rand.New(rand.NewSource(int64(seed)))
		var window string
		var from, span int64
		var windowsOf func(int64) (int64, []int64)
		if seed%2 == 0 {
			sizes := [][2]int64{{6000, 1000}, {10000, 2000}, {12000, 4000}, {8000, 8000}}
			sz := sizes[rng.Intn(len(sizes))]
			offset := int64(rng.Intn(3)) * 1000
			window = fmt.Sprintf("{type: cumulate, size: %dms, step: %dms, offset: %dms}", sz[0], sz[1], offset)
			from, span = -20000, 60000
			windowsOf = func(t int64) (int64, []int64) { return fixedEnds(t, sz[0], sz[1], offset) }
		} else {
			steps := []time.Duration{time.Hour, 2 * time.Hour, 3 * time.Hour, 24 * time.Hour}
			step := steps[rng.Intn(len(steps))]
			window = fmt.Sprintf("{type: cumulate, unit: day, step: %s, time_zone: Europe/Rome}", step)
			day := []string{"2026-03-28", "2026-10-24"}[rng.Intn(2)] // the day before a DST day
			d0, _ := time.ParseInLocation("2006-01-02", day, rome)
			from, span = d0.UnixMilli(), 3*24*3600*1000
			windowsOf = func(t int64) (int64, []int64) { return localDayEnds(t, rome, step) }
		}
		trigger, mode := triggers[rng.Intn(len(triggers))], modes[rng.Intn(len(modes))]
		// Records in rising time with jitter; some much older (late, but
		// within allowed_lateness, so nothing is dropped).
		n := 40 + rng.Intn(80)
		var recs []cumRecord
		var in strings.Builder
		disorder := span / int64(n) * 3
		for i := range n {
			r := cumRecord{key: fmt.Sprintf("k%d", rng.Intn(3)), t: from + span*int64(i)/int64(n) - rng.Int63n(disorder+1), x: rng.Int63n(100) - 20}
			if rng.Intn(10) == 0 {
				r.t -= rng.Int63n(span / 4)
			}
			recs = append(recs, r)
			fmt.Fprintf(&in, "{\"partition\":%d,\"value\":{\"k\":%q,\"t\":%d,\"x\":%d}}\n", rng.Intn(2), r.key, r.t, r.x)
		}
		lateness := fmt.Sprintf("%dms", span)
		name := fmt.Sprintf("seed%d", seed)
		t.Run(name, func(t *testing.T) {
			p := cumPipeline(t, window, lateness, trigger, mode, "")
			sum, out, errs := replayString(t, p, in.String(), 2)
			if sum.LateDropped != 0 || sum.DeadLetters != 0 {
				t.Fatalf("%s %s %s: %d dropped, %d dead letters: %s", window, trigger, mode, sum.LateDropped, sum.DeadLetters, errs)
			}
			what := fmt.Sprintf("%s %s %s", window, strings.TrimSpace(trigger), mode)
			checkWindows(t, what, cumGot(t, out, mode == "discarding"), cumExpected(recs, windowsOf), mode == "discarding")
		})
	}
}
