// Command windowd is the windowd CLI: run the Kafka service, replay a
// pipeline over a JSON-lines file, validate a configuration, print the version.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/replay"
	"github.com/windowd/windowd/schema"
)

const usage = `windowd: event-time windowing for Kafka

usage:
  windowd run      --config FILE [--log-format json|console] [--log-level info] [--cpu-profile FILE]
  windowd replay   --config FILE [--pipeline NAME] [--input FILE|-] [--partitions N] [--state-dir DIR] [--progress] [--workers N]
  windowd validate --config FILE [--against-state DIR]
  windowd reset    --config FILE [--pipeline NAME] [--to committed|earliest|latest|TIME]
  windowd version
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes the CLI and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return cmdRun(args[1:], stdout, stderr)
	case "replay":
		return cmdReplay(args[1:], stdin, stdout, stderr)
	case "validate":
		return cmdValidate(args[1:], stdout, stderr)
	case "reset":
		return cmdReset(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "windowd", version())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "windowd: unknown command %q\n%s", args[0], usage)
	return 2
}

// stampedVersion is the version a build without the repository's history
// passes in (the container image: -ldflags "-X main.stampedVersion=...",
// from the Dockerfile's VERSION argument); empty otherwise.
var stampedVersion string

// version is the stamped version, else the module version (a build of a
// tagged module, `go install ...@v1.2.3`), else the VCS revision and commit
// time stamped by `go build` in a clone, and the Go version.
func version() string {
	if stampedVersion != "" {
		return stampedVersion + " " + runtime.Version()
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	return versionOf(info, runtime.Version())
}

func versionOf(info *debug.BuildInfo, goVersion string) string {
	v := "(devel)"
	if info != nil {
		if info.Main.Version != "" && info.Main.Version != "(devel)" {
			v = info.Main.Version
		} else {
			var rev, at string
			modified := false
			for _, s := range info.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.time":
					at = s.Value
				case "vcs.modified":
					modified = s.Value == "true"
				}
			}
			if rev != "" {
				v = "devel " + rev[:min(len(rev), 12)]
				if at != "" {
					v += " " + at
				}
				if modified {
					v += " (modified)"
				}
			}
		}
	}
	return v + " " + goVersion
}

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// loadConfig loads the configuration for command cmd; on failure it prints
// every configuration problem as is, or a one-line reason prefixed with the
// command, and reports false.
func loadConfig(cmd, path string, stderr io.Writer) (*config.Config, bool) {
	cfg, err := config.Load(path)
	if err != nil {
		var cerr *config.Errors
		if errors.As(err, &cerr) {
			fmt.Fprintln(stderr, err)
		} else {
			fmt.Fprintf(stderr, "windowd %s: %v\n", cmd, err)
		}
		return nil, false
	}
	return cfg, true
}

func cmdValidate(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("validate", stderr)
	path := fs.String("config", "", "configuration file")
	against := fs.String("against-state", "", "a state.dir: print the plan a start on it would follow, and fail when it would be refused (docs/OPERATIONS.md, Changing a deployed pipeline)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *path == "" {
		fmt.Fprintln(stderr, "windowd validate: --config is required")
		return 2
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if *against != "" {
		if !planAgainst(cfg, *against, stdout, stderr) {
			return 1
		}
	}
	fmt.Fprintln(stdout, "OK")
	if !cfg.HasBrokers() {
		fmt.Fprintln(stdout, "note: no kafka.brokers: replay works; run needs kafka.brokers (host:port addresses, or embedded)")
	}
	return 0
}

func cmdReplay(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("replay", stderr)
	path := fs.String("config", "", "configuration file")
	name := fs.String("pipeline", "", "pipeline to run (default: the only one)")
	input := fs.String("input", "-", "JSON-lines input file, - for standard input")
	partitions := fs.Int("partitions", 0, "number of partitions (default: one more than the largest in the input)")
	stateDir := fs.String("state-dir", "", "directory for the replay's temporary Pebble state, a fresh subdirectory removed afterwards (default: the system's temporary directory)")
	progress := fs.Bool("progress", false, "print progress lines among the panes (docs/SEMANTICS.md, Progress records)")
	registryURL := fs.String("schema-registry", "", "schema registry URL for an avro or protobuf pipeline, whose lines' values are {\"base64\": \"...\"} (default: schema_registry.url of the configuration)")
	workers := fs.Int("workers", 1, "engines the keys are spread over, 0: one per core (default: the pipeline's workers, else 1); above 1 the panes of different keys come in another order (docs/SEMANTICS.md, Replay)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *workers == 0 {
		*workers = min(runtime.GOMAXPROCS(0), replay.MaxWorkers)
	}
	if *workers < 1 || *workers > replay.MaxWorkers {
		fmt.Fprintf(stderr, "windowd replay: --workers must be between 0 (one per core) and %d\n", replay.MaxWorkers)
		return 2
	}
	workersSet := false
	fs.Visit(func(f *flag.Flag) { workersSet = workersSet || f.Name == "workers" })
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "windowd replay: "+format+"\n", a...)
		return 1
	}
	if *path == "" {
		fmt.Fprintln(stderr, "windowd replay: --config is required")
		return 2
	}
	cfg, ok := loadConfig("replay", *path, stderr)
	if !ok {
		return 1
	}
	setMemoryLimit(1, cfg.State.CacheBytes)
	setGCPercent()
	p, err := pickPipeline(cfg, *name)
	if err != nil {
		return fail("%v", err)
	}
	if !workersSet && p.Workers > 0 {
		*workers = p.Workers
	}
	var reg *schema.Registry
	if p.BinaryInput() || *registryURL != "" {
		if *registryURL == "" && cfg.SchemaRegistry == nil {
			return fail("pipeline %s reads avro or protobuf values: give --schema-registry URL, or schema_registry in %s", p.Name, cfg.File)
		}
		if reg, err = schema.FromConfig(cfg.SchemaRegistry, *registryURL); err != nil {
			return fail("%v", err)
		}
	}
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "partitions" })
	if *partitions < 0 || explicit && *partitions == 0 || *partitions > replay.MaxPartitions {
		return fail("--partitions must be between 1 and %d (docs/OPERATIONS.md, Limits)", replay.MaxPartitions)
	}

	// SIGINT or SIGTERM stops the replay: reads return, Run removes its
	// state directory, the spool is removed, exit 130. A second signal
	// kills at once.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() { <-ctx.Done(); stop() }()
	interrupted := func() int {
		fmt.Fprintln(stderr, "windowd replay: interrupted; its temporary state is removed")
		return 130
	}

	in, cleanup, err := openInput(ctx, *input, stdin, *partitions == 0)
	if err != nil {
		if ctx.Err() != nil {
			return interrupted()
		}
		return fail("%v", err)
	}
	defer cleanup()
	n := *partitions
	if n == 0 {
		if n, err = scanPartitions(ctx, p, reg, in, *workers); err != nil {
			if ctx.Err() != nil {
				return interrupted()
			}
			return fail("read %s: %v", *input, err)
		}
		if _, err := in.Seek(0, io.SeekStart); err != nil {
			return fail("read %s: %v", *input, err)
		}
	}
	opts := replay.Options{
		Pipeline:   p,
		Input:      replay.Interruptible(ctx, in),
		Partitions: n,
		StateDir:   *stateDir,
		CacheBytes: int(cfg.State.CacheBytes),
		Out:        stdout,
		Errs:       stderr,
		Progress:   *progress,
		Registry:   reg,
		Workers:    *workers,
	}
	stopLive := func() {}
	if term, ok := stderr.(*os.File); ok && isTerminal(term) {
		var size int64
		if f, ok := in.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
				size = fi.Size()
			}
		}
		live := newLiveStatus(stderr, size, time.Now)
		opts.Input, opts.Live, opts.Errs = live.counted(opts.Input), live.live, live.passThrough(stderr)
		if out, ok := stdout.(*os.File); ok && isTerminal(out) {
			opts.Out = live.passThrough(stdout) // panes on the same screen
		}
		stop, done := make(chan struct{}), make(chan struct{})
		go live.run(stop, done)
		stopLive = func() { close(stop); <-done }
	}
	sum, err := replay.Run(opts)
	stopLive()
	if err != nil {
		if ctx.Err() != nil {
			return interrupted()
		}
		return fail("%v", err)
	}
	fmt.Fprintf(stderr, `{"summary":{"lines":%d,"records":%d,"clocks":%d,"dead_letters":%d,"filtered":%d,"late_dropped":%d,"panes":%d,"retractions":%d}}`+"\n",
		sum.Lines, sum.Records, sum.Clocks, sum.DeadLetters, sum.Filtered, sum.LateDropped, sum.Panes, sum.Retractions)
	return 0
}

func pickPipeline(cfg *config.Config, name string) (*config.Pipeline, error) {
	if name != "" {
		if p := cfg.Pipeline(name); p != nil {
			return p, nil
		}
		return nil, fmt.Errorf("%s has no pipeline %q", cfg.File, name)
	}
	if len(cfg.Pipelines) != 1 {
		return nil, fmt.Errorf("%s has %d pipelines: choose one with --pipeline", cfg.File, len(cfg.Pipelines))
	}
	return &cfg.Pipelines[0], nil
}

// spoolLimit bounds the spool of standard input (replay.MaxSpoolBytes;
// tests lower it).
var spoolLimit int64 = replay.MaxSpoolBytes

// openInput opens the replay input as a seekable file. Standard input is
// spooled to a temporary file, at most spoolLimit bytes, when the partition
// count must be scanned first.
// scanPartitions counts in's partitions (a replay without --partitions):
// a regular file (the spool of standard input too) in as many ranges at
// once as the replay has workers, anything else in order.
func scanPartitions(ctx context.Context, p *config.Pipeline, reg *schema.Registry, in io.ReadSeeker, workers int) (int, error) {
	if f, ok := in.(*os.File); ok && workers > 1 {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			return replay.ScanPartitionsAt(p, reg, f, st.Size(), workers, func(r io.Reader) io.Reader { return replay.Interruptible(ctx, r) })
		}
	}
	return replay.ScanPartitions(p, reg, replay.Interruptible(ctx, in))
}

func openInput(ctx context.Context, path string, stdin io.Reader, needSeek bool) (io.ReadSeeker, func(), error) {
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, nil, err
		}
		if st, err := f.Stat(); err == nil && st.IsDir() {
			f.Close()
			return nil, nil, fmt.Errorf("--input %s is a directory, not a JSON-lines file", path)
		}
		return f, func() { f.Close() }, nil
	}
	if !needSeek {
		return nopSeeker{stdin}, func() {}, nil
	}
	tmp, err := os.CreateTemp("", "windowd-stdin-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { tmp.Close(); os.Remove(tmp.Name()) }
	n, err := io.Copy(tmp, io.LimitReader(replay.Interruptible(ctx, stdin), spoolLimit+1))
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("read standard input: %w", err)
	}
	if n > spoolLimit {
		cleanup()
		return nil, nil, fmt.Errorf("standard input passes %d MiB, the most spooled to find the partition count: give --partitions N to stream it, or --input FILE (docs/OPERATIONS.md, Limits)", spoolLimit>>20)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		cleanup()
		return nil, nil, err
	}
	return tmp, cleanup, nil
}

// nopSeeker is a reader that is never seeked (the partition count was given).
type nopSeeker struct{ io.Reader }

func (nopSeeker) Seek(int64, int) (int64, error) {
	return 0, errors.New("standard input cannot be re-read")
}
