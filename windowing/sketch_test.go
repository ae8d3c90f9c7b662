package windowing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// The property tests of quantiles and top_k (docs/SEMANTICS.md,
// Aggregates) against exact computations on random data.

// testQuantiles are the quantiles of the tests, as a configuration gives
// them (0.29 is not a binary fraction: its rank must come from the decimal).
var testQuantiles = func() []Quantile {
	var qs []Quantile
	for _, s := range []string{"0", "0.001", "0.01", "0.1", "0.25", "0.29", "0.5", "0.75", "0.9", "0.99", "0.999", "1"} {
		r, _ := new(big.Rat).SetString(s)
		qs = append(qs, Quantile{Text: s, Num: r.Num().Uint64(), Den: r.Denom().Uint64()})
	}
	return qs
}()

// datasets are the random inputs: name and generator of n values.
var datasets = []struct {
	name string
	gen  func(rng *rand.Rand) float64
}{
	{"uniform", func(rng *rand.Rand) float64 { return rng.Float64() * 1000 }},
	{"lognormal", func(rng *rand.Rand) float64 { return math.Exp(2 * rng.NormFloat64()) }},
	{"pareto-1.1", func(rng *rand.Rand) float64 { return math.Pow(1-rng.Float64(), -1/1.1) }},
	{"normal-negatives", func(rng *rand.Rand) float64 { return 100 * rng.NormFloat64() }},
	{"duplicates", func(rng *rand.Rand) float64 { return float64(rng.IntN(5) - 1) }},
	{"extremes", func(rng *rand.Rand) float64 {
		v := math.Exp(rng.Float64()*1400 - 700)
		if rng.IntN(2) == 0 {
			v = -v
		}
		return v
	}},
}

// 101: 0.29·100 is 29, but 28.999999999999996 in floating point.
var sizes = []int{1, 2, 3, 10, 101, 1000, 20000}

func values(rng *rand.Rand, gen func(*rand.Rand) float64, n int) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = gen(rng)
	}
	return xs
}

// exactRank is ⌊q·(n−1)⌋ computed with big integers, independently of
// rank.
func exactRank(q Quantile, n int) int {
	p := new(big.Int).Mul(new(big.Int).SetUint64(q.Num), big.NewInt(int64(n-1)))
	return int(p.Quo(p, new(big.Int).SetUint64(q.Den)).Int64())
}

// quantileEstimates parses a quantiles pane value, checking that its
// members are the spec's quantile texts in order; nil values are JSON null.
func quantileEstimates(t *testing.T, raw string, spec *AggSpec) []*float64 {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("quantiles value %s: not an object", raw)
	}
	var out []*float64
	for i := 0; dec.More(); i++ {
		tok, err := dec.Token()
		if err != nil || i >= len(spec.Quantiles) || tok != spec.Quantiles[i].Text {
			t.Fatalf("quantiles value %s: member %d is %v, want %q", raw, i, tok, spec.Quantiles[i].Text)
		}
		tok, err = dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		switch v := tok.(type) {
		case nil:
			out = append(out, nil)
		case json.Number:
			f, err := strconv.ParseFloat(string(v), 64)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, &f)
		default:
			t.Fatalf("quantiles value %s: member %d is %v", raw, i, tok)
		}
	}
	if len(out) != len(spec.Quantiles) {
		t.Fatalf("quantiles value %s: %d members, want %d", raw, len(out), len(spec.Quantiles))
	}
	return out
}

