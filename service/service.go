// Package service is `windowd run`: it wires the configured pipelines to
// Kafka (consumer groups, output, dead-letter and late topics), the
// windowing engine and Pebble state, and serves /metrics, /healthz and
// /readyz. With `kafka.brokers: embedded` it first starts an in-process
// broker (franz-go's kfake) and, when configured, a demo event generator.
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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
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
	if opts.Fatal == nil {
		opts.Fatal = func(msg string) {
			log.Error("pipeline stopped: local state cannot be written; exiting without committing offsets", zap.String("error", msg))
			_ = log.Sync()
			os.Exit(1)
		}
	}
	d := deps{log: log, metrics: newMetrics(reg), now: opts.Now, stdout: &lockedWriter{w: opts.Stdout}, fatal: opts.Fatal, faults: opts.Faults}

	brokers := cfg.Kafka.Brokers
	if cfg.Kafka.Embedded {
		cluster, err := startEmbedded(cfg)
		if err != nil {
			return err
		}
		defer cluster.Close()
		brokers = cluster.ListenAddrs()
		log.Info("embedded broker started", zap.Strings("listen", brokers))
	}

	st := &status{}
	srv, addr, err := serveHTTP(cfg.HTTP.Listen, reg, st)
	if err != nil {
		return err
	}
	defer srv.Close()
	log.Info("http listening", zap.String("addr", addr), zap.String("paths", "/metrics /healthz /readyz"))
	if opts.Ready != nil {
		opts.Ready(addr)
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	if cfg.Generator != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := runGenerator(runCtx, cfg, brokers, log.Named("generator"), opts.Now); err != nil && runCtx.Err() == nil {
				log.Error("generator stopped", zap.Error(err))
			}
		}()
	}

	inputs, err := ensureTopics(runCtx, cfg, brokers, log)
	if err != nil {
		stop()
		wg.Wait()
		if ctx.Err() != nil {
			return nil
		}
		return err
	}

	grace := time.Duration(cfg.ShutdownGrace) * time.Millisecond
	errs := make(chan error, len(cfg.Pipelines))
	for i := range cfg.Pipelines {
		p, err := newPipeline(&cfg.Pipelines[i], cfg, brokers, inputs[cfg.Pipelines[i].Name], d)
		if err != nil {
			stop()
			wg.Wait()
			return err
		}
		st.add(p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := p.run(runCtx, grace)
			for errors.Is(err, errFenced) && runCtx.Err() == nil {
				// A zombie (exactly_once): rejoin as a new pipeline on the
				// same state dir and transactional id rather than exit.
				log.Warn("pipeline fenced: rejoining the group with a new producer epoch; its partitions restore from the changelog",
					zap.String("pipeline", p.cfg.Name), zap.Error(err))
				np, nerr := newPipeline(p.orig, cfg, brokers, inputs[p.orig.Name], d)
				if nerr != nil {
					err = nerr
					break
				}
				st.replace(p, np)
				p = np
				err = p.run(runCtx, grace)
			}
			if err != nil {
				log.Error("pipeline stopped", zap.String("pipeline", p.cfg.Name), zap.Error(err))
				stop() // one failed pipeline stops the process: restart resumes from the last checkpoint
			}
			errs <- err
		}()
	}
	<-runCtx.Done()
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

