package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// txnState describes, for a failure message, what the broker holds open
// for an exactly_once pipeline whose restore or offset fetch waits (a
// last stable offset or a group's offsets held by a transaction): the
// transactions whose id names group, the producers with a transaction
// open on the test's topics (namePrefix's) and on __consumer_offsets, and
// the broker's recent log lines on them.
//
// lost is not empty when the broker holds a transaction open on a
// partition that its coordinator has already ended: the producer's
// transactional id is past it (a later epoch, nothing pending), yet no
// marker reached the partition. Then no client can end it, and
// read_committed readers and the group's offset fetch wait behind it for
// good. A single Kafka 4.4 broker stopped (SIGTERM) just as it committed a
// transaction did this: its coordinator logged the commit complete, the
// partitions never got the commit markers (docs/OPERATIONS.md, Broker
// failures, has the operator's way out).
func txnState(t *testing.T, group string) (report, lost string) {
	prefix := namePrefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var b strings.Builder
	adm := kadm.NewClient(newClient(t))

	txns, err := adm.DescribeTransactions(ctx)
	if err != nil {
		fmt.Fprintf(&b, "describe transactions: %v\n", err)
	}
	ended := make(map[int64]int16) // producer id -> epoch of a transactional id with nothing pending
	for _, d := range txns.Sorted() {
		if !strings.Contains(d.TxnID, group) {
			continue
		}
		switch d.State {
		case "Empty", "CompleteCommit", "CompleteAbort":
			ended[d.ProducerID] = d.ProducerEpoch
		}
		fmt.Fprintf(&b, "transaction %s: %s, producer %d epoch %d, started %s, timeout %dms, partitions %v, err %v\n",
			d.TxnID, d.State, d.ProducerID, d.ProducerEpoch, time.UnixMilli(d.StartTimestamp).UTC().Format("15:04:05.000"),
			d.TimeoutMillis, d.Topics.Sorted(), d.Err)
	}

	md, err := adm.Metadata(ctx)
	if err != nil {
		fmt.Fprintf(&b, "metadata: %v\n", err)
		return b.String(), ""
	}
	set := make(kadm.TopicsSet)
	for _, td := range md.Topics.Sorted() {
		if strings.HasPrefix(td.Topic, prefix) || td.Topic == "__consumer_offsets" {
			for _, pd := range td.Partitions.Sorted() {
				set.Add(td.Topic, pd.Partition)
			}
		}
	}
	prods, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		fmt.Fprintf(&b, "describe producers: %v\n", err)
	}
	var hung []string
	prods.EachProducer(func(p kadm.DescribedProducer) {
		if p.CurrentTxnStartOffset >= 0 {
			if epoch, ok := ended[p.ProducerID]; ok && p.ProducerEpoch < epoch {
				hung = append(hung, fmt.Sprintf("%s/%d (producer %d epoch %d, its transactional id at epoch %d with nothing pending)",
					p.Topic, p.Partition, p.ProducerID, p.ProducerEpoch, epoch))
			}
			fmt.Fprintf(&b, "open transaction on %s/%d from offset %d: producer %d epoch %d, coordinator epoch %d, last write %s\n",
				p.Topic, p.Partition, p.CurrentTxnStartOffset, p.ProducerID, p.ProducerEpoch, p.CoordinatorEpoch,
				time.UnixMilli(p.LastTimestamp).UTC().Format("15:04:05.000"))
		}
	})

	// The broker's log since its last start, and up to its stop before
	// (scripts/kafka-local.sh keeps the previous one as kafka.log.1).
	dir := os.Getenv("WINDOWD_KAFKA_DIR")
	if dir == "" {
		dir = "/tmp/windowd-kafka"
	}
	for _, f := range []string{"kafka.log.1", "kafka.log"} {
		log, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		var picked []string
		for _, l := range lines(string(log)) {
			if strings.Contains(l, group) || strings.Contains(l, "arker") || strings.Contains(l, "ERROR") ||
				strings.Contains(l, "WARN") {
				picked = append(picked, l)
			}
		}
		fmt.Fprintf(&b, "broker's %s (the group's transactions, markers, warnings; last 30 of %d lines):\n%s\n", f, len(picked),
			strings.Join(picked[max(0, len(picked)-30):], "\n"))
	}
	return b.String(), strings.Join(hung, ", ")
}
