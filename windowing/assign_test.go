package windowing

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestAssignerStarts(t *testing.T) {
	ms := int64(1)
	for _, tc := range []struct {
		name string
		spec WindowSpec
		t    int64
		want []int64
	}{
		{"tumbling start", WindowSpec{Kind: Tumbling, Size: 10000}, 0, []int64{0}},
		{"tumbling end is next window", WindowSpec{Kind: Tumbling, Size: 10000}, 10000, []int64{10000}},
		{"tumbling last ms", WindowSpec{Kind: Tumbling, Size: 10000}, 9999, []int64{0}},
		{"tumbling negative", WindowSpec{Kind: Tumbling, Size: 10000}, -1, []int64{-10000}},
		{"tumbling negative boundary", WindowSpec{Kind: Tumbling, Size: 10000}, -10000, []int64{-10000}},
		{"tumbling negative below", WindowSpec{Kind: Tumbling, Size: 10000}, -10001, []int64{-20000}},
		{"tumbling offset", WindowSpec{Kind: Tumbling, Size: 10000, Offset: 3000}, 2999, []int64{-7000}},
		{"tumbling negative offset", WindowSpec{Kind: Tumbling, Size: 10000, Offset: -3000}, 7000, []int64{7000}},
		{"tumbling offset beyond size", WindowSpec{Kind: Tumbling, Size: 10000, Offset: 23000}, 2999, []int64{-7000}},
		{"hopping 2x", WindowSpec{Kind: Hopping, Size: 10000, Hop: 5000}, 7000, []int64{0, 5000}},
		{"hopping on hop boundary", WindowSpec{Kind: Hopping, Size: 10000, Hop: 5000}, 5000, []int64{0, 5000}},
		{"hopping negative", WindowSpec{Kind: Hopping, Size: 10000, Hop: 5000}, -1, []int64{-10000, -5000}},
		{"hopping 60x", WindowSpec{Kind: Hopping, Size: 60000, Hop: 1000}, 59999, seq(0, 59000, 1000)},
		{"hopping uneven 4", WindowSpec{Kind: Hopping, Size: 10000, Hop: 3000}, 0, []int64{-9000, -6000, -3000, 0}},
		{"hopping uneven 3", WindowSpec{Kind: Hopping, Size: 10000, Hop: 3000}, 1000, []int64{-6000, -3000, 0}},
		{"hopping offset", WindowSpec{Kind: Hopping, Size: 10000, Hop: 4000, Offset: 1000}, 5000, []int64{-3000, 1000, 5000}},
		{"hop 1ms", WindowSpec{Kind: Hopping, Size: 3, Hop: ms}, 10, []int64{8, 9, 10}},
		{"max edge", WindowSpec{Kind: Tumbling, Size: 10}, math.MaxInt64, nil},
		{"min edge", WindowSpec{Kind: Tumbling, Size: 10}, math.MinInt64, nil},
		{"min edge aligned", WindowSpec{Kind: Tumbling, Size: 2}, math.MinInt64, []int64{math.MinInt64}},
		{"min edge hopping", WindowSpec{Kind: Hopping, Size: 4, Hop: 2}, math.MinInt64 + 1, []int64{math.MinInt64}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAssigner(tc.spec)
			var got []int64
			for _, w := range a.Windows(nil, tc.t) {
				if w.End-w.Start != tc.spec.Size {
					t.Fatalf("window [%d,%d) is not %d long", w.Start, w.End, tc.spec.Size)
				}
				got = append(got, w.Start)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Windows(%d) starts = %v, want %v", tc.t, got, tc.want)
			}
			for _, s := range got {
				if !(s <= tc.t && tc.t-s < tc.spec.Size) {
					t.Fatalf("window [%d,%d) does not contain %d", s, s+tc.spec.Size, tc.t)
				}
			}
		})
	}
}

func seq(from, to, step int64) []int64 {
	var out []int64
	for v := from; v <= to; v += step {
		out = append(out, v)
	}
	return out
}

