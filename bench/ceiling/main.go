// Command ceiling is the decode-only ceiling for `windowd replay`
// (bench/speed.sh): it reads a JSON-lines replay input and, for each line,
// extracts partition, key, value.ts and value.x with gjson, and does nothing
// else. Its records/s bound what a replay of the same file can reach with
// the same JSON library on the same core.
//
//	go run ./bench/ceiling -input bench/out/rss-1m-k10000.jsonl
//
// It prints one line: records, seconds (from the first read to the last
// line, in-process), records/s and a checksum of the extracted fields (so
// that the work is not optimized away).
//
// Modes (-mode):
//
//	get      (default) gjson.Get on a no-copy string view of the line:
//	         partition, key and value, then ts and x inside value's raw
//	         text, so the value object is scanned once.
//	getmany  gjson.GetManyBytes(line, "partition", "key", "value.ts",
//	         "value.x"): each path is looked up from the start of the line,
//	         and the results are copied out of the line's buffer.
//	getbytes four gjson.GetBytes calls with the same paths (as getmany,
//	         without the result slice).
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"
)

func main() {
	input := flag.String("input", "", "JSON-lines file (required)")
	mode := flag.String("mode", "get", "get | getmany | getbytes")
	flag.Parse()
	if *input == "" {
		fmt.Fprintln(os.Stderr, "ceiling: -input is required")
		os.Exit(2)
	}
	var extract func(line []byte) uint64
	switch *mode {
	case "get":
		extract = extractGet
	case "getmany":
		extract = extractGetMany
	case "getbytes":
		extract = extractGetBytes
	default:
		fmt.Fprintf(os.Stderr, "ceiling: unknown -mode %q\n", *mode)
		os.Exit(2)
	}
	f, err := os.Open(*input)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ceiling:", err)
		os.Exit(1)
	}
	defer f.Close()

	start := time.Now()
	br := bufio.NewReaderSize(f, 1<<20)
	var records int64
	var sum uint64
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 1 {
			sum += extract(line)
			records++
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil { // bufio.ErrBufferFull: no line of the input is that long
			fmt.Fprintln(os.Stderr, "ceiling:", err)
			os.Exit(1)
		}
	}
	secs := time.Since(start).Seconds()
	fmt.Printf("records %d seconds %.3f records/s %.0f checksum %016x\n", records, secs, float64(records)/secs, sum)
}

// mix folds the extracted fields into a checksum.
func mix(partition int64, key string, ts int64, x float64) uint64 {
	h := uint64(partition)*0x9e3779b97f4a7c15 ^ uint64(len(key))
	if len(key) > 0 {
		h ^= uint64(key[len(key)-1]) << 8
	}
	return h + uint64(ts) + math.Float64bits(x)
}

func extractGet(line []byte) uint64 {
	s := unsafe.String(unsafe.SliceData(line), len(line))
	p := gjson.Get(s, "partition")
	k := gjson.Get(s, "key")
	v := gjson.Get(s, "value")
	ts := gjson.Get(v.Raw, "ts")
	x := gjson.Get(v.Raw, "x")
	return mix(p.Int(), k.Str, ts.Int(), x.Num)
}

var paths = []string{"partition", "key", "value.ts", "value.x"}

func extractGetMany(line []byte) uint64 {
	r := gjson.GetManyBytes(line, paths...)
	return mix(r[0].Int(), r[1].Str, r[2].Int(), r[3].Num)
}

func extractGetBytes(line []byte) uint64 {
	p := gjson.GetBytes(line, "partition")
	k := gjson.GetBytes(line, "key")
	ts := gjson.GetBytes(line, "value.ts")
	x := gjson.GetBytes(line, "value.x")
	return mix(p.Int(), k.Str, ts.Int(), x.Num)
}
