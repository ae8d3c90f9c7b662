package kafka

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestOpenTxns: only producers with a transaction open are listed, oldest
// first, and one is Lost only when it is windowd's own producer at an
// epoch its coordinator has passed and settled.
func TestOpenTxns(t *testing.T) {
	prods := []kadm.DescribedProducer{
		{Topic: "cl", Partition: 2, ProducerID: 7, ProducerEpoch: 3, CurrentTxnStartOffset: -1}, // nothing open
		{Topic: "cl", Partition: 2, ProducerID: 9, ProducerEpoch: 0, CurrentTxnStartOffset: 40, LastTimestamp: 1_700_000_000_000},
		{Topic: "cl", Partition: 2, ProducerID: 30003, ProducerEpoch: 0, CurrentTxnStartOffset: 12, LastTimestamp: 1_700_000_000_000},
	}
	for _, c := range []struct {
		name string
		own  *kadm.DescribedTransaction
		lost bool
	}{
		{"unknown transactional id", nil, false},
		{"own id, later epoch, commit complete", &kadm.DescribedTransaction{ProducerID: 30003, ProducerEpoch: 1, State: "CompleteCommit"}, true},
		{"own id, later epoch, empty", &kadm.DescribedTransaction{ProducerID: 30003, ProducerEpoch: 2, State: "Empty"}, true},
		{"own id, later epoch, a new transaction", &kadm.DescribedTransaction{ProducerID: 30003, ProducerEpoch: 2, State: "Ongoing"}, true},
		{"own id, later epoch, still writing markers", &kadm.DescribedTransaction{ProducerID: 30003, ProducerEpoch: 1, State: "PrepareCommit"}, false},
		{"own id, aborting", &kadm.DescribedTransaction{ProducerID: 30003, ProducerEpoch: 1, State: "PrepareAbort"}, false},
		{"own id, same epoch", &kadm.DescribedTransaction{ProducerID: 30003, ProducerEpoch: 0, State: "Ongoing"}, false},
		{"another producer id", &kadm.DescribedTransaction{ProducerID: 30004, ProducerEpoch: 5, State: "Empty"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			open := openTxns(prods, c.own)
			if len(open) != 2 || open[0].StartOffset != 12 || open[1].StartOffset != 40 {
				t.Fatalf("open transactions %+v, want those from offsets 12 and 40, oldest first", open)
			}
			if open[0].Lost != c.lost || open[1].Lost {
				t.Fatalf("lost: %v and %v, want %v and false", open[0].Lost, open[1].Lost, c.lost)
			}
			s := open[0].String()
			if !strings.Contains(s, "cl/2 from offset 12 (producer 30003, epoch 0") || strings.Contains(s, "hanging") != c.lost {
				t.Fatalf("description %q", s)
			}
		})
	}
}

// TestGroupOffsetsPartition: the partition of __consumer_offsets is the
// broker's, Java's String.hashCode with its sign bit cleared, modulo 50
// (values printed by Java 17 for these ids: a negative hash, a character
// outside the BMP as two UTF-16 units, the empty id).
func TestGroupOffsetsPartition(t *testing.T) {
	for group, want := range map[string]int32{
		"abc": 4,
		"windowd-TestRestoreNamesTheTransaction-group-1733": 47,
		"grüppe-😀": 34,
		"":         0,
	} {
		if got := GroupOffsetsPartition(group, 50); got != want {
			t.Errorf("GroupOffsetsPartition(%q, 50) = %d, want %d", group, got, want)
		}
	}
}
