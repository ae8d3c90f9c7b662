package replay

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"testing"

	"github.com/windowd/windowd/config"
)

// BenchmarkReplayFile replays the file named by WINDOWD_BENCH_INPUT with the
// pipeline of WINDOWD_BENCH_CONFIG (see bench/README.md); it is skipped
// without them. WINDOWD_BENCH_WORKERS sets Options.Workers (default 1).
func BenchmarkReplayFile(b *testing.B) {
	workers, _ := strconv.Atoi(os.Getenv("WINDOWD_BENCH_WORKERS"))
	input, cfgPath := os.Getenv("WINDOWD_BENCH_INPUT"), os.Getenv("WINDOWD_BENCH_CONFIG")
	if input == "" || cfgPath == "" {
		b.Skip("set WINDOWD_BENCH_INPUT and WINDOWD_BENCH_CONFIG")
	}
	data, err := os.ReadFile(input)
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		b.Fatal(err)
	}
	lines := bytes.Count(data, []byte("\n"))
	parts, err := ScanPartitions(&cfg.Pipelines[0], nil, bytes.NewReader(data))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Run(Options{Pipeline: &cfg.Pipelines[0], Input: bytes.NewReader(data), Partitions: parts, Out: io.Discard, Errs: io.Discard, Workers: workers}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(lines)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
