package replay

import (
	"io"
	"os"
	"testing"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/watermark"
)

// TestLive: a replay with Options.Live publishes its counts as it goes
// and its final ones at the end, matching the summary.
func TestLive(t *testing.T) {
	cfg, err := config.Load("../configs/replay-example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open("../testdata/page-views.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	live := NewLive()
	if live.Frontier.Load() != watermark.MinTime {
		t.Fatalf("frontier before the replay %d", live.Frontier.Load())
	}
	sum, err := Run(Options{Pipeline: &cfg.Pipelines[0], Input: in, Partitions: 2, Out: io.Discard, Errs: io.Discard, Live: live})
	if err != nil {
		t.Fatal(err)
	}
	if live.Lines.Load() != sum.Lines || live.Records.Load() != sum.Records || live.Panes.Load() != sum.Panes-sum.Retractions ||
		live.DeadLetters.Load() != sum.DeadLetters || live.Frontier.Load() != watermark.MaxTime {
		t.Errorf("live lines %d records %d panes %d dead %d frontier %d; summary %+v", live.Lines.Load(), live.Records.Load(),
			live.Panes.Load(), live.DeadLetters.Load(), live.Frontier.Load(), sum)
	}
}
