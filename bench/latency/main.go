// Command latency measures how long after a window can close its pane is
// visible to a read_committed consumer, for `windowd run` on a live input
// (bench/latency.sh runs it against a windowd it starts).
//
//	go run ./bench/latency -input IN -output OUT [-rate 20000] [-duration 40s] [-warmup 10s]
//
// It produces -rate records a second to IN for -duration, in batches every
// 10 ms, round robin over -keys keys "u<n>" (key n on partition n mod
// -partitions), each value {"user":"u<n>","ts":<wall clock ms>,"x":<n>}:
// event time is the wall clock at production, in order. Meanwhile it reads
// OUT from the start with read_committed isolation (no group, every
// partition) and takes each pane's window from its window_start and
// window_end headers (the value's window.start and window.end); a pane
// whose window is not -window-ms long makes it exit 1 (a wrong
// -window-ms or pipeline).
//
// A window [start, end) can close once every partition has a record with
// ts >= end + delay (the frontier is the minimum over the partitions of the
// largest ts minus -delay-ms, the pipeline's max_delay). So a pane's latency
// is the time it arrived here minus (end + delay): producing, fetching,
// the engine, the commit cycle (under exactly_once the transaction) and the
// consumer's fetch. Panes of windows ending before -warmup into the run
// (group join, start-up) or whose end + delay comes after production
// stopped (nothing closes them) are not counted. After production stops it
// reads until no pane came for 3 s.
//
// All the panes of a window close at the same moment, so the panes counted
// come from a few closings (about (duration - warmup - delay) / window of
// them) and a percentile over panes reflects those few closings, weighted
// by their panes, and how the output's fetches spread each one's panes. On
// stderr it prints the number of closings and the min/median/max over them
// of the latency of each one's first and of its last pane (and, for at
// most 5 closings, each one's).
//
// It prints one tab-separated line on stdout:
//
//	panes  p50_ms  p90_ms  p99_ms  max_ms  produced_per_s
//
// and exits 1 when no pane was counted or a record could not be produced.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "comma-separated seed brokers")
	input := flag.String("input", "", "topic to produce to (required)")
	output := flag.String("output", "", "topic of windowd's panes (required)")
	rate := flag.Int("rate", 20000, "records per second")
	duration := flag.Duration("duration", 40*time.Second, "how long to produce")
	warmup := flag.Duration("warmup", 10*time.Second, "panes of windows ending this soon after the start are not counted")
	keys := flag.Int("keys", 10000, "distinct keys")
	delay := flag.Int64("delay-ms", 2000, "the pipeline's watermark max_delay (ms)")
	windowMs := flag.Int64("window-ms", 10000, "the pipeline's tumbling window size (ms); a pane of another length is an error")
	partitions := flag.Int("partitions", 4, "partitions of the input topic")
	flag.Parse()
	if *input == "" || *output == "" || *rate <= 0 || *partitions <= 0 || *keys <= 0 {
		fmt.Fprintln(os.Stderr, "latency: -input, -output, -rate > 0, -keys > 0 and -partitions > 0 are required")
		os.Exit(2)
	}
	seeds := strings.Split(*brokers, ",")
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.ClientID("windowd-bench-latency"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "latency:", err)
		os.Exit(1)
	}
	defer prod.Close()
	cons, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(*output),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(50*time.Millisecond), kgo.ClientID("windowd-bench-latency"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "latency:", err)
		os.Exit(1)
	}
	defer cons.Close()

	start := time.Now()
	countFrom := start.Add(*warmup).UnixMilli()
	var mu sync.Mutex
	stopped := int64(1) << 62 // production's end, ms; set when it stops
	var lat []int64
	type closing struct{ n, first, last int64 }
	byEnd := map[int64]*closing{} // per window end counted
	lastPane := time.Now()
	var odd int64 // panes whose window is not -window-ms long

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fetches := cons.PollRecords(ctx, 10000)
			now := time.Now()
			mu.Lock()
			fetches.EachError(func(t string, p int32, err error) {
				if !errors.Is(err, context.Canceled) {
					fmt.Fprintf(os.Stderr, "latency: fetch %s[%d]: %v\n", t, p, err)
				}
			})
			fetches.EachRecord(func(r *kgo.Record) {
				lastPane = now
				ws, end, ok := window(r)
				if !ok {
					return // not a pane (a progress record)
				}
				if end-ws != *windowMs {
					odd++
					return
				}
				if end >= countFrom && end+*delay <= stopped {
					l := now.UnixMilli() - (end + *delay)
					lat = append(lat, l)
					c := byEnd[end]
					if c == nil {
						c = &closing{first: l}
						byEnd[end] = c
					}
					c.n, c.last = c.n+1, l
				}
			})
			mu.Unlock()
		}
	}()

	// Produce: every 10 ms the records due by then.
	var sent int64
	var failed atomic.Int64
	var firstErr atomic.Value
	promise := func(_ *kgo.Record, err error) {
		if err != nil && failed.Add(1) == 1 {
			firstErr.Store(err)
		}
	}
	tick := time.NewTicker(10 * time.Millisecond)
	for now := range tick.C {
		el := now.Sub(start)
		if el >= *duration {
			break
		}
		due := int64(el.Seconds() * float64(*rate))
		for ; sent < due; sent++ {
			k := sent % int64(*keys)
			ts := time.Now().UnixMilli()
			v := fmt.Appendf(nil, `{"user":"u%d","ts":%d,"x":%d}`, k, ts, sent%1000)
			prod.Produce(ctx, &kgo.Record{Topic: *input, Partition: int32(k % int64(*partitions)), Key: fmt.Appendf(nil, "u%d", k), Value: v}, promise)
		}
	}
	tick.Stop()
	if err := prod.Flush(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "latency: produce:", err)
		os.Exit(1)
	}
	if n := failed.Load(); n > 0 {
		fmt.Fprintf(os.Stderr, "latency: %d records failed to produce, the first: %v\n", n, firstErr.Load())
		os.Exit(1)
	}
	produced := float64(sent) / time.Since(start).Seconds()
	mu.Lock()
	stopped = time.Now().UnixMilli()
	mu.Unlock()
	for {
		time.Sleep(500 * time.Millisecond)
		mu.Lock()
		quiet := time.Since(lastPane) > 3*time.Second
		mu.Unlock()
		if quiet {
			break
		}
	}
	cancel()
	<-done
	if odd > 0 {
		fmt.Fprintf(os.Stderr, "latency: %d panes of windows not %d ms long: is -window-ms the pipeline's size?\n", odd, *windowMs)
		os.Exit(1)
	}
	if len(lat) == 0 {
		fmt.Fprintln(os.Stderr, "latency: no pane counted")
		os.Exit(1)
	}
	ends := slices.Sorted(maps.Keys(byEnd))
	var firsts, lasts []int64
	for _, end := range ends {
		c := byEnd[end]
		firsts, lasts = append(firsts, c.first), append(lasts, c.last)
		if len(byEnd) <= 5 {
			fmt.Fprintf(os.Stderr, "latency: window end %+.1f s: %d panes, first %d ms, last %d ms\n",
				float64(end-start.UnixMilli())/1000, c.n, c.first, c.last)
		}
	}
	if len(ends) > 0 {
		mmm := func(v []int64) string {
			slices.Sort(v)
			return fmt.Sprintf("%d/%d/%d", v[0], v[len(v)/2], v[len(v)-1])
		}
		fmt.Fprintf(os.Stderr, "latency: %d closings; min/median/max over them of the first pane %s ms, of the last %s ms\n",
			len(ends), mmm(firsts), mmm(lasts))
	}
	slices.Sort(lat)
	q := func(f float64) int64 { return lat[min(len(lat)-1, int(f*float64(len(lat))))] }
	fmt.Printf("%d\t%d\t%d\t%d\t%d\t%.0f\n", len(lat), q(0.5), q(0.9), q(0.99), lat[len(lat)-1], produced)
}

// window returns a pane's window from its window_start and window_end
// headers (sink.PaneRecord writes them; they equal the value's
// window.start and window.end), ok false when the record has none.
func window(r *kgo.Record) (start, end int64, ok bool) {
	var hs, he bool
	for _, h := range r.Headers {
		var err error
		switch h.Key {
		case "window_start":
			start, err = strconv.ParseInt(string(h.Value), 10, 64)
			hs = err == nil
		case "window_end":
			end, err = strconv.ParseInt(string(h.Value), 10, 64)
			he = err == nil
		}
	}
	return start, end, hs && he
}
