package windowing

import (
	"sort"
)

// A slideStore holds a sliding key's records merged per event time
// (sliding.go): the aggregates of the records at each time, in time order.
type slideStore interface {
	// add adds a record at t; fresh: t had no record before.
	add(t int64, in []Input) (fresh bool)
	// rangeInto merges the times from lo through hi into dst.
	rangeInto(lo, hi int64, dst []accum)
	// dropThrough removes the times at or below limit and returns how
	// many went.
	dropThrough(limit int64) int
	// len is the number of times held.
	len() int
	// newest is the latest time held (when len() > 0).
	newest() int64
	// each calls fn for every time in order, with its aggregates.
	each(fn func(t int64, acc []accum) error) error
	// load appends time t, after every time held, with aggregates acc.
	load(t int64, acc []accum)
}

// slides is a keyState's slideStore behind one pointer (the keyState
// stays in its size class), with the aggregates added to the pipeline
// after the records up to partialTo were merged (layout.go).
type slides struct {
	slideStore
	partial   uint64
	partialTo int64
	// retired: the key's first window is retired (sliding.go), and
	// retiredEnd is its end. retireOrDelete moves the end here, where a
	// record reads anyway, rather than into that window, untouched since
	// it retired; the window's own end is brought up to date when it is
	// read (keyState.syncRetired).
	retired    bool
	retiredEnd int64
}

// treeSlides is a slides and its tree in one allocation: a record reads
// the header and the tree's tail one after the other.
type treeSlides struct {
	slides
	tree slideTree
}

// slidingKey is a key of a sliding pipeline with a slide tree: its state
// and its store in one allocation (Engine.newKeyState). A record reads
// the key's state and then its store's header: adjacent lines, not a
// second miss (about 85 ns per record of sliding-1h-key).
type slidingKey struct {
	keyState
	ts treeSlides
}

// newSlides returns the store of specs: a tree of merged subtrees when
// every aggregate merges in constant time, else sorted arrays.
func newSlides(specs []AggSpec) *slides {
	if slideIndexed(specs) {
		ts := &treeSlides{}
		ts.init(specs)
		return &ts.slides
	}
	return &slides{slideStore: &slideFlat{specs: specs}}
}

func (ts *treeSlides) init(specs []AggSpec) {
	ts.tree.init(specs)
	ts.slideStore = &ts.tree
}

// pristine reports whether s holds nothing and is what newSlides(specs)
// makes, so that decoding a key may fill it.
func (s *slides) pristine(specs []AggSpec) bool {
	if s.len() != 0 || s.partial != 0 || s.retired || len(specs) == 0 {
		return false
	}
	var own []AggSpec
	switch x := s.slideStore.(type) {
	case *slideTree:
		own = x.specs
	case *slideFlat:
		own = x.specs
	case *txnFlat:
		own = x.specs
	}
	return len(own) == len(specs) && &own[0] == &specs[0] // the same specs: the same kind of store
}

// slideIndexed reports whether the aggregates of specs all merge in
// constant time (count, sum, avg, min, max): a slideTree serves them.
func slideIndexed(specs []AggSpec) bool {
	for _, a := range specs {
		switch a.Op {
		case Count, Sum, Avg, Min, Max, Ratio:
		default:
			return false
		}
	}
	return true
}

// cheapAcc is an accum of count, sum, avg, min or max: a value count and
// the sum, minimum or maximum.
type cheapAcc struct {
	n int64
	f float64
}

func (a *cheapAcc) add(op AggOp, x float64) {
	switch op {
	case Sum, Avg:
		a.f += x
	case Min:
		if a.n == 0 || x < a.f {
			a.f = x
		}
	case Max:
		if a.n == 0 || x > a.f {
			a.f = x
		}
	}
	a.n++
}

func (a *cheapAcc) merge(op AggOp, b cheapAcc) {
	if b.n == 0 {
		return
	}
	switch op {
	case Sum, Avg:
		a.f += b.f
	case Min:
		if a.n == 0 || b.f < a.f {
			a.f = b.f
		}
	case Max:
		if a.n == 0 || b.f > a.f {
			a.f = b.f
		}
	}
	a.n += b.n
}