// startEmbedded starts the in-process broker with every input topic.
func startEmbedded(cfg *config.Config) (*kfake.Cluster, error) {
	_, portStr, err := net.SplitHostPort(cfg.Kafka.EmbeddedListen)
	if err != nil {
		return nil, fmt.Errorf("kafka.embedded_listen: %w", err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("kafka.embedded_listen: %w", err)
	}
	opts := []kfake.Opt{kfake.Ports(port), kfake.AllowAutoTopicCreation()}
	for _, p := range cfg.Pipelines {
		opts = append(opts, kfake.SeedTopics(p.Input.Partitions, p.Input.Topic))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded broker on %s: %w", cfg.Kafka.EmbeddedListen, err)
	}
	return c, nil
}

// ensureTopics waits for every input topic and creates missing output,
// dead-letter and late topics with the input's partition count, and the
// changelog (and a repartitioned pipeline's internal topic) with as many
// partitions as the pipeline's windowing stage consumes. It returns each
// pipeline's input partition count. It is the
// first connection to the cluster: a broker that cannot be reached or a
// missing input topic is retried, but credentials, a certificate or
// permissions that the cluster refuses stop it at once (securityError).
func ensureTopics(ctx context.Context, cfg *config.Config, brokers []string, log *zap.Logger) (map[string]int32, error) {
	opts, err := clientOpts(cfg, brokers, log)
	if err != nil {
		return nil, err
	}
	inputs := map[string]int32{}
	if t := cfg.Kafka.TLS; t != nil && t.InsecureSkipVerify {
		log.Warn("kafka.tls.insecure_skip_verify is true: the broker certificate is not verified")
	}
	if s := cfg.Kafka.SASL; s != nil && s.Mechanism == config.SASLPlain && cfg.Kafka.TLS == nil {
		log.Warn("kafka.sasl: PLAIN without kafka.tls sends the password in clear text")
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, p := range cfg.Pipelines {
		var partitions int32
		for backoff := 250 * time.Millisecond; ; backoff = min(2*backoff, 10*time.Second) {
			tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			details, err := adm.ListTopics(tctx, p.Input.Topic)
			cancel()
			if err == nil {
				d, ok := details[p.Input.Topic]
				if ok && d.Err == nil && len(d.Partitions) > 0 {
					partitions = int32(len(d.Partitions))
					break
				}
				err = fmt.Errorf("topic %s does not exist", p.Input.Topic)
				if ok && d.Err != nil && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
					err = d.Err
				}
			}
			if serr := securityError(&cfg.Kafka, err, "input topic "+p.Input.Topic); serr != nil {
				return nil, serr
			}
			log.Warn("waiting for input topic (retrying)", zap.String("pipeline", p.Name), zap.String("topic", p.Input.Topic), zap.Error(err), zap.Duration("backoff", backoff))
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(backoff):
			}
		}
		inputs[p.Name] = partitions
		changelog := changelogTopic(&p)
		internal, stateParts := "", partitions
		if p.Repartition != nil {
			internal, stateParts = repartitionTopic(&p), repartitionPartitions(&p, partitions)
		}
		for _, topic := range []string{p.OutputTopic, p.DeadLetterTopic, p.LateTopic, changelog, internal} {
			if topic == "" {
				continue
			}
			var configs map[string]*string
			n := partitions
			switch topic {
			case changelog:
				configs, n = map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, stateParts
			case internal:
				// No time-based deletion: stage 2 deletes what it has processed.
				configs, n = map[string]*string{"retention.ms": kadm.StringPtr("-1")}, stateParts
			}
			tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			resp, err := adm.CreateTopic(tctx, n, -1, configs, topic)
			cancel()
			if err == nil {
				err = resp.Err
			}
			switch {
			case err == nil:
				log.Info("created topic", zap.String("pipeline", p.Name), zap.String("topic", topic), zap.Int32("partitions", n))
			case errors.Is(err, kerr.TopicAlreadyExists):
				switch topic {
				case internal:
					if err := checkPartitions(ctx, adm, topic, n); err != nil {
						return nil, err
					}
				case changelog:
					// The input grew while windowd was down (or before
					// it ever ran): partition p's state needs changelog
					// partition p.
					if err := growTopic(ctx, adm, cl, topic, n, log.With(zap.String("pipeline", p.Name))); err != nil {
						return nil, err
					}
				}
			default:
				if serr := securityError(&cfg.Kafka, err, "create topic "+topic); serr != nil {
					return nil, serr
				}
				return nil, fmt.Errorf("create topic %s: %w", topic, err)
			}
		}
	}
	return inputs, nil
}

// checkPartitions refuses an existing repartition topic with another
// partition count than configured (stage 1 would write keys where stage 2's
// state does not expect them).
func checkPartitions(ctx context.Context, adm *kadm.Client, topic string, partitions int32) error {
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	details, err := adm.ListTopics(tctx, topic)
	if err != nil {
		return fmt.Errorf("topic %s: %w", topic, err)
	}
	d, ok := details[topic]
	if !ok || d.Err != nil {
		return nil
	}
	if have := int32(len(d.Partitions)); have != partitions {
		return fmt.Errorf("repartition topic %s has %d partitions, the pipeline needs %d: set repartition_partitions: %d, or delete the topic (and the changelog) to start over",
			topic, have, partitions, have)
	}
	return nil
}

// status answers /readyz from the running pipelines.
type status struct {
	mu        sync.Mutex
	pipelines []*pipeline
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

func serveHTTP(listen string, reg *prometheus.Registry, st *status) (*http.Server, string, error) {
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
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, "", fmt.Errorf("http.listen %s: %w", listen, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, ln.Addr().String(), nil
}

// kgoLogger adapts zap to franz-go's logger (warnings and errors only).
type kgoLogger struct{ l *zap.Logger }

func (k kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	fields := make([]zap.Field, 0, len(keyvals)/2)
	for i := 0; i+1 < len(keyvals); i += 2 {
		fields = append(fields, zap.Any(fmt.Sprint(keyvals[i]), keyvals[i+1]))
	}
	switch level {
	case kgo.LogLevelError:
		k.l.Error(msg, fields...)
	case kgo.LogLevelWarn:
		k.l.Warn(msg, fields...)
	default:
		k.l.Debug(msg, fields...)
	}
}
