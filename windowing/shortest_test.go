package windowing

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestShortestWithin: sums of decimal inputs print as the decimal sum; a
// value far from any short decimal is left alone.
func TestShortestWithin(t *testing.T) {
	for _, c := range []struct {
		inputs []float64
		want   string
	}{
		{[]float64{0.1, 0.2}, "0.3"},
		{[]float64{-0.1, -0.2}, "-0.3"},
		{[]float64{1.1, 2.2, 3.3}, "6.6"},
		{[]float64{19.99, 5.01, 0.01, 100}, "125.01"},
		{[]float64{1.0 / 3, 1.0 / 3}, "0.6666666666666666"}, // no short decimal near it
		{[]float64{0.5, 0.25}, "0.75"},
		{[]float64{1e300, 1e300}, "2e+300"},
		{[]float64{1.2345678, 1}, "2.2345677999999998"}, // 7 fraction digits: as summed
	} {
		s := 0.0
		for _, x := range c.inputs {
			s += x
		}
		got := ShortestWithin(s, int64(len(c.inputs)))
		if str := strconv.FormatFloat(got, 'g', -1, 64); str != c.want {
			t.Errorf("%v: summed %v, shown %s, want %s", c.inputs, s, str, c.want)
		}
	}
	// The quickstart's kind of input: amounts with two decimals.
	r := rand.New(rand.NewPCG(1, 2))
	noisy := 0
	for trial := 0; trial < 2000; trial++ {
		n := 1 + r.IntN(200)
		sum, cents := 0.0, int64(0)
		for i := 0; i < n; i++ {
			c := r.Int64N(10000)
			cents += c
			sum += float64(c) / 100
		}
		want := float64(cents) / 100
		if sum != want {
			noisy++
		}
		if got := ShortestWithin(sum, int64(n)); got != want {
			t.Fatalf("%d amounts of 2 decimals: sum %v, shown %v, want %v", n, sum, got, want)
		}
	}
	if noisy == 0 {
		t.Fatalf("no trial summed with binary noise: the test checks nothing")
	}
	// Never moved by more than the bound; one term and specials as they are.
	for _, f := range []float64{math.Pi, 1e-300, 123456789.123456789, math.Inf(1), 0} {
		if got := ShortestWithin(f, 1); got != f {
			t.Errorf("one term %v became %v", f, got)
		}
		if got := ShortestWithin(f, 1000); !(math.Abs(got-f) <= 1000*0x1p-53*math.Abs(f)) && !math.IsInf(f, 0) {
			t.Errorf("%v moved to %v, past the bound", f, got)
		}
	}
	// An average's repeating decimal is not cut to a rounded one.
	if f := 7.612612612612613; ShortestWithin(f, 112) != f {
		t.Errorf("average %v became %v", f, ShortestWithin(f, 112))
	}
	if got := ShortestWithin(math.NaN(), 5); !math.IsNaN(got) {
		t.Errorf("NaN became %v", got)
	}
}

func BenchmarkShortestWithin(b *testing.B) {
	for _, c := range []struct {
		name string
		f    float64
	}{{"two-decimals", 2306.040000000001}, {"integer", 1234}, {"no-short-decimal", math.Pi * 1000}} {
		b.Run(c.name, func(b *testing.B) {
			var sink float64
			for b.Loop() {
				sink += ShortestWithin(c.f, 100)
			}
			_ = sink
		})
	}
}