// slideTree is a treap of the times, keyed by time, each node with the
// merge of its subtree, so that adding a record, inserting a time and
// merging a range take O(log n) merges. Its nodes and their aggregates
// live in chunks of a full tail's (a cold key is a few cache lines a
// level, not an object per time).
type slideTree struct {
	// The tail holds the newest times, after every time of the tree, in
	// order: records mostly come in time order, and a key's next record
	// comes after thousands of other keys', so the tree's path is out of
	// the CPU's caches by then. A record of the tail's times is added to
	// one time and to the tail's merge (tailAll); a full tail goes into
	// the tree at once, along a path that stays cached. What a record in
	// order reads comes first, next to the slides header it reads
	// anyway: the tail's length, the tree's merge (a copy of the root's,
	// so that a window covering every time reads no node) and the tail's
	// merge, both in the struct itself when they fit in inl (so a
	// slideTree is never copied). What a window's expiry reads comes
	// first of all, in one line: the lengths and the newest time.
	tailN    int
	n        int
	last     int64      // the newest time (when len() > 0)
	alls     []cheapAcc // rootAll, then tailAll
	inl      [4]cheapAcc
	tailAccs []cheapAcc // tailN × len(specs)
	// minT and maxT are the first and last times of the tree (when
	// n > 0): a range that reaches past either end is merged along one
	// path, or is the root's merge.
	minT, maxT int64
	specs      []AggSpec // the engine's (one array for every key: no miss of its own)
	tailT      [tailLen]int64
	// Node i is slot i%chunkLen of chunks[i/chunkLen]; node 0 stands for
	// no node, and used is 1 + the highest node handed out. Chunks do not
	// move: the slab grows by a chunk, not by copying every node, cold by
	// the time a key's next flush comes.
	chunks   []*slideChunk
	chunkInl [4]*slideChunk
	used     int32
	root     int32
	free     int32 // freed nodes, linked through left
	seed     uint64
	buf      []accum // each's
}

// tailLen is the number of times a slideTree's tail holds before they go
// into the tree.
const tailLen = 32

type slideNode struct {
	t           int64
	prio        uint32
	left, right int32
}

// chunkLen is the number of nodes of a slideChunk: one full tail's.
const (
	chunkShift = 5
	chunkLen   = 1 << chunkShift
)

// A slideChunk holds chunkLen nodes of a slideTree and their aggregates:
// node j's own, then its subtree's, at vals[2·j·k:], k aggregates each.
type slideChunk struct {
	nodes [chunkLen]slideNode
	vals  []cheapAcc
}

// node returns node i.
func (x *slideTree) node(i int32) *slideNode {
	return &x.chunks[i>>chunkShift].nodes[i&(chunkLen-1)]
}

// vals returns the aggregates of node i: its own, then its subtree's.
func (x *slideTree) vals(i int32) []cheapAcc {
	k := len(x.specs)
	j := 2 * int(i&(chunkLen-1)) * k
	return x.chunks[i>>chunkShift].vals[j : j+2*k]
}

func newSlideTree(specs []AggSpec) *slideTree {
	x := &slideTree{}
	x.init(specs)
	return x
}

func (x *slideTree) init(specs []AggSpec) {
	x.seed, x.used = 0x9e3779b97f4a7c15, 1
	x.specs = specs
	x.chunks = x.chunkInl[:0]
	k := len(specs)
	x.alls = x.inl[:]
	if 2*k > len(x.inl) {
		x.alls = make([]cheapAcc, 2*k)
	}
	x.alls = x.alls[:2*k]
}

// rootAll is the merge of every time of the tree (the root's subtree).
func (x *slideTree) rootAll() []cheapAcc { return x.alls[:len(x.specs)] }

// tailAll is the merge of every time of the tail.
func (x *slideTree) tailAll() []cheapAcc {
	k := len(x.specs)
	return x.alls[k:]
}

// tailAcc is the aggregates of the tail's time i.
func (x *slideTree) tailAcc(i int) []cheapAcc {
	k := len(x.specs)
	return x.tailAccs[i*k : (i+1)*k]
}

// syncRoot copies the root's merge into rootAll after the tree changed.
func (x *slideTree) syncRoot() {
	if x.root == 0 {
		clear(x.rootAll())
		return
	}
	copy(x.rootAll(), x.sub(x.root))
}

