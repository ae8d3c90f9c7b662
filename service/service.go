// Package service is `windowd run`: it wires the configured pipelines to
// Kafka (consumer groups, output, dead-letter and late topics), the
// windowing engine and Pebble state, and serves /metrics, /healthz,
// /readyz and the status page (/ and /api/status). The embedded broker and
// the demo generator of the quickstart are the windowd command's
// (cmd/windowd), which passes their address in Options.Brokers.
//
// Invariants: a pipeline commits input offsets only after its output is
// acknowledged and its state is synced (at_least_once); a failure to write
// state or output stops the process without committing; an unreachable
// broker is retried, never treated as a reason to commit or to exit.
package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/kafka"
	"github.com/windowd/windowd/schema"
)

// Options are the process-level dependencies of Run.
type Options struct {
	Log    *zap.Logger
	Stdout io.Writer        // pane lines of pipelines with output.stdout
	Now    func() time.Time // processing-time clock; nil: time.Now
	// Ready, when set, is called once the HTTP listener is bound, with its address.
	Ready func(httpAddr string)
	// Fatal is called when local state cannot be written (disk full, I/O
	// error) and must not return. Default: log the error and exit(1), which
	// is safe because offsets are committed only after state is synced.
	Fatal func(msg string)
	// Brokers, when set, replace kafka.brokers (the embedded broker's
	// address).
	Brokers []string
	// Faults are injected by tests to reach rare paths; the zero value
	// injects none.
	Faults Faults
}

type deps struct {
	fatal   func(msg string)
	log     *zap.Logger
	metrics *metrics
	now     func() time.Time
	stdout  *lockedWriter
	faults  Faults
	// registry: the schemas of avro and protobuf pipelines; nil when
	// every pipeline reads JSON.
	registry *schema.Registry
	// paneSchemas: the registry id of each pipeline's pane schema
	// (output.format other than json), by pipeline name.
	paneSchemas map[string]int
	// guard: the output, late and dead-letter topics' time settings
	// (retention.go).
	guard *retentionGuard
	// queryAddr: the address of this instance's query API that the
	// group's members forward to (http.advertise, else from the listener).
	queryAddr string
	// clientOpts: brokers, client id, compression, TLS and SASL,
	// resolved once for every client of the process (kafka.ClientOpts).
	clientOpts []kgo.Opt
}

// Run runs every pipeline of cfg until ctx is done, then shuts down within
// cfg.ShutdownGrace: final commit, leave the group, close. It returns nil
// after a clean shutdown.
func Run(ctx context.Context, cfg *config.Config, opts Options) error {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	log := opts.Log
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	d, err := newDeps(cfg, opts, reg)
	if err != nil {
		return err
	}
	brokers, err := brokersOf(cfg, opts)
	if err != nil {
		return err
	}
	// Resolved once: every client of the process starts from them.
	if d.clientOpts, err = kafka.ClientOpts(cfg, brokers, log); err != nil {
		return err
	}

	st := &status{now: opts.Now, configured: map[string]bool{}}
	for _, pl := range cfg.Pipelines {
		st.configured[pl.Name] = true
	}
	srv, addr, err := serveHTTP(cfg.HTTP.Listen, reg, st, d.metrics)
	if err != nil {
		return err
	}
	defer srv.Close()
	log.Info("http listening", zap.String("addr", addr), zap.String("paths", "/ /api/status /api/windows /metrics /healthz /readyz"),
		zap.String("status_page", "http://"+addr+"/"))
	if opts.Ready != nil {
		opts.Ready(addr)
	}
	d.queryAddr = advertised(cfg.HTTP.Advertise, addr, net.InterfaceAddrs)

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	inputs, err := kafka.EnsureTopics(runCtx, cfg, d.clientOpts, log)
	if err != nil {
		stop()
		wg.Wait()
		if ctx.Err() != nil {
			return nil
		}
		return err
	}

	if err := d.watchRetention(runCtx, &wg); err != nil {
		return err
	}
	if d.paneSchemas, err = registerPaneSchemas(runCtx, cfg, d.registry, log); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}

	grace := time.Duration(cfg.ShutdownGrace) * time.Millisecond
	errs := make(chan error, len(cfg.Pipelines))
	for _, pl := range plans(cfg, inputs) {
		p, err := buildPipeline(runCtx, pl, d)
		if p == nil {
			stop()
			wg.Wait()
			return err
		}
		st.add(p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := superviseRun(runCtx, p, pl, d, st, grace)
			if err != nil {
				stop() // one failed pipeline stops the process: restart resumes from the last checkpoint
			}
			errs <- err
		}()
	}
	<-runCtx.Done()
	return awaitPipelines(&wg, errs, grace, log)
}

