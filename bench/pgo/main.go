// Command pgo writes the CPU profile that cmd/windowd/default.pgo is made
// from (bench/pgo.sh): windowd replay's engine and decoder over the speed
// benchmark's input for each of bench/speed.sh's window shapes, in one
// process, so that profile-guided optimization weighs them as the
// benchmarks do.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/replay"
)

func main() {
	input := flag.String("input", "", "JSON-lines input (bench/gen output)")
	out := flag.String("o", "", "CPU profile to write")
	partitions := flag.Int("partitions", 4, "the input's partition count")
	flag.Parse()
	if *input == "" || *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: pgo -input FILE -o PROFILE CONFIG...")
		os.Exit(2)
	}
	prof, err := os.Create(*out)
	if err != nil {
		fail(err)
	}
	if err := pprof.StartCPUProfile(prof); err != nil {
		fail(err)
	}
	for _, path := range flag.Args() {
		cfg, err := config.Load(path)
		if err != nil {
			fail(err)
		}
		in, err := os.Open(*input)
		if err != nil {
			fail(err)
		}
		sum, err := replay.Run(replay.Options{
			Pipeline:   &cfg.Pipelines[0],
			Input:      in,
			Partitions: *partitions,
			CacheBytes: int(cfg.State.CacheBytes),
			Out:        io.Discard,
			Errs:       io.Discard,
		})
		in.Close()
		if err != nil {
			fail(err)
		}
		fmt.Fprintf(os.Stderr, "%s: %d records, %d panes\n", path, sum.Records, sum.Panes)
	}
	pprof.StopCPUProfile()
	if err := prof.Close(); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "pgo:", err)
	os.Exit(1)
}
