// Command consume is the consume ceiling of bench/e2e.sh: a bare franz-go
// poll loop that reads a topic from the start until it has seen N records
// and does nothing with them but add up key and value lengths.
//
//	go run ./bench/consume -topic T -records 1000000 [-group G] [-brokers 127.0.0.1:9092]
//
// It fetches the way `windowd run` does (service/pipeline.go): a consumer
// group member (cooperative-sticky balancer, no offset commits) that starts
// at the earliest offset with read_committed isolation and polls at most
// 10,000 records at a time; every other fetch setting is franz-go's
// default, as in windowd. With -group "" it consumes every partition of the
// topic directly, without a group.
//
// It prints one tab-separated line on stdout:
//
//	records  bytes  seconds  records_per_s  first_record_s
//
// seconds runs from the start of main (before the client is created) to the
// N-th record; first_record_s is when the first record arrived (connect and
// group join). It exits 1 if N records do not arrive within -timeout.
// With -progress FILE it rewrites FILE with the count so far after each
// poll: bench/compare.sh counts the committed panes of its exactly_once
// runs this way (the output's end offsets include transaction markers).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	start := time.Now()
	brokers := flag.String("brokers", "127.0.0.1:9092", "comma-separated seed brokers")
	topic := flag.String("topic", "", "topic to consume (required)")
	records := flag.Int64("records", 1000000, "stop after this many records")
	group := flag.String("group", "", "consumer group to join (use a fresh one); empty: no group, consume all partitions directly")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up after this long")
	progress := flag.String("progress", "", "rewrite this file with the count of records consumed after each poll (bench/compare.sh counts exactly_once panes with it)")
	flag.Parse()
	if *topic == "" || *records <= 0 {
		fmt.Fprintln(os.Stderr, "consume: -topic and -records > 0 are required")
		os.Exit(2)
	}

	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.ClientID("windowd-bench-consume"),
		kgo.ConsumeTopics(*topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	}
	if *group != "" {
		opts = append(opts,
			kgo.ConsumerGroup(*group),
			kgo.DisableAutoCommit(),
			kgo.Balancers(kgo.CooperativeStickyBalancer()),
		)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "consume:", err)
		os.Exit(1)
	}
	defer cl.Close()

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var n, bytes int64
	var first time.Duration
	for n < *records {
		fetches := cl.PollRecords(ctx, 10000)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			break
		}
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				fmt.Fprintf(os.Stderr, "consume: fetch %s[%d]: %v\n", t, p, err)
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			if n == 0 {
				first = time.Since(start)
			}
			n++
			bytes += int64(len(r.Key) + len(r.Value))
		})
		if *progress != "" {
			// Written whole, then renamed: a reader never sees half a number.
			tmp := *progress + ".tmp"
			if err := os.WriteFile(tmp, []byte(fmt.Sprintf("%d\n", n)), 0o644); err == nil {
				_ = os.Rename(tmp, *progress)
			}
		}
	}
	took := time.Since(start)
	if n < *records {
		fmt.Fprintf(os.Stderr, "consume: %d of %d records after %.1f s\n", n, *records, took.Seconds())
		os.Exit(1)
	}
	fmt.Printf("%d\t%d\t%.3f\t%.0f\t%.3f\n", n, bytes, took.Seconds(), float64(n)/took.Seconds(), first.Seconds())
}