// newDeps is what every pipeline of cfg shares: the logger, the metrics,
// the clock, standard output, the fatal-error exit, the faults and, for
// avro and protobuf inputs, the schema registry.
func newDeps(cfg *config.Config, opts Options, reg *prometheus.Registry) (deps, error) {
	log := opts.Log
	if opts.Fatal == nil {
		opts.Fatal = func(msg string) {
			log.Error("pipeline stopped: local state cannot be written; exiting without committing offsets", zap.String("error", msg))
			_ = log.Sync()
			os.Exit(1)
		}
	}
	d := deps{log: log, metrics: newMetrics(reg), now: opts.Now, stdout: &lockedWriter{w: opts.Stdout}, fatal: opts.Fatal, faults: opts.Faults}
	d.guard = newRetentionGuard(cfg, d.metrics, log, opts.Now)
	for _, p := range cfg.Pipelines {
		if (p.BinaryInput() || p.OutputFormat != config.JSON) && d.registry == nil {
			r, err := schema.FromConfig(cfg.SchemaRegistry, "")
			if err != nil {
				return deps{}, err
			}
			d.registry = r
			registerRegistryMetrics(reg, d.registry)
			log.Info("schema registry", zap.String("url", d.registry.URL()))
		}
	}
	return d, nil
}

// watchRetention reads the output, late and dead-letter topics' time
// settings before the pipelines write to them, then again every
// guardRefresh on a goroutine of its own (in wg) until ctx ends.
func (d *deps) watchRetention(ctx context.Context, wg *sync.WaitGroup) error {
	cl, err := kgo.NewClient(d.clientOpts...)
	if err != nil {
		return err
	}
	adm := kadm.NewClient(cl)
	d.guard.read(ctx, adm)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer cl.Close()
		d.guard.watch(ctx, adm)
	}()
	return nil
}

// brokersOf is the brokers windowd connects to: the embedded one's address
// `windowd run` passes, or the configured list.
func brokersOf(cfg *config.Config, opts Options) ([]string, error) {
	brokers := opts.Brokers
	if len(brokers) == 0 {
		if cfg.Kafka.Embedded {
			return nil, errors.New("kafka.brokers: embedded: the embedded broker is started by `windowd run`, which passes its address in Options.Brokers")
		}
		brokers = cfg.Kafka.Brokers
	}
	if len(brokers) == 0 {
		return nil, config.ErrNoBrokers
	}
	return brokers, nil
}

// superviseRun runs pipeline p until ctx ends or it fails; a pipeline
// that must rejoin (exactly_once: a zombie, a transaction whose outcome
// is unknown, a producer id the broker did not give) is built again on
// the same state and runs on.
func superviseRun(ctx context.Context, p *pipeline, pl plan, d deps, st *status, grace time.Duration) error {
	err := p.run(ctx, grace)
	for rejoins(err) && ctx.Err() == nil {
		// Rejoin as a new pipeline on the same state dir and
		// transactional id rather than exit.
		d.log.Warn("pipeline stopped under exactly_once: rejoining the group with a new producer epoch; its partitions restore from the changelog",
			zap.String("pipeline", p.cfg.Name), zap.Error(err))
		np, nerr := buildPipeline(ctx, pl, d)
		if np == nil {
			err = nerr // nil: stopped while the broker did not answer
			break
		}
		st.replace(p, np)
		p = np
		err = p.run(ctx, grace)
	}
	if err != nil {
		d.log.Error("pipeline stopped", zap.String("pipeline", p.cfg.Name), zap.Error(err))
	}
	return err
}