// checkQuantiles checks a quantiles pane value against the exact quantiles
// of xs: every estimate v of x within α·|x|, or, for an x below the
// lowest bucket kept (collapsed), that bucket's estimate.
func checkQuantiles(t *testing.T, raw string, spec *AggSpec, xs []float64, q *quantileSketch) {
	t.Helper()
	got := quantileEstimates(t, raw, spec)
	if len(xs) == 0 {
		for i, v := range got {
			if v != nil {
				t.Fatalf("quantile %s of no values = %v, want null", spec.Quantiles[i].Text, *v)
			}
		}
		return
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	m := spec.logMap()
	for i, qu := range spec.Quantiles {
		x := sorted[exactRank(qu, len(sorted))]
		if got[i] == nil {
			t.Fatalf("quantile %s = null, want about %v", qu.Text, x)
		}
		v := *got[i]
		if q != nil && m.ord(x) < q.b[0].ord {
			if want := m.short(m.value(q.b[0].ord)); v != want {
				t.Fatalf("quantile %s of %d values: %v is collapsed, estimate %v, want the lowest bucket's %v", qu.Text, len(xs), x, v, want)
			}
			continue
		}
		if math.Abs(v-x) > spec.RelativeAccuracy*math.Abs(x) {
			t.Fatalf("quantile %s of %d values: estimate %v of %v, relative error %g > %g", qu.Text, len(xs), v, x, math.Abs(v-x)/math.Abs(x), spec.RelativeAccuracy)
		}
	}
}

func quantileSpec(alpha float64, maxBuckets int) *AggSpec {
	specs := prepareAggregates([]AggSpec{{Name: "q", Op: Quantiles, Quantiles: testQuantiles, RelativeAccuracy: alpha, MaxBuckets: maxBuckets}})
	return &specs[0]
}

// accumOf adds xs to a fresh accumulator.
func accumOf(spec *AggSpec, xs []float64, texts []string) accum {
	var a accum
	for i := range xs {
		in := Input{Num: xs[i]}
		if texts != nil {
			in.Text = texts[i]
		}
		a.add(spec, &in)
	}
	for i := len(xs); i < len(texts); i++ {
		a.add(spec, &Input{Text: texts[i]})
	}
	return a
}

func encodeAccum(t *testing.T, spec *AggSpec, a *accum) []byte {
	t.Helper()
	b, err := appendAccums(nil, []accum{*a}, []AggSpec{*spec})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decodeAccum(t *testing.T, spec *AggSpec, b []byte) accum {
	t.Helper()
	d := newDecoder(b)
	acc, err := d.accums([]AggSpec{*spec})
	if err != nil || d.err() != nil || d.left() != 0 {
		t.Fatalf("decode: %v %v, %d bytes left", err, d.err(), d.left())
	}
	return acc[0]
}

// variants returns the accumulator of the values given by add (called with
// the indexes of a subset), built in several ways that must all give the
// same state when the aggregate's merge is exact: in order, shuffled,
// split into random parts merged left to right in random order, merged as
// a tree, and after an encode/decode of each part.
func variants(t *testing.T, rng *rand.Rand, spec *AggSpec, n int, add func(a *accum, idx []int)) map[string]accum {
	t.Helper()
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	out := map[string]accum{}
	var a accum
	add(&a, all)
	out["in order"] = a
	shuffled := slices.Clone(all)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	var s accum
	add(&s, shuffled)
	out["shuffled"] = s
	// Random parts.
	k := 1 + rng.IntN(8)
	parts := make([]accum, k)
	for _, i := range shuffled {
		add(&parts[rng.IntN(k)], []int{i})
	}
	mergeAll := func(order []int, restore bool) accum {
		var m accum
		for _, p := range order {
			part := parts[p]
			if restore {
				part = decodeAccum(t, spec, encodeAccum(t, spec, &part))
			}
			if err := m.merge(spec, &part); err != nil {
				t.Fatal(err)
			}
		}
		return m
	}
	order := rng.Perm(k)
	out["parts merged"] = mergeAll(order, false)
	out["parts merged in another order"] = mergeAll(rng.Perm(k), false)
	out["parts restored and merged"] = mergeAll(order, true)
	// A tree: pairs merged, then the pairs.
	level := slices.Clone(parts)
	for len(level) > 1 {
		var next []accum
		for i := 0; i < len(level); i += 2 {
			var m accum // merging never changes its argument: level[i] stays as it was
			if err := m.merge(spec, &level[i]); err != nil {
				t.Fatal(err)
			}
			if i+1 < len(level) {
				if err := m.merge(spec, &level[i+1]); err != nil {
					t.Fatal(err)
				}
			}
			next = append(next, m)
		}
		level = next
	}
	out["tree"] = level[0]
	whole := out["in order"]
	out["restored"] = decodeAccum(t, spec, encodeAccum(t, spec, &whole))
	return out
}

// sameVariants checks that every variant has the reference's result and
// encoding.
func sameVariants(t *testing.T, spec *AggSpec, vs map[string]accum) {
	t.Helper()
	ref := vs["in order"]
	want, wantEnc := ref.result(spec).Raw, encodeAccum(t, spec, &ref)
	for name, v := range vs {
		if got := v.result(spec).Raw; got != want {
			t.Fatalf("%s: %s\nin order: %s", name, got, want)
		}
		if got := encodeAccum(t, spec, &v); !bytes.Equal(got, wantEnc) {
			t.Fatalf("%s: state %x, in order %x", name, got, wantEnc)
		}
	}
}

// TestQuantilesWithinGuarantee: every quantile of random data sets is
// within α of the exact one, and the state and estimates are the same
// whatever the order of the values, the merges and a restore.
func TestQuantilesWithinGuarantee(t *testing.T) {
	for di, ds := range datasets {
		for _, n := range sizes {
			for ai, alpha := range []float64{0.01, 0.001, 0.05, 0.3} {
				rng := rand.New(rand.NewPCG(uint64(di), uint64(n*10+ai)))
				spec := quantileSpec(alpha, 1<<16)
				xs := values(rng, ds.gen, n)
				t.Run(fmt.Sprintf("%s-n%d-a%g", ds.name, n, alpha), func(t *testing.T) {
					vs := variants(t, rng, spec, n, func(a *accum, idx []int) {
						for _, i := range idx {
							a.add(spec, &Input{Num: xs[i]})
						}
					})
					sameVariants(t, spec, vs)
					a := vs["in order"]
					checkQuantiles(t, a.result(spec).Raw, spec, xs, nil)
				})
			}
		}
	}
}

// TestRankExact: rank is ⌊q·(n−1)⌋ of the decimal q, exactly.
func TestRankExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < 100000; i++ {
		den := uint64(1) << rng.IntN(64)
		if rng.IntN(2) == 0 {
			den = uint64(math.Pow10(rng.IntN(20)))
		}
		q := Quantile{Num: rng.Uint64N(den + 1), Den: den}
		n := 1 + rng.Int64N(1<<40)
		if i%2 == 0 {
			n = 1 + rng.Int64N(1000)
		}
		if got, want := rank(q.Num, q.Den, n), exactRank(q, int(n)); got != uint64(want) {
			t.Fatalf("rank(%d/%d, n=%d) = %d, want %d", q.Num, q.Den, n, got, want)
		}
	}
}

// TestQuantilesCollapsed: with few buckets, the lowest are collapsed:
// quantiles in the buckets kept stay within the guarantee, lower ones are
// the lowest kept bucket's estimate, and the state is still independent of
// order, merges and restore.
func TestQuantilesCollapsed(t *testing.T) {
	collapsed := 0
	for di, ds := range datasets {
		for _, mb := range []int{1, 2, 32} {
			rng := rand.New(rand.NewPCG(uint64(di), uint64(mb)))
			spec := quantileSpec(0.01, mb)
			xs := values(rng, ds.gen, 5000)
			t.Run(fmt.Sprintf("%s-buckets%d", ds.name, mb), func(t *testing.T) {
				vs := variants(t, rng, spec, len(xs), func(a *accum, idx []int) {
					for _, i := range idx {
						a.add(spec, &Input{Num: xs[i]})
					}
				})
				sameVariants(t, spec, vs)
				a := vs["in order"]
				if len(a.sk.q.b) > mb {
					t.Fatalf("%d buckets, at most %d", len(a.sk.q.b), mb)
				}
				m := spec.logMap()
				if slices.ContainsFunc(xs, func(x float64) bool { return m.ord(x) < a.sk.q.b[0].ord }) {
					collapsed++
				}
				checkQuantiles(t, a.result(spec).Raw, spec, xs, &a.sk.q)
			})
		}
	}
	if collapsed == 0 {
		t.Fatal("no data set was collapsed: the test shows nothing")
	}
}

// TestQuantilesEmpty: a window of no values (discarding, after a pane)
// shows null for every quantile.
func TestQuantilesEmpty(t *testing.T) {
	spec := quantileSpec(0.01, 2048)
	var a accum
	v := a.result(spec)
	checkQuantiles(t, v.Raw, spec, nil, nil)
	if enc := encodeAccum(t, spec, &a); len(enc) != 2 {
		t.Fatalf("empty quantiles state is %d bytes, want 2", len(enc))
	}
}

func topKSpec(k, capacity int) *AggSpec {
	return &AggSpec{Name: "top", Op: TopK, K: k, Capacity: capacity}
}

// zipfTexts draws n values of an alphabet of size distinct values with
// Zipf frequencies (s = 1.2): a few frequent values, a long tail.
func zipfTexts(rng *rand.Rand, distinct, n int) ([]string, map[string]uint64) {
	z := rand.NewZipf(rng, 1.2, 1, uint64(distinct-1))
	texts := make([]string, n)
	exact := map[string]uint64{}
	for i := range texts {
		texts[i] = "/page/" + strconv.FormatUint(z.Uint64(), 10)
		exact[texts[i]]++
	}
	return texts, exact
}

type topItem struct {
	Value string `json:"value"`
	Count uint64 `json:"count"`
	Error uint64 `json:"error"`
}

// checkTopK checks a top_k pane value against the exact counts: at most k
// items, in (count desc, value asc) order, each within its bounds; exact
// (error 0, the k first of the exact counts) when exact is set.
func checkTopK(t *testing.T, raw string, spec *AggSpec, counts map[string]uint64, exact bool) {
	t.Helper()
	var items []topItem
	if err := json.Unmarshal([]byte(raw), &items); err != nil {
		t.Fatalf("top_k value %s: %v", raw, err)
	}
	if len(items) > spec.K {
		t.Fatalf("top_k lists %d values, k is %d", len(items), spec.K)
	}
	for i, it := range items {
		if i > 0 && (items[i-1].Count < it.Count || items[i-1].Count == it.Count && items[i-1].Value >= it.Value) {
			t.Fatalf("top_k value %s: not in (count desc, value asc) order", raw)
		}
		if tc := counts[it.Value]; tc > it.Count || it.Count-it.Error > tc {
			t.Fatalf("top_k %q: count %d, error %d; true count %d out of bounds", it.Value, it.Count, it.Error, tc)
		}
	}
	if !exact {
		return
	}
	var want []topItem
	for v, c := range counts {
		want = append(want, topItem{v, c, 0})
	}
	slices.SortFunc(want, func(a, b topItem) int {
		if a.Count != b.Count {
			return int(b.Count) - int(a.Count)
		}
		if a.Value < b.Value {
			return -1
		}
		return 1
	})
	want = want[:min(len(want), spec.K)]
	if !slices.Equal(items, want) {
		t.Fatalf("top_k %v, want exactly %v", items, want)
	}
}

// checkSummary checks the whole summary's invariants (topk.go) against the
// exact counts.
func checkSummary(t *testing.T, spec *AggSpec, s *topK, counts map[string]uint64) {
	t.Helper()
	if len(s.e) > spec.capacity() {
		t.Fatalf("%d counters, capacity %d", len(s.e), spec.capacity())
	}
	has := map[string]bool{}
	for _, e := range s.e {
		has[e.v] = true
		if tc := counts[e.v]; tc > e.n || e.n-e.err > tc {
			t.Fatalf("counter %q: count %d, error %d; true count %d out of bounds", e.v, e.n, e.err, tc)
		}
	}
	for v, c := range counts {
		if !has[v] && c > s.floor {
			t.Fatalf("%q (true count %d) has no counter, floor %d", v, c, s.floor)
		}
	}
}

// TestTopKExactUnderCapacity: with at most capacity distinct values the
// counts are exact, and identical whatever the order, merges and restore.
func TestTopKExactUnderCapacity(t *testing.T) {
	for seed := uint64(0); seed < 30; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		k := 1 + rng.IntN(12)
		spec := topKSpec(k, max(100, 10*k))
		distinct := 1 + rng.IntN(spec.capacity())
		texts, counts := zipfTexts(rng, distinct, 1+rng.IntN(5000))
		t.Run(fmt.Sprintf("seed%d-k%d-distinct%d", seed, k, distinct), func(t *testing.T) {
			vs := variants(t, rng, spec, len(texts), func(a *accum, idx []int) {
				for _, i := range idx {
					a.add(spec, &Input{Text: texts[i]})
				}
			})
			sameVariants(t, spec, vs)
			a := vs["in order"]
			if a.sk.top.floor != 0 {
				t.Fatalf("floor %d under capacity", a.sk.top.floor)
			}
			checkSummary(t, spec, &a.sk.top, counts)
			checkTopK(t, a.result(spec).Raw, spec, counts, true)
		})
	}
}

