package service

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// A batch is handed over in byte order of its keys, and a cold restore marks
// fresh exactly the keys no earlier batch had (a key marked fresh is written
// without looking up the state it replaces: one wrongly fresh loses that
// state).
func TestRestoreBatchHandOver(t *testing.T) {
	seen := newSeenKeys(100)
	l := newLatestValues(seen)
	for _, k := range []string{"u10", "u1", "u1\x00", "", "u123456789", "u12345678", "\xff", "u2"} {
		l.values[k] = []byte("v" + k)
	}
	l.values["gone"] = nil
	got := l.entries()
	var keys []string
	for _, e := range got {
		keys = append(keys, e.key)
		if !e.fresh {
			t.Errorf("first batch: key %q not fresh", e.key)
		}
		if want := l.values[e.key]; string(e.value) != string(want) || (want == nil) != (e.value == nil) {
			t.Errorf("key %q: value %q, want %q", e.key, e.value, want)
		}
	}
	if !slices.IsSortedFunc(keys, strings.Compare) || len(keys) != 9 {
		t.Fatalf("keys not in byte order (or lost): %q", keys)
	}

	// The next batch (after one that did not fill: a new map); what was
	// handed over stays as it was.
	handed := fmt.Sprint(got)
	next := l.next()
	next.values["u1"], next.values["u3"], next.values["gone"] = []byte("x"), []byte("y"), []byte("z")
	fresh := map[string]bool{}
	for _, e := range next.entries() {
		fresh[e.key] = e.fresh
	}
	if want := map[string]bool{"u1": false, "gone": false, "u3": true}; fmt.Sprint(fresh) != fmt.Sprint(want) {
		t.Fatalf("second batch fresh = %v, want %v", fresh, want)
	}
	if fmt.Sprint(got) != handed {
		t.Fatalf("the first batch changed after the next one was read: %s, was %s", fmt.Sprint(got), handed)
	}

	// A full batch's map is reused by the next; what it handed over
	// stays as it was.
	full := newLatestValues(nil)
	full.values["a"] = []byte("1")
	full.bytes = restoreBatchBytes
	fe := full.entries()
	after := full.next()
	after.values["a"], after.values["b"] = []byte("2"), []byte("3")
	if len(fe) != 1 || fe[0].key != "a" || string(fe[0].value) != "1" {
		t.Fatalf("a full batch's entries changed after the next batch was read: %+v", fe)
	}

	warm := newLatestValues(nil)
	warm.values["u1"] = []byte("v")
	if e := warm.entries(); e[0].fresh {
		t.Fatal("a restore that is not cold marked a key fresh")
	}
}

// seenKeys never calls a key it was given new again, calls most others new,
// and past its limit calls none new.
func TestSeenKeys(t *testing.T) {
	const n = 100_000
	s := newSeenKeys(n)
	newOnes := 0
	for i := range n {
		if s.addNew(fmt.Sprintf("k%d", i)) {
			newOnes++
		}
	}
	for i := range n {
		if s.addNew(fmt.Sprintf("k%d", i)) {
			t.Fatalf("key k%d, added before, called new", i)
		}
	}
	// Each key called not new while it was new (a false positive) only
	// costs a lookup; the filter is sized for about 1%.
	if newOnes < n*97/100 {
		t.Fatalf("%d of %d distinct keys called new, want at least 97%%", newOnes, n)
	}
	full := newSeenKeys(10)
	for i := range 50 {
		full.addNew(fmt.Sprintf("k%d", i))
	}
	if full.addNew("another") {
		t.Fatal("a filter past its limit called a key new")
	}
}

// coverLog keeps what a map from key to its latest cover keeps when every
// marker deletes the keys its position covers (the model), whatever the
// order of covers and markers.
func TestCoverLogMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		var c coverLog
		model := map[string]int64{}
		position := int64(0)
		for range rng.IntN(60) {
			if rng.IntN(5) == 0 {
				position += rng.Int64N(4)
				c.marked(position)
				for k, at := range model {
					if at <= position {
						delete(model, k)
					}
				}
				continue
			}
			k := fmt.Sprintf("k%d", rng.IntN(6))
			at := position - 2 + rng.Int64N(8)
			c.add(k, at)
			model[k] = at
		}
		if got := c.latest(); fmt.Sprint(got) != fmt.Sprint(model) {
			t.Fatalf("round %d: covers %v, want %v", round, got, model)
		}
	}
}