func (x *slideTree) own(i int32) []cheapAcc { return x.vals(i)[:len(x.specs)] }

func (x *slideTree) sub(i int32) []cheapAcc { return x.vals(i)[len(x.specs):] }

// prio draws a node priority (splitmix64).
func (x *slideTree) prio() uint32 {
	x.seed += 0x9e3779b97f4a7c15
	z := x.seed
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return uint32(z ^ (z >> 31))
}

// alloc returns a new node at t with no aggregates.
func (x *slideTree) alloc(t int64) int32 {
	i := x.free
	if i != 0 {
		x.free = x.node(i).left
	} else {
		i = x.used
		if int(i) >= len(x.chunks)*chunkLen {
			x.chunks = append(x.chunks, &slideChunk{vals: make([]cheapAcc, 2*chunkLen*len(x.specs))})
		}
		x.used++
	}
	*x.node(i) = slideNode{t: t, prio: x.prio()}
	clear(x.own(i))
	x.n++
	return i
}

// fix recomputes the merge of node i's subtree.
func (x *slideTree) fix(i int32) {
	nd := x.node(i)
	s := x.sub(i)
	copy(s, x.own(i))
	if nd.left != 0 {
		for j, b := range x.sub(nd.left) {
			s[j].merge(x.specs[j].Op, b)
		}
	}
	if nd.right != 0 {
		for j, b := range x.sub(nd.right) {
			s[j].merge(x.specs[j].Op, b)
		}
	}
}

func (x *slideTree) add(t int64, in []Input) bool {
	if x.len() == 0 || t > x.last {
		x.last = t
		x.appendTail(t, in)
		return true
	}
	if n := x.tailN; (n > 0 && t >= x.tailT[0]) || (x.n > 0 && t > x.maxT) || x.n == 0 {
		return x.addTail(t, in)
	}
	fresh := false
	x.root = x.addAt(x.root, t, in, &fresh)
	x.held(t)
	x.syncRoot()
	return fresh
}

// appendTail adds a record at t, after every time held (records mostly
// come in order), as the tail's last time. It stores and does not load:
// the tail's lines were last touched at the key's previous record,
// thousands of records ago, and a load from them waits for memory where
// a store does not (the newest time, the tail's length and its merge are
// in the tree's first lines, read anyway).
func (x *slideTree) appendTail(t int64, in []Input) {
	x.addTo(x.tailAll(), in)
	n := x.tailN
	x.tailT[n] = t
	x.extendTail()
	acc := x.tailAcc(n)
	for j := range x.specs {
		if acc[j] = (cheapAcc{}); !in[j].Skip {
			acc[j] = firstAcc(x.specs[j].Op, in[j].Num)
		}
	}
	x.tailN = n + 1
	if n+1 == tailLen {
		x.flush()
	}
}

// extendTail makes room in tailAccs for one more time's aggregates, left
// as they were (the caller sets them): a key's first array holds a quarter
// of a full tail, and a full one doubles it.
func (x *slideTree) extendTail() {
	k, n := len(x.specs), len(x.tailAccs)
	if n+k > cap(x.tailAccs) {
		grown := make([]cheapAcc, n, max(2*cap(x.tailAccs), tailLen/4*k, n+k))
		copy(grown, x.tailAccs)
		x.tailAccs = grown
	}
	x.tailAccs = x.tailAccs[:n+k]
}

// firstAcc is a cheapAcc of op over the one value v (add to a zero one).
func firstAcc(op AggOp, v float64) cheapAcc {
	if op == Count {
		return cheapAcc{n: 1}
	}
	return cheapAcc{n: 1, f: v}
}

// addTail adds a record at t, at or after the tail's first time (or after
// every time of the tree), to the tail.
func (x *slideTree) addTail(t int64, in []Input) bool {
	k := len(x.specs)
	x.addTo(x.tailAll(), in)
	n := x.tailN
	i := n
	for i > 0 && x.tailT[i-1] > t {
		i-- // out of order within the tail: a few steps back
	}
	if i > 0 && x.tailT[i-1] == t {
		x.addTo(x.tailAcc(i-1), in)
		return false
	}
	copy(x.tailT[i+1:n+1], x.tailT[i:n])
	x.tailT[i] = t
	x.tailN++
	x.extendTail()
	copy(x.tailAccs[(i+1)*k:], x.tailAccs[i*k:n*k])
	acc := x.tailAcc(i)
	clear(acc)
	x.addTo(acc, in)
	if n+1 == tailLen {
		x.flush()
	}
	return true
}