// TestTopKBoundsOverCapacity: over capacity, every way of building the
// summary keeps count − error <= true count <= count, every value without
// a counter within the floor; and merging is commutative.
func TestTopKBoundsOverCapacity(t *testing.T) {
	over := 0
	for seed := uint64(0); seed < 30; seed++ {
		rng := rand.New(rand.NewPCG(seed, 2))
		k := 1 + rng.IntN(10)
		spec := topKSpec(k, k+rng.IntN(40))
		texts, counts := zipfTexts(rng, 2000, 2000+rng.IntN(20000))
		t.Run(fmt.Sprintf("seed%d-k%d-capacity%d", seed, k, spec.Capacity), func(t *testing.T) {
			vs := variants(t, rng, spec, len(texts), func(a *accum, idx []int) {
				for _, i := range idx {
					a.add(spec, &Input{Text: texts[i]})
				}
			})
			for name, a := range vs {
				if a.sk.top.floor > 0 {
					over++
				}
				// Built record by record, the floor is at most n / capacity.
				if (name == "in order" || name == "shuffled") && a.sk.top.floor*uint64(spec.Capacity) > uint64(len(texts)) {
					t.Fatalf("%s: floor %d over n / capacity = %d / %d", name, a.sk.top.floor, len(texts), spec.Capacity)
				}
				checkSummary(t, spec, &a.sk.top, counts)
				checkTopK(t, a.result(spec).Raw, spec, counts, false)
				r := decodeAccum(t, spec, encodeAccum(t, spec, &a))
				if got, want := r.result(spec).Raw, a.result(spec).Raw; got != want {
					t.Fatalf("%s restored: %s, want %s", name, got, want)
				}
			}
			// Commutative: A+B and B+A are the same summary.
			a, b := vs["in order"], vs["shuffled"]
			ab, ba := accum{}, accum{}
			for _, m := range []struct {
				into *accum
				x, y *accum
			}{{&ab, &a, &b}, {&ba, &b, &a}} {
				if err := m.into.merge(spec, m.x); err != nil {
					t.Fatal(err)
				}
				if err := m.into.merge(spec, m.y); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(encodeAccum(t, spec, &ab), encodeAccum(t, spec, &ba)) {
				t.Fatal("A+B and B+A differ")
			}
		})
	}
	if over == 0 {
		t.Fatal("no summary went over its capacity: the test shows nothing")
	}
}

// TestTopKText: non-string values are listed by their JSON text, escaped
// in the output as pane keys are.
func TestTopKText(t *testing.T) {
	spec := topKSpec(3, 100)
	a := accumOf(spec, nil, []string{`{"a":1}`, "7", "é\"\n", "7"})
	want := `[{"value":"7","count":2,"error":0},{"value":"{\"a\":1}","count":1,"error":0},{"value":"é\"\n","count":1,"error":0}]`
	if got := a.result(spec).Raw; got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	var empty accum
	if got := empty.result(spec).Raw; got != "[]" {
		t.Fatalf("no values: %s, want []", got)
	}
}

// CheckQuantiles is checkQuantiles for the engine's property tests, of a
// sketch that was not collapsed.
func CheckQuantiles(t *testing.T, raw string, spec *AggSpec, xs []float64) {
	t.Helper()
	checkQuantiles(t, raw, spec, xs, nil)
}

// CheckTopK is checkTopK for the engine's property tests.
func CheckTopK(t *testing.T, raw string, spec *AggSpec, counts map[string]uint64, exact bool) {
	t.Helper()
	checkTopK(t, raw, spec, counts, exact)
}
