package windowing

import "sort"

// txnFlat is a transaction key's records merged per event time
// (transaction.go): a slideStore in one array, k+1 accumulators per time
// (k aggregates), the first holding the time in its n. One array, not a
// slideFlat's two: a record reads one cold line fewer, and a key's store is
// mostly a few times, appended in order.
type txnFlat struct {
	specs []AggSpec
	slab  []accum
	n     int // times held: len(slab) / width()
	// win is a window of the key kept here, beside its state, for its
	// newest window mostly (Engine.openWindow takes it when free, as a
	// key mostly has one window): a record reads it without a miss of
	// its own. winUsed: a window of the key is it.
	win     windowAccs4
	winUsed bool
}

// takeWindow returns the key's own window, zero, with n aggregates, or nil
// when it is in use or too small.
func (x *txnFlat) takeWindow(n int) *window {
	if x.winUsed || n > len(x.win.acc) {
		return nil
	}
	x.winUsed = true
	x.win = windowAccs4{}
	x.win.w.acc = x.win.acc[:n:n]
	return &x.win.w
}

// giveWindow takes back w, which the key no longer lists, when it is the
// key's own window (not for Engine.recycle).
func (x *txnFlat) giveWindow(w *window) bool {
	if w != &x.win.w {
		return false
	}
	x.winUsed = false
	return true
}

// width is the accumulators of one time.
func (x *txnFlat) width() int { return len(x.specs) + 1 }

func (x *txnFlat) len() int { return x.n }

// time is the i-th time held.
func (x *txnFlat) time(i int) int64 { return x.slab[i*x.width()].n }

// at is the aggregates of the i-th time.
func (x *txnFlat) at(i int) []accum {
	w := x.width()
	return x.slab[i*w+1 : (i+1)*w]
}

// search returns the index of the first time at or after t.
func (x *txnFlat) search(t int64) int {
	return sort.Search(x.len(), func(i int) bool { return x.time(i) >= t })
}

func (x *txnFlat) add(t int64, in []Input) bool {
	n := x.len()
	i := n
	if n > 0 && x.time(n-1) >= t {
		i = x.search(t)
	}
	fresh := i == n || x.time(i) != t
	if fresh {
		w := x.width()
		x.slab = append(x.slab, make([]accum, w)...)
		if i < n {
			copy(x.slab[(i+1)*w:], x.slab[i*w:])
			clear(x.slab[i*w : (i+1)*w])
		}
		x.slab[i*w].n = t
		x.n++
	}
	acc := x.at(i)
	for j := range x.specs {
		acc[j].add(&x.specs[j], &in[j])
	}
	return fresh
}

func (x *txnFlat) rangeInto(lo, hi int64, dst []accum) {
	for i := x.search(lo); i < x.len() && x.time(i) <= hi; i++ {
		for j, a := range x.at(i) {
			// The sketches of one aggregate share their parameters:
			// merges cannot fail.
			_ = dst[j].merge(&x.specs[j], &a)
		}
	}
}

func (x *txnFlat) dropThrough(limit int64) int {
	n := sort.Search(x.len(), func(i int) bool { return x.time(i) > limit })
	m := copy(x.slab, x.slab[n*x.width():])
	clear(x.slab[m:])
	x.slab = x.slab[:m]
	x.n -= n
	return n
}

func (x *txnFlat) newest() int64 { return x.time(x.len() - 1) }

func (x *txnFlat) each(fn func(t int64, acc []accum) error) error {
	for i := 0; i < x.len(); i++ {
		if err := fn(x.time(i), x.at(i)); err != nil {
			return err
		}
	}
	return nil
}

func (x *txnFlat) load(t int64, acc []accum) {
	x.slab = append(x.slab, accum{n: t})
	x.slab = append(x.slab, acc...)
	x.n++
}

// fold merges the times after lo through hi into the time lo (held) and
// returns how many went.
func (x *txnFlat) fold(lo, hi int64) int {
	if x.n < 2 || x.time(x.n-2) > hi {
		return 0 // (mostly: the newest two are not both folded)
	}
	i := x.search(lo)
	j := i + 1
	for j < x.len() && x.time(j) <= hi {
		j++
	}
	if j-i < 2 {
		return 0
	}
	into := x.at(i)
	for k := i + 1; k < j; k++ {
		for a, acc := range x.at(k) {
			// The sketches of one aggregate share their parameters:
			// merges cannot fail.
			_ = into[a].merge(&x.specs[a], &acc)
		}
	}
	w := x.width()
	m := copy(x.slab[(i+1)*w:], x.slab[j*w:])
	clear(x.slab[(i+1)*w+m:])
	x.slab = x.slab[:(i+1)*w+m]
	x.n -= j - i - 1
	return j - i - 1
}

// after returns the first time held after t (there is one).
func (x *txnFlat) after(t int64) int64 {
	return x.time(sort.Search(x.len(), func(i int) bool { return x.time(i) > t }))
}

// clearRange empties the aggregates of the times from lo through hi.
func (x *txnFlat) clearRange(lo, hi int64) {
	for i := x.search(lo); i < x.len() && x.time(i) <= hi; i++ {
		clear(x.at(i))
	}
}