// flush moves the tail into the tree: the tail's times, sorted and after
// every time of the tree, become a treap of their own in one pass (a
// Cartesian tree of their priorities), joined to the tree's right spine.
func (x *slideTree) flush() {
	var spine [tailLen]int32 // the new treap's right spine, root first
	depth := 0
	for i, t := range x.tailT[:x.tailN] {
		j := x.alloc(t)
		copy(x.own(j), x.tailAcc(i))
		var last int32
		for depth > 0 && x.node(spine[depth-1]).prio < x.node(j).prio {
			last = spine[depth-1]
			depth--
		}
		x.node(j).left = last
		if depth > 0 {
			x.node(spine[depth-1]).right = j
		}
		spine[depth] = j
		depth++
		x.held(t)
	}
	if depth > 0 {
		x.fixAll(spine[0])
		x.root = x.join(x.root, spine[0])
		x.syncRoot()
	}
	x.tailN, x.tailAccs = 0, x.tailAccs[:0]
	clear(x.tailAll())
}

// fixAll recomputes the merges of every subtree of i (a new treap).
func (x *slideTree) fixAll(i int32) {
	if i == 0 {
		return
	}
	x.fixAll(x.node(i).left)
	x.fixAll(x.node(i).right)
	x.fix(i)
}

// join returns the root of subtrees a and b, every time of a before
// every time of b.
func (x *slideTree) join(a, b int32) int32 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	case x.node(a).prio > x.node(b).prio:
		r := x.join(x.node(a).right, b)
		x.node(a).right = r
		x.fix(a)
		return a
	default:
		l := x.join(a, x.node(b).left)
		x.node(b).left = l
		x.fix(b)
		return b
	}
}

// held widens minT and maxT to t, a time just put in the tree.
func (x *slideTree) held(t int64) {
	if x.n == 1 {
		x.minT, x.maxT = t, t
		return
	}
	x.minT, x.maxT = min(x.minT, t), max(x.maxT, t)
}

// addAt adds a record at t to the subtree i and returns its new root. The
// record joins the merge of every subtree on its way down, so that only a
// new node and the rotations lifting it are merged again.
func (x *slideTree) addAt(i int32, t int64, in []Input, fresh *bool) int32 {
	if i == 0 {
		i = x.alloc(t)
		x.addTo(x.own(i), in)
		copy(x.sub(i), x.own(i))
		*fresh = true
		return i
	}
	x.addTo(x.sub(i), in)
	nd := x.node(i)
	switch {
	case t < nd.t:
		l := x.addAt(nd.left, t, in, fresh)
		nd.left = l
		if x.node(l).prio > nd.prio { // rotate right: l takes i's subtree
			nd.left, x.node(l).right = x.node(l).right, i
			copy(x.sub(l), x.sub(i))
			x.fix(i)
			return l
		}
	case t > nd.t:
		r := x.addAt(nd.right, t, in, fresh)
		nd.right = r
		if x.node(r).prio > nd.prio { // rotate left: r takes i's subtree
			nd.right, x.node(r).left = x.node(r).left, i
			copy(x.sub(r), x.sub(i))
			x.fix(i)
			return r
		}
	default:
		x.addTo(x.own(i), in)
	}
	return i
}

// addTo adds a record's values to the aggregates acc.
func (x *slideTree) addTo(acc []cheapAcc, in []Input) {
	for j := range x.specs {
		if !in[j].Skip {
			acc[j].add(x.specs[j].Op, in[j].Num)
		}
	}
}

func (x *slideTree) rangeInto(lo, hi int64, dst []accum) {
	if n := x.tailN; n > 0 && hi >= x.tailT[0] {
		if lo <= x.tailT[0] && hi >= x.tailT[n-1] {
			x.into(dst, x.tailAll())
		} else {
			for i, t := range x.tailT[:n] {
				if lo <= t && t <= hi {
					x.into(dst, x.tailAcc(i))
				}
			}
		}
	}
	x.treeRangeInto(lo, hi, dst)
}

