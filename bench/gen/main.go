// Command gen writes a reproducible replay input for benchmarks: JSON lines
// with a partition, a record key and a ~150-byte JSON value whose event time
// (value.ts) is out of order within a bound.
//
//	go run ./bench/gen -records 1000000 -keys 10000 -partitions 4 > bench/out/1m.jsonl
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
)

func main() {
	records := flag.Int("records", 1000000, "number of records")
	keys := flag.Int("keys", 10000, "number of distinct keys (value.user)")
	partitions := flag.Int("partitions", 4, "number of partitions")
	rate := flag.Int("rate", 1000, "records per second of event time")
	disorder := flag.Int("disorder", 2000, "maximum out-of-orderness in ms")
	seed := flag.Int64("seed", 1, "random seed")
	start := flag.Int64("start", 1700000000000, "event time of the first record (Unix ms)")
	topicList := flag.String("topics", "", `comma-separated topics: each line names one, in turn ("topic"), for pipelines with several inputs`)
	flag.Parse()

	rng := rand.New(rand.NewSource(*seed))
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	defer w.Flush()
	countries := []string{"de", "fr", "us", "br", "in", "jp", "ng", "au"}
	var topics []string
	if *topicList != "" {
		topics = strings.Split(*topicList, ",")
	}
	var b []byte
	for i := 0; i < *records; i++ {
		ts := *start + int64(i)*1000/int64(*rate) - int64(rng.Intn(*disorder+1))
		user := rng.Intn(*keys)
		p := user % *partitions
		b = append(b[:0], '{')
		if topics != nil {
			b = append(b, `"topic":"`...)
			b = append(b, topics[i%len(topics)]...)
			b = append(b, `",`...)
		}
		b = append(b, `"partition":`...)
		b = strconv.AppendInt(b, int64(p), 10)
		b = append(b, `,"key":"u`...)
		b = strconv.AppendInt(b, int64(user), 10)
		b = append(b, `","value":{"user":"u`...)
		b = strconv.AppendInt(b, int64(user), 10)
		b = append(b, `","ts":`...)
		b = strconv.AppendInt(b, ts, 10)
		b = append(b, `,"x":`...)
		b = strconv.AppendFloat(b, float64(rng.Intn(100000))/100, 'f', -1, 64)
		b = append(b, `,"country":"`...)
		b = append(b, countries[user%len(countries)]...)
		b = append(b, `","page":"/products/`...)
		b = strconv.AppendInt(b, int64(rng.Intn(5000)), 10)
		b = append(b, `","agent":"Mozilla/5.0 (X11; Linux x86_64)","session":"`...)
		b = append(b, fmt.Sprintf("%016x", rng.Uint64())...)
		b = append(b, "\"}}\n"...)
		w.Write(b)
	}
}