// buildPipeline builds the pipeline of pl, retrying once a second while
// the broker does not answer what that takes (the producer id: a broker
// down or shutting down); nil and no error when ctx ends first.
func buildPipeline(ctx context.Context, pl plan, d deps) (*pipeline, error) {
	for {
		p, err := newPipeline(pl, d)
		if !errors.Is(err, errUnanswered) {
			return p, err
		}
		d.log.Warn("building the pipeline: the broker does not answer (retrying)", zap.String("pipeline", pl.pipeline.Name), zap.Error(err))
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(time.Second):
		}
	}
}

// awaitPipelines waits, at most grace, for the pipelines to stop, and
// returns the errors of those that failed.
func awaitPipelines(wg *sync.WaitGroup, errs chan error, grace time.Duration, log *zap.Logger) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		// A pipeline is stuck past its own bounds (a poll loop inside a
		// transaction's end that waits for a broker that is down):
		// exit anyway, nothing uncommitted is lost (docs/OPERATIONS.md,
		// shutdown). Where it is stuck goes to the debug log.
		var stacks strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
		log.Warn("shutdown grace passed with a pipeline still stopping; exiting without its final commit (what it did not commit is processed again after a restart, or rolled back under exactly_once)",
			zap.Duration("shutdown_grace", grace))
		log.Debug("goroutines at the end of the shutdown grace", zap.String("goroutines", stacks.String()))
		// A pipeline that failed (rather than stopped) still fails the run.
		var all []error
		for {
			select {
			case err := <-errs:
				if err != nil {
					all = append(all, err)
				}
			default:
				return errors.Join(all...)
			}
		}
	}
	close(errs)
	var all []error
	for err := range errs {
		if err != nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}

// status answers /readyz and the status page from the running pipelines.
type status struct {
	now        func() time.Time
	configured map[string]bool // the configured pipelines' names
	mu         sync.Mutex
	pipelines  []*pipeline
}

// list returns the running pipelines.
func (s *status) list() []*pipeline {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*pipeline(nil), s.pipelines...)
}

func (s *status) add(p *pipeline) {
	s.mu.Lock()
	s.pipelines = append(s.pipelines, p)
	s.mu.Unlock()
}

// replace puts p in old's place (a pipeline rebuilt after it was fenced).
func (s *status) replace(old, p *pipeline) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, q := range s.pipelines {
		if q == old {
			s.pipelines[i] = p
		}
	}
}

func (s *status) ready() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pipelines) == 0 {
		return false, "starting: waiting for topics"
	}
	var reasons []string
	for _, p := range s.pipelines {
		if ok, why := p.ready(); !ok {
			reasons = append(reasons, p.cfg.Name+": "+why)
		}
	}
	return len(reasons) == 0, strings.Join(reasons, "\n")
}

// advertised is the query address of an instance listening at addr:
// http.advertise when set, else addr; for a listener on every interface,
// the host's first non-loopback address (a pod's IP in Kubernetes, which
// every other pod can reach), else its host name.
func advertised(advertise, addr string, ifaceAddrs func() ([]net.Addr, error)) string {
	if advertise != "" {
		return advertise
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return addr
	}
	if as, err := ifaceAddrs(); err == nil {
		for _, a := range as {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() && n.IP.To4() != nil {
				return net.JoinHostPort(n.IP.String(), port)
			}
		}
	}
	if name, err := os.Hostname(); err == nil {
		return net.JoinHostPort(name, port)
	}
	return addr
}

func serveHTTP(listen string, reg *prometheus.Registry, st *status, m *metrics) (*http.Server, string, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ok, why := st.ready(); !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "not ready\n"+why+"\n")
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	mountStatusPage(mux, st)
	mountQueryAPI(mux, st, m)
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, "", fmt.Errorf("http.listen %s: %w", listen, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, ln.Addr().String(), nil
}