// treeRangeInto merges the tree's times from lo through hi into dst.
func (x *slideTree) treeRangeInto(lo, hi int64, dst []accum) {
	switch {
	case x.n == 0:
		return
	case lo <= x.minT && hi >= x.maxT:
		x.into(dst, x.rootAll())
		return
	case hi >= x.maxT:
		x.from(x.root, lo, dst)
		return
	case lo <= x.minT:
		x.through(x.root, hi, dst)
		return
	}
	i := x.root
	for i != 0 {
		nd := x.node(i)
		switch {
		case nd.t < lo:
			i = nd.right
		case nd.t > hi:
			i = nd.left
		default:
			// i is in the range: the part of its left subtree at or
			// above lo, i, the part of its right subtree at or below hi.
			x.from(nd.left, lo, dst)
			x.into(dst, x.own(i))
			x.through(nd.right, hi, dst)
			return
		}
	}
}

// from merges the times of subtree i at or above lo into dst.
func (x *slideTree) from(i int32, lo int64, dst []accum) {
	for i != 0 {
		nd := x.node(i)
		if nd.t < lo {
			i = nd.right
			continue
		}
		if nd.right != 0 {
			x.into(dst, x.sub(nd.right))
		}
		x.into(dst, x.own(i))
		i = nd.left
	}
}

// through merges the times of subtree i at or below hi into dst.
func (x *slideTree) through(i int32, hi int64, dst []accum) {
	for i != 0 {
		nd := x.node(i)
		if nd.t > hi {
			i = nd.left
			continue
		}
		if nd.left != 0 {
			x.into(dst, x.sub(nd.left))
		}
		x.into(dst, x.own(i))
		i = nd.right
	}
}

// into merges src into dst.
func (x *slideTree) into(dst []accum, src []cheapAcc) {
	for j, b := range src {
		if b.n == 0 {
			continue
		}
		a := &dst[j]
		c := cheapAcc{a.n, a.f}
		c.merge(x.specs[j].Op, b)
		a.n, a.f = c.n, c.f
	}
}

func (x *slideTree) dropThrough(limit int64) int {
	if n := x.len(); n > 0 && limit >= x.newest() {
		// Every time goes (the key's last window expires, the end of
		// input): no node is visited.
		x.tailN, x.tailAccs = 0, x.tailAccs[:0]
		x.n, x.root, x.free = 0, 0, 0
		x.used = 1 // the chunks stay
		clear(x.alls)
		return n
	}
	if x.tailN > 0 && x.tailT[0] <= limit {
		x.flush() // rare: a key silent for longer than the window
	}
	if x.n == 0 || x.minT > limit {
		return 0 // nothing to drop: no fix on the way
	}
	before := x.n
	x.root = x.dropAt(x.root, limit)
	x.bounds()
	x.syncRoot()
	return before - x.n
}

// bounds sets minT and maxT from the tree's ends.
func (x *slideTree) bounds() {
	if x.root == 0 {
		return
	}
	i, j := x.root, x.root
	for x.node(i).left != 0 {
		i = x.node(i).left
	}
	for x.node(j).right != 0 {
		j = x.node(j).right
	}
	x.minT, x.maxT = x.node(i).t, x.node(j).t
}

// dropAt removes the times of subtree i at or below limit and returns its
// new root.
func (x *slideTree) dropAt(i int32, limit int64) int32 {
	for i != 0 && x.node(i).t <= limit {
		next := x.node(i).right
		x.release(x.node(i).left)
		x.node(i).left = x.free
		x.free = i
		x.n--
		i = next
	}
	if i == 0 {
		return 0
	}
	x.node(i).left = x.dropAt(x.node(i).left, limit)
	x.fix(i)
	return i
}

// release frees every node of subtree i.
func (x *slideTree) release(i int32) {
	for i != 0 {
		nd := *x.node(i)
		x.release(nd.left)
		x.node(i).left = x.free
		x.free = i
		x.n--
		i = nd.right
	}
}

