package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"go.uber.org/zap"

	"github.com/windowd/windowd/kafka"
)

// cmdReset starts a pipeline over on fresh state (docs/OPERATIONS.md,
// Changing a deployed pipeline): the choice a refused change offers.
func cmdReset(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("reset", stderr)
	path := fs.String("config", "", "configuration file")
	name := fs.String("pipeline", "", "pipeline to reset (default: the only one)")
	to := fs.String("to", "committed", "where the pipeline starts reading: committed (the group's offsets), earliest, latest, or an RFC 3339 time")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *path == "" {
		fmt.Fprintln(stderr, "windowd reset: --config is required")
		return 2
	}
	pos, err := kafka.ParseResetTo(*to)
	if err != nil {
		fmt.Fprintln(stderr, "windowd reset:", err)
		return 2
	}
	cfg, ok := loadConfig("reset", *path, stderr)
	if !ok {
		return 1
	}
	p := cfg.Pipeline(*name)
	if *name == "" && len(cfg.Pipelines) == 1 {
		p = &cfg.Pipelines[0]
	}
	if p == nil {
		fmt.Fprintf(stderr, "windowd reset: name the pipeline with --pipeline (%d in %s)\n", len(cfg.Pipelines), *path)
		return 2
	}
	if !cfg.HasBrokers() || cfg.Kafka.Embedded {
		fmt.Fprintln(stderr, "windowd reset: needs kafka.brokers of a cluster (the embedded broker keeps nothing across runs)")
		return 2
	}
	log, err := newLogger("console", "info", stderr)
	if err != nil {
		fmt.Fprintln(stderr, "windowd reset:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := kafka.ResetPipeline(ctx, cfg, cfg.Kafka.Brokers, p, pos, log); err != nil {
		fmt.Fprintln(stderr, "windowd reset:", err)
		return 1
	}
	dir := filepath.Join(cfg.State.Dir, p.Name)
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintln(stderr, "windowd reset:", err)
		return 1
	}
	log.Info("removed the local state directory; other instances discard theirs at their next start", zap.String("dir", dir))
	fmt.Fprintf(stdout, "pipeline %s reset: it starts on fresh state from %s\n", p.Name, *to)
	return 0
}
