package windowing

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// BenchmarkSketchState measures the quantiles and top_k aggregates of one
// window of n values: ns/op is adding the n values; bytes/window is the
// aggregate's share of the window's encoded state (what the changelog and
// Pebble hold), against avg's for scale (docs/PERFORMANCE.md). Values:
// lognormal latencies around 20 ms for quantiles, Zipf-distributed
// (s = 1.2) pages of 5000 for top_k (k 10, capacity 100), as bench/gen
// draws pages.
func BenchmarkSketchState(b *testing.B) {
	specs := prepareAggregates([]AggSpec{
		{Name: "avg", Op: Avg},
		{Name: "quantiles", Op: Quantiles, Quantiles: testQuantiles[6:10], RelativeAccuracy: DefaultRelativeAccuracy, MaxBuckets: DefaultMaxBuckets},
		{Name: "top_k", Op: TopK, K: 10, Capacity: DefaultCapacity(10)},
	})
	for _, n := range []int{1, 10, 1000, 100000} {
		rng := rand.New(rand.NewPCG(1, uint64(n)))
		z := rand.NewZipf(rng, 1.2, 1, 4999)
		ins := make([]Input, n)
		for i := range ins {
			ins[i] = Input{Num: math.Exp(3 + rng.NormFloat64()), Text: "/products/" + strconv.FormatUint(z.Uint64(), 10)}
		}
		for i := range specs {
			spec := &specs[i]
			b.Run(fmt.Sprintf("%s/n=%d", spec.Name, n), func(b *testing.B) {
				var size int
				for it := 0; it < b.N; it++ {
					var a accum
					for j := range ins {
						a.add(spec, &ins[j])
					}
					enc, err := appendAccums(nil, []accum{a}, specs[i:i+1])
					if err != nil {
						b.Fatal(err)
					}
					size = len(enc)
				}
				b.ReportMetric(float64(size), "bytes/window")
			})
		}
	}
}
