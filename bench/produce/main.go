// Command produce is the output side of bench/e2e.sh's bound: a bare
// franz-go producer of the panes `windowd run` writes for the benchmark
// pipeline. It reads the panes `windowd replay` printed (JSON lines, at most
// -records of them), builds each record as windowd's sink does
// (sink.PaneRecord: key, timestamp, eight headers; the value is the line
// itself, the same pane JSON), and only then produces them all to a topic
// with the producer settings of `windowd run` (service/pipeline.go: franz-go
// defaults, so an idempotent producer with acks=all; a 5 ms linger; keys
// hashed to partitions; kafka.compression's compressor, kafka.Compressor). The broker's CPU while it runs is the cost of taking those
// panes, apart from anything windowd does.
//
//	go run ./bench/produce -topic T -panes panes.jsonl [-records N] [-cpu-of PID] [-brokers 127.0.0.1:9092]
//
// It prints one tab-separated line on stdout:
//
//	records  value_bytes  seconds  records_per_s  cpu_s  cpu_of_s
//
// seconds runs from the first produce call to the acknowledgement of the
// last record (Flush); cpu_s is the CPU time (user + system, from
// /proc/PID/stat) the producer itself used in that span, and cpu_of_s the
// CPU time process PID (the broker) used in it, or - without -cpu-of. It
// exits 1 on any produce error.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/windowd/windowd/kafka"
	"github.com/windowd/windowd/sink"
	"github.com/windowd/windowd/windowing"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "comma-separated seed brokers")
	topic := flag.String("topic", "", "topic to produce to (required)")
	panes := flag.String("panes", "", "panes as `windowd replay` prints them, one JSON object per line (required)")
	records := flag.Int("records", 0, "produce at most this many panes (0: all)")
	codec := flag.String("compression", "lz4", "batch compression, as kafka.compression: lz4 (windowd's default), snappy, zstd, gzip or none")
	cpuOf := flag.Int("cpu-of", 0, "PID of a process (the broker) whose CPU seconds while producing to report")
	flag.Parse()
	if *topic == "" || *panes == "" || *records < 0 {
		fmt.Fprintln(os.Stderr, "produce: -topic and -panes are required")
		os.Exit(2)
	}
	rs, bytes, err := readPanes(*panes, *topic, *records)
	if err != nil {
		fail(err)
	}

	comp, err := kafka.Compressor(*codec)
	if err != nil {
		fail(err)
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.WithCompressor(comp),
		kgo.ClientID("windowd-bench-produce"),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordPartitioner(kgo.UniformBytesPartitioner(64<<10, true, true, nil)), // windowd's for its output topics
	)
	if err != nil {
		fail(err)
	}
	defer cl.Close()
	ctx := context.Background()
	var failed atomic.Int64
	var first atomic.Value
	// The records take about 1.4 KiB each; a collection during the timed
	// span would mark all of them, which windowd's producer (a few
	// thousand records in flight) never does: collect now, then not again.
	runtime.GC()
	debug.SetGCPercent(-1)
	cpu0, own0 := cpuSnapshot(*cpuOf)
	start := time.Now()
	for _, r := range rs {
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil && failed.Add(1) == 1 {
				first.Store(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		fail(err)
	}
	secs := time.Since(start).Seconds()
	cpu1, own1 := cpuSnapshot(*cpuOf)
	if n := failed.Load(); n > 0 {
		fail(fmt.Errorf("%d records failed, the first: %v", n, first.Load()))
	}
	cpu := "-"
	if *cpuOf > 0 {
		cpu = fmt.Sprintf("%.2f", cpu1-cpu0)
	}
	fmt.Printf("%d\t%d\t%.3f\t%.0f\t%.2f\t%s\n", len(rs), bytes, secs, float64(len(rs))/secs, own1-own0, cpu)
}

// cpuSnapshot returns the CPU seconds so far of process pid (0 for pid 0)
// and of this process.
func cpuSnapshot(pid int) (of, own float64) {
	of, err := cpuSeconds(pid)
	if err == nil {
		own, err = cpuSeconds(os.Getpid())
	}
	if err != nil {
		fail(err)
	}
	return of, own
}

// cpuSeconds returns the user + system CPU seconds of process pid so far
// (0 for pid 0; pid 0 is never a process here), from /proc/PID/stat at Linux's 100 clock ticks a second.
func cpuSeconds(pid int) (float64, error) {
	if pid == 0 {
		return 0, nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	var utime, stime float64
	if _, err := fmt.Sscan(f[11], &utime); err != nil {
		return 0, err
	}
	if _, err := fmt.Sscan(f[12], &stime); err != nil {
		return 0, err
	}
	return (utime + stime) / 100, nil
}

// readPanes builds the output record of each pane line of path (at most
// limit, 0: all), and returns them with the sum of their value lengths.
func readPanes(path, topic string, limit int) ([]*kgo.Record, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	var rs []*kgo.Record
	var bytes int64
	for sc.Scan() && (limit == 0 || len(rs) < limit) {
		line := append([]byte(nil), sc.Bytes()...)
		p, err := parsePane(line)
		if err != nil {
			return nil, 0, fmt.Errorf("%s:%d: %w", path, len(rs)+1, err)
		}
		r := sink.PaneRecord(topic, p, windowing.NewPaneJSON(nil))
		r.Value = line
		rs = append(rs, r)
		bytes += int64(len(line))
	}
	if err := sc.Err(); err != nil {
		return nil, 0, err
	}
	return rs, bytes, nil
}

// parsePane reads the pane fields the record's key and headers repeat; the
// aggregates stay in the value.
func parsePane(line []byte) (*windowing.Pane, error) {
	if !gjson.ValidBytes(line) {
		return nil, fmt.Errorf("not a JSON pane")
	}
	f := gjson.GetManyBytes(line, "key", "window.start", "window.end", "pane.timing", "pane.index", "pane.final", "pane.mode", "retraction")
	p := &windowing.Pane{
		Key:        f[0].Str,
		Start:      f[1].Int(),
		End:        f[2].Int(),
		Index:      uint32(f[4].Uint()),
		Final:      f[5].Bool(),
		Retraction: f[7].Bool(),
	}
	var ok bool
	if p.Timing, ok = named(f[3].Str, windowing.Timing.String, windowing.Early, windowing.OnTime, windowing.Late); !ok {
		return nil, fmt.Errorf("pane timing %q", f[3].Str)
	}
	if p.Mode, ok = named(f[6].Str, windowing.Mode.String, windowing.Accumulating, windowing.Discarding, windowing.Retracting); !ok {
		return nil, fmt.Errorf("pane mode %q", f[6].Str)
	}
	return p, nil
}

// named returns the one of values whose name is s.
func named[T any](s string, name func(T) string, values ...T) (T, bool) {
	for _, v := range values {
		if name(v) == s {
			return v, true
		}
	}
	var zero T
	return zero, false
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "produce:", err)
	os.Exit(1)
}
