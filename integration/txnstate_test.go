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
	"github.com/twmb/franz-go/pkg/kgo"
)

// txnState describes, for a failure message, what the broker holds open
// for an exactly_once pipeline whose restore or offset fetch waits (a
// last stable offset or a group's offsets held by a transaction): the
// transactions whose id names group, the producers with a transaction
// open on the test's topics (uniqueName's) and on __consumer_offsets, and
// the broker's recent transaction log lines.
func txnState(t *testing.T, group string) string {
	prefix := strings.ToLower(nameRE.ReplaceAllString(t.Name(), "-")) + "-"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var b strings.Builder
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return "no client: " + err.Error()
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	txns, err := adm.DescribeTransactions(ctx)
	if err != nil {
		fmt.Fprintf(&b, "describe transactions: %v\n", err)
	}
	for _, d := range txns.Sorted() {
		if !strings.Contains(d.TxnID, group) {
			continue
		}
		fmt.Fprintf(&b, "transaction %s: %s, producer %d epoch %d, started %s, timeout %dms, partitions %v, err %v\n",
			d.TxnID, d.State, d.ProducerID, d.ProducerEpoch, time.UnixMilli(d.StartTimestamp).UTC().Format("15:04:05.000"),
			d.TimeoutMillis, d.Topics.Sorted(), d.Err)
	}

	md, err := adm.Metadata(ctx)
	if err != nil {
		fmt.Fprintf(&b, "metadata: %v\n", err)
		return b.String()
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
	prods.EachProducer(func(p kadm.DescribedProducer) {
		if p.CurrentTxnStartOffset >= 0 {
			fmt.Fprintf(&b, "open transaction on %s/%d from offset %d: producer %d epoch %d, coordinator epoch %d, last write %s\n",
				p.Topic, p.Partition, p.CurrentTxnStartOffset, p.ProducerID, p.ProducerEpoch, p.CoordinatorEpoch,
				time.UnixMilli(p.LastTimestamp).UTC().Format("15:04:05.000"))
		}
	})

	// The broker's log (scripts/kafka-local.sh writes it there).
	dir := os.Getenv("WINDOWD_KAFKA_DIR")
	if dir == "" {
		dir = "/tmp/windowd-kafka"
	}
	if log, err := os.ReadFile(filepath.Join(dir, "kafka.log")); err == nil {
		var picked []string
		for _, l := range lines(string(log)) {
			if strings.Contains(l, "ransaction") || strings.Contains(l, "arker") || strings.Contains(l, "ERROR") ||
				strings.Contains(l, "WARN") {
				picked = append(picked, l)
			}
		}
		fmt.Fprintf(&b, "broker log (transactions, markers, warnings; last 30 of %d):\n%s\n", len(picked),
			strings.Join(picked[max(0, len(picked)-30):], "\n"))
	}
	return b.String()
}