func TestPaneJSON(t *testing.T) {
	specs := []AggSpec{{Name: "clicks", Op: Count}, {Name: "revenue", Op: Sum, Field: "amount"}, {Name: "lo", Op: Min, Field: "amount"}}
	p := &Pane{Key: "u1", Start: 1700000000000, End: 1700000010000, Timing: OnTime, Index: 1, Final: true, Mode: Accumulating,
		Values: []Value{{Kind: IntValue, Int: 3}, {Kind: NumValue, Num: 12.5}, {}}}
	got := string(AppendJSON(nil, p, specs))
	want := `{"key":"u1","window":{"start":1700000000000,"end":1700000010000},"pane":{"timing":"ON_TIME","index":1,"final":true,"mode":"accumulating"},"retraction":false,"aggregates":{"clicks":3,"revenue":12.5,"lo":null}}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if id := p.ID(); id != "u1/1700000000000/1700000010000/1" {
		t.Fatalf("ID = %q", id)
	}
	p.Quiet = true
	want = strings.Replace(want, `"mode":"accumulating"}`, `"mode":"accumulating","quiet":true}`, 1)
	if got := string(AppendJSON(nil, p, specs)); got != want {
		t.Fatalf("quiet pane:\ngot  %s\nwant %s", got, want)
	}
	if id := p.ID(); id != "u1/1700000000000/1700000010000/1" {
		t.Fatalf("a quiet pane's ID = %q: quiet is not part of it", id)
	}
}

func TestJSONNumbers(t *testing.T) {
	for _, tc := range []struct {
		v    Value
		want string
	}{
		{Value{Kind: NumValue, Num: 3}, "3"},
		{Value{Kind: NumValue, Num: -0.25}, "-0.25"},
		{Value{Kind: NumValue, Num: 1e21}, "1e+21"},
		{Value{Kind: NumValue, Num: 1e20}, "100000000000000000000"},
		{Value{Kind: NumValue, Num: 1e-7}, "1e-7"},
		{Value{Kind: NumValue, Num: math.Inf(1)}, "null"},
		{Value{Kind: IntValue, Int: -7}, "-7"},
		{Value{}, "null"},
	} {
		if got := string(AppendValue(nil, tc.v)); got != tc.want {
			t.Errorf("AppendValue(%+v) = %s, want %s", tc.v, got, tc.want)
		}
	}
}

func TestKeyStateCodecRoundTrip(t *testing.T) {
	specs := []AggSpec{{Name: "n", Op: Count}, {Name: "s", Op: Sum}, {Name: "lo", Op: Min}, {Name: "avg", Op: Avg}, {Name: "d", Op: DistinctApprox, Precision: 10}}
	w1 := &window{start: -5, end: 10, nextIndex: 3, onTimeDone: true, lateSeen: true, settled: true, sincePane: 2, timer: 99, hasProc: true, proc: 1234,
		acc: make([]accum, len(specs)), last: &lastPane{start: -5, end: 8, timing: Late, mode: Retracting, index: 2, values: []Value{{Kind: IntValue, Int: 4}, {Kind: NumValue, Num: 1.5}, {}, {Kind: NumValue, Num: 2}, {Kind: IntValue, Int: 1}}}}
	w2 := &window{start: 20, end: 30, acc: make([]accum, len(specs))}
	for i := range specs {
		w1.acc[i].add(&specs[i], &Input{Num: 2.5, Hash: 42})
		w1.acc[i].add(&specs[i], &Input{Num: -1, Hash: 43})
	}
	ks := &keyState{key: "k", windows: []*window{w1, w2}}
	b, err := encodeKeyState(nil, ks, specs)
	if err != nil {
		t.Fatal(err)
	}
	var got keyState
	if err := decodeKeyState(b, &got, specs); err != nil {
		t.Fatal(err)
	}
	again, err := encodeKeyState(nil, &got, specs)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(b) {
		t.Fatal("re-encoding differs")
	}
	g := got.windows[0]
	if g.start != -5 || g.end != 10 || g.nextIndex != 3 || !g.onTimeDone || !g.lateSeen || !g.settled || g.sincePane != 2 || g.timer != 99 || !g.hasProc || g.proc != 1234 {
		t.Fatalf("window fields lost: %+v", g)
	}
	if !reflect.DeepEqual(g.last, w1.last) {
		t.Fatalf("last pane = %+v, want %+v", g.last, w1.last)
	}
	for i := range specs {
		if a, b := g.acc[i].result(&specs[i]), w1.acc[i].result(&specs[i]); a != b {
			t.Errorf("%s: %+v != %+v", specs[i].Name, a, b)
		}
	}
	for cut := 0; cut < len(b); cut++ {
		if err := decodeKeyState(b[:cut], &got, specs); err == nil {
			t.Fatalf("truncated encoding (%d of %d bytes) decoded without error", cut, len(b))
		}
	}
}

// TestAppendValueMatchesStrconv: numbers written on appendFewDecimals'
// path are strconv's shortest form, byte for byte — sums of decimals as
// aggregates make them, random bit patterns, and the edges of the path.
func TestAppendValueMatchesStrconv(t *testing.T) {
	want := func(f float64) string {
		format := byte('f')
		if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
			format = 'e'
		}
		s := strconv.FormatFloat(f, format, -1, 64)
		if n := len(s); format == 'e' && n >= 4 && s[n-4:n-1] == "e-0" {
			s = s[:n-2] + s[n-1:]
		}
		return s
	}
	cases := []float64{0, math.Copysign(0, -1), 0.1 + 0.2, 1e9, 999999999.9999, 1e9 - 1e-4, 999999999.99995, 0.0001, 0.00005,
		0.00012345, 1e-6, 123.4560, -543.87, 100, 0.5, 1.0000000001, 5e-324, math.MaxFloat64, 1e15 + 0.25}
	rng := rand.New(rand.NewPCG(9, 9))
	for range 100000 {
		var sum float64
		digits := rng.IntN(5)
		for range 1 + rng.IntN(6) {
			sum += float64(rng.Int64N(2_000_000)-1_000_000) / math.Pow10(digits)
		}
		cases = append(cases, sum, sum*1000, math.Float64frombits(rng.Uint64()), float64(rng.Int64N(1e13))/math.Pow10(rng.IntN(6)))
	}
	for _, f := range cases {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		if got := string(AppendValue(nil, Value{Kind: NumValue, Num: f})); got != want(f) {
			t.Fatalf("AppendValue(%v) = %s, strconv %s", f, got, want(f))
		}
	}
}

// TestPaneJSONMatchesAppendJSON: PaneJSON writes every pane of a sequence
// byte for byte as AppendJSON does — runs of one window, windows that
// differ in the start or only in the end (sessions), names and keys that
// need escapes, fewer values than aggregates — into one reused buffer.
func TestPaneJSONMatchesAppendJSON(t *testing.T) {
	specs := []AggSpec{{Name: "n", Op: Count}, {Name: `to"tal`, Op: Sum, Field: "x"}, {Name: "é", Op: Max, Field: "x"}}
	enc := NewPaneJSON(specs)
	rng := rand.New(rand.NewPCG(4, 4))
	var buf []byte
	start, end := int64(-20000), int64(-10000)
	for i := range 5000 {
		switch rng.IntN(8) {
		case 0:
			start, end = start+10000, end+10000
		case 1:
			end += int64(rng.IntN(3000)) // a session that grew: same start
		case 2:
			start -= 1 // same end
		}
		p := &Pane{Key: fmt.Sprintf("k%d\"\n%d", i%7, rng.IntN(100)), Start: start, End: end, Timing: Timing(rng.IntN(3)), Index: uint32(rng.IntN(4)),
			Final: rng.IntN(2) == 0, Mode: Mode(rng.IntN(3)), Retraction: rng.IntN(5) == 0, Quiet: rng.IntN(4) == 0,
			Values: []Value{{Kind: IntValue, Int: rng.Int64N(100)}, {Kind: NumValue, Num: float64(rng.Int64N(1e6)) / 100}, {}}[:rng.IntN(4)]}
		want := string(AppendJSON(nil, p, specs))
		buf = enc.Append(buf[:0], p)
		if string(buf) != want {
			t.Fatalf("pane %d: PaneJSON %s\nAppendJSON %s", i, buf, want)
		}
	}
}
