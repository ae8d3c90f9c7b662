package windowing

import (
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// TestKeyStateSlots checks the window list of a key through inserts and
// removals that move it into and out of keyState.slots: it stays in start
// order with exactly the windows inserted and not removed, it is backed by
// the slots whenever it has at most keptSlots windows after starting empty
// or being emptied, and slots outside the list hold no window.
func TestKeyStateSlots(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ks := &keyState{}
	var want []int64
	for step := 0; step < 20000; step++ {
		if len(want) > 0 && (len(want) > 6 || rng.IntN(2) == 0) {
			start := want[rng.IntN(len(want))]
			w := ks.find(start)
			if w == nil {
				t.Fatalf("step %d: window %d not found", step, start)
			}
			ks.remove(w)
			want = slices.DeleteFunc(want, func(s int64) bool { return s == start })
		} else {
			start := rng.Int64N(1000)
			if slices.Contains(want, start) {
				continue
			}
			ks.insert(&window{start: start}, false)
			want = append(want, start)
			slices.Sort(want)
		}
		got := make([]int64, len(ks.windows))
		for i, w := range ks.windows {
			got[i] = w.start
		}
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: windows %v, want %v", step, got, want)
		}
		if len(want) == 0 && !ks.inSlots() && ks.windows != nil {
			t.Fatalf("step %d: an empty list keeps an array of %d", step, cap(ks.windows))
		}
		inSlots := ks.windows != nil && ks.inSlots()
		for i, w := range ks.slots {
			if w != nil && (!inSlots || i >= len(ks.windows)) {
				t.Fatalf("step %d: slot %d holds window %d outside the list (in slots: %v, len %d)", step, i, w.start, inSlots, len(ks.windows))
			}
		}
	}
	// Emptied and filled again, the list is back in the slots.
	for len(ks.windows) > 0 {
		ks.remove(ks.windows[0])
	}
	ks.insert(&window{start: 1}, false)
	ks.insert(&window{start: 2}, false)
	if !ks.inSlots() {
		t.Fatalf("two windows after emptying are not in the slots")
	}
}

// TestKeyStateSizeClass keeps keyState within the 112-byte size class the
// cache estimate (keyBaseSize) assumes.
func TestKeyStateSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(keyState{}); n > 112 {
		t.Fatalf("keyState is %d bytes, over the 112-byte size class", n)
	}
}

// TestDecodeKeyStateSlots checks that decoding into a key state whose
// windows were in its slots leaves no stale window in them.
func TestDecodeKeyStateSlots(t *testing.T) {
	specs := []AggSpec{{Name: "n", Op: Count}}
	src := &keyState{}
	for _, s := range []int64{10, 20, 30} {
		w := allocWindow(1)
		w.start, w.end = s, s+10
		src.insert(w, false)
	}
	b3, err := encodeKeyState(nil, src, specs)
	if err != nil {
		t.Fatal(err)
	}
	src.remove(src.windows[0])
	src.remove(src.windows[0])
	b1, err := encodeKeyState(nil, src, specs)
	if err != nil {
		t.Fatal(err)
	}
	ks := &keyState{}
	if err := decodeKeyState(b1, ks, specs); err != nil {
		t.Fatal(err)
	}
	if !ks.inSlots() || len(ks.windows) != 1 || ks.windows[0].start != 30 {
		t.Fatalf("one window decoded: in slots %v, %d windows", ks.inSlots(), len(ks.windows))
	}
	if err := decodeKeyState(b3, ks, specs); err != nil {
		t.Fatal(err)
	}
	if ks.inSlots() || len(ks.windows) != 3 || ks.slots != [keptSlots]*window{} {
		t.Fatalf("three windows decoded: in slots %v, %d windows, slots %v", ks.inSlots(), len(ks.windows), ks.slots)
	}
}
