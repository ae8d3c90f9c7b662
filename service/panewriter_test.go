package service

import (
	"fmt"
	"sync"
	"testing"

	"github.com/windowd/windowd/windowing"
)

// TestPaneWriterOrderAndCopies: the writer writes every pane added, in
// order, with the values it had when added although the caller reuses the
// pane and its values at once; after sync everything added is written,
// also across batches, partial batches and reused batches; stop writes the
// rest. Both on its goroutine and inline (one processor, or workers: 1).
func TestPaneWriterOrderAndCopies(t *testing.T) {
	for _, inline := range []bool{false, true} {
		var mu sync.Mutex
		var got []string
		w := newPaneWriter(func(pn *windowing.Pane) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, fmt.Sprintf("%s/%d/%d/%v", pn.Key, pn.Start, pn.Index, pn.Values))
		}, inline)
		written := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(got)
		}
		var want []string
		pn := &windowing.Pane{Values: make([]windowing.Value, 0, 4)}
		n := 0
		for round, count := range []int{1, paneBatchLen - 1, paneBatchLen, 3*paneBatchLen + 7, 0, paneBatchesQueued * paneBatchLen * 3} {
			for range count {
				pn.Key, pn.Start, pn.Index = fmt.Sprintf("k%d", n%97), int64(n), uint32(round)
				pn.Values = pn.Values[:0]
				for v := range n % 4 {
					pn.Values = append(pn.Values, windowing.Value{Kind: windowing.IntValue, Int: int64(n*10 + v)})
				}
				want = append(want, fmt.Sprintf("%s/%d/%d/%v", pn.Key, pn.Start, pn.Index, pn.Values))
				w.add(pn)
				pn.Values[:cap(pn.Values)][0].Int = -1 // the caller reuses its values at once
				n++
			}
			if round%2 == 0 {
				w.flush()
			}
			w.sync()
			if written() != len(want) {
				t.Fatalf("inline %v, round %d: %d panes written after sync, want %d", inline, round, written(), len(want))
			}
		}
		pn.Key, pn.Values = "last", nil
		want = append(want, fmt.Sprintf("%s/%d/%d/%v", pn.Key, pn.Start, pn.Index, pn.Values))
		w.add(pn)
		w.stop()
		w.sync() // after stop: nothing to wait for
		if fmt.Sprint(got) != fmt.Sprint(want) {
			for i := range min(len(got), len(want)) {
				if got[i] != want[i] {
					t.Fatalf("inline %v: pane %d written as %s, want %s", inline, i, got[i], want[i])
				}
			}
			t.Fatalf("inline %v: %d panes written, want %d", inline, len(got), len(want))
		}
	}
}
