package service

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/windowd/windowd/kafka"
)

// A stall asks again only once every has passed, logs each new answer
// once, and keeps the last answer when its context ends while asking.
func TestStall(t *testing.T) {
	var st stall
	t0 := time.Unix(1_700_000_000, 0)
	answer, asks := "a", 0
	var logged []string
	ask := func() (string, bool) { asks++; return answer, false }
	log := func(why string, _ bool) { logged = append(logged, why) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i, c := range []struct {
		at      time.Duration
		answer  string
		want    string
		asks    int
		logged  int
		cancels bool
	}{
		{0, "a", "a", 1, 1, false},
		{time.Second, "b", "a", 1, 1, false},     // not due: the last answer
		{3 * time.Second, "a", "a", 2, 1, false}, // due, same answer: not logged again
		{6 * time.Second, "b", "b", 3, 2, false},
		{9 * time.Second, "c", "b", 4, 2, true}, // asked, ctx ended: kept
	} {
		answer = c.answer
		if c.cancels {
			cancel()
		}
		if got := st.update(ctx, t0.Add(c.at), 3*time.Second, ask, log); got != c.want || asks != c.asks || len(logged) != c.logged {
			t.Fatalf("step %d: %q, %d asks, logged %v; want %q, %d asks, %d logged", i, got, asks, logged, c.want, c.asks, c.logged)
		}
	}
}

// describeOpen shows the first transactions and counts the rest, and says
// when one it does not show is one the broker lost.
func TestDescribeOpen(t *testing.T) {
	open := []kafka.OpenTxn{
		{Topic: "t", Partition: 1, StartOffset: 3, ProducerID: 7},
		{Topic: "t", Partition: 1, StartOffset: 9, ProducerID: 8},
		{Topic: "t", Partition: 1, StartOffset: 12, ProducerID: 9, Lost: true, CoordinatorState: "Empty", CoordinatorEpoch: 2},
	}
	text, lost := describeOpen(open, 1)
	if !lost || !strings.HasPrefix(text, "a transaction open on t/1 from offset 3 (producer 7,") ||
		!strings.HasSuffix(text, "; and 2 more open there; one of them the broker left hanging") || strings.Contains(text, "producer 8") {
		t.Errorf("one shown: %q %v", text, lost)
	}
	text, lost = describeOpen(open, 3)
	if !lost || strings.Count(text, "a transaction open on") != 3 || strings.Count(text, "hanging") != 1 || strings.Contains(text, "more") {
		t.Errorf("all shown: %q %v", text, lost)
	}
	if text, lost = describeOpen(open[:2], 3); lost || strings.Contains(text, "hanging") {
		t.Errorf("none lost: %q %v", text, lost)
	}
}