func (x *slideTree) len() int { return x.n + x.tailN }

func (x *slideTree) newest() int64 { return x.last }

func (x *slideTree) each(fn func(t int64, acc []accum) error) error {
	if cap(x.buf) < len(x.specs) {
		x.buf = make([]accum, len(x.specs))
	}
	if err := x.eachAt(x.root, fn); err != nil {
		return err
	}
	for i, t := range x.tailT[:x.tailN] {
		if err := fn(t, x.accums(x.tailAcc(i))); err != nil {
			return err
		}
	}
	return nil
}

// accums copies aggregates into each's buffer.
func (x *slideTree) accums(src []cheapAcc) []accum {
	acc := x.buf[:len(x.specs)]
	for j, c := range src {
		acc[j] = accum{n: c.n, f: c.f}
	}
	return acc
}

func (x *slideTree) eachAt(i int32, fn func(t int64, acc []accum) error) error {
	for i != 0 {
		if err := x.eachAt(x.node(i).left, fn); err != nil {
			return err
		}
		if err := fn(x.node(i).t, x.accums(x.own(i))); err != nil {
			return err
		}
		i = x.node(i).right
	}
	return nil
}

// load appends t, after every time held, to the tail: a restore's times
// go into the tree as the newest times of a stream do.
func (x *slideTree) load(t int64, acc []accum) {
	x.last = t
	x.tailT[x.tailN] = t
	x.tailN++
	all := x.tailAll()
	for j, a := range acc {
		c := cheapAcc{a.n, a.f}
		x.tailAccs = append(x.tailAccs, c)
		all[j].merge(x.specs[j].Op, c)
	}
	if x.tailN == tailLen {
		x.flush()
	}
}

// slideFlat holds the times in sorted arrays: for aggregates whose merge
// costs more than a constant (sketches), a range is merged time by time.
type slideFlat struct {
	specs []AggSpec
	times []int64
	accs  []accum // len(times) × len(specs)
}

func (x *slideFlat) at(i int) []accum {
	k := len(x.specs)
	return x.accs[i*k : (i+1)*k]
}

func (x *slideFlat) add(t int64, in []Input) bool {
	i := len(x.times)
	if i > 0 && x.times[i-1] >= t {
		i = sort.Search(i, func(i int) bool { return x.times[i] >= t })
	}
	fresh := i == len(x.times) || x.times[i] != t
	if fresh {
		k := len(x.specs)
		x.times = append(x.times, 0)
		copy(x.times[i+1:], x.times[i:])
		x.times[i] = t
		x.accs = append(x.accs, make([]accum, k)...)
		copy(x.accs[(i+1)*k:], x.accs[i*k:])
		clear(x.accs[i*k : (i+1)*k])
	}
	acc := x.at(i)
	for j := range x.specs {
		acc[j].add(&x.specs[j], &in[j])
	}
	return fresh
}

func (x *slideFlat) rangeInto(lo, hi int64, dst []accum) {
	i := sort.Search(len(x.times), func(i int) bool { return x.times[i] >= lo })
	for ; i < len(x.times) && x.times[i] <= hi; i++ {
		for j, a := range x.at(i) {
			// The sketches of one aggregate share their parameters:
			// merges cannot fail.
			_ = dst[j].merge(&x.specs[j], &a)
		}
	}
}

func (x *slideFlat) dropThrough(limit int64) int {
	n := sort.Search(len(x.times), func(i int) bool { return x.times[i] > limit })
	k := len(x.specs)
	x.times = append(x.times[:0], x.times[n:]...)
	copy(x.accs, x.accs[n*k:])
	clear(x.accs[len(x.accs)-n*k:])
	x.accs = x.accs[:len(x.accs)-n*k]
	return n
}

func (x *slideFlat) len() int { return len(x.times) }

func (x *slideFlat) newest() int64 { return x.times[len(x.times)-1] }

func (x *slideFlat) each(fn func(t int64, acc []accum) error) error {
	for i, t := range x.times {
		if err := fn(t, x.at(i)); err != nil {
			return err
		}
	}
	return nil
}

func (x *slideFlat) load(t int64, acc []accum) {
	x.times = append(x.times, t)
	x.accs = append(x.accs, acc...)
}
