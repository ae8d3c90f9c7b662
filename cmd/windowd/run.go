package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/service"
	"github.com/windowd/windowd/state"
)

func cmdRun(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("run", stderr)
	path := fs.String("config", "", "configuration file")
	format := fs.String("log-format", "json", "log format: json or console")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	cpuProfile := fs.String("cpu-profile", "", "write a CPU profile (pprof) of the whole run to this file, closed when windowd stops")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *path == "" {
		fmt.Fprintln(stderr, "windowd run: --config is required")
		return 2
	}
	if *cpuProfile != "" {
		stopProfile, err := startCPUProfile(*cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "windowd run: --cpu-profile:", err)
			return 2
		}
		defer stopProfile()
	}
	log, err := newLogger(*format, *level, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "windowd run:", err)
		return 2
	}
	defer func() { _ = log.Sync() }()
	cfg, ok := loadConfig("run", *path, stderr)
	if !ok {
		return 1
	}
	if !cfg.HasBrokers() {
		fmt.Fprintf(stderr, "windowd run: %s: %v\n", *path, config.ErrNoBrokers)
		return 1
	}
	// One line for both (-1: the environment variable decides).
	limit, gc := setMemoryLimit(len(cfg.Pipelines), cfg.State.CacheBytes), setGCPercent()
	if limit > 0 || gc > 0 {
		log.Info("soft memory limit and GOGC for the Go heap (set GOMEMLIMIT, GOGC to override)", zap.Int64("bytes", limit),
			zap.Int("gogc", gc), zap.Int("pipelines", len(cfg.Pipelines)), zap.Bool("pebble_outside_go_heap", cgoEnabled),
			zap.Int64("pebble_bytes_per_pipeline", state.PebbleMemoryBytes))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log.Info("starting", zap.String("version", version()), zap.String("config", *path), zap.Int("pipelines", len(cfg.Pipelines)))
	faults, err := injectedFaults()
	if err != nil {
		fmt.Fprintln(stderr, "windowd run:", err)
		return 2
	}
	if faultsBuild {
		log.Warn("this binary is built with -tags windowd_faults: WINDOWD_FAULT_* variables inject faults (tests only)")
	}
	brokers, stopQuickstart, err := startQuickstart(ctx, cfg, log)
	if err != nil {
		log.Error("windowd stopped with an error", zap.Error(err))
		return 1
	}
	defer stopQuickstart()
	if err := service.Run(ctx, cfg, service.Options{Log: log, Stdout: stdout, Brokers: brokers, Faults: faults}); err != nil {
		log.Error("windowd stopped with an error", zap.Error(err))
		return 1
	}
	log.Info("stopped cleanly")
	return 0
}

// startCPUProfile starts a CPU profile written to path (runtime/pprof:
// `go tool pprof`, and bench/pgo.sh's build profile) and returns what
// stops it and closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

func newLogger(format, level string, w io.Writer) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	var encoder zapcore.Encoder
	switch format {
	case "json":
		encoder = zapcore.NewJSONEncoder(enc)
	case "console":
		enc.EncodeLevel = zapcore.CapitalLevelEncoder
		encoder = zapcore.NewConsoleEncoder(enc)
	default:
		return nil, fmt.Errorf("--log-format must be json or console, not %q", format)
	}
	return zap.New(zapcore.NewCore(encoder, zapcore.Lock(zapcore.AddSync(w)), lvl)), nil
}
