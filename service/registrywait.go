package service

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/schema"
)

// Waiting for the schema registry (docs/SEMANTICS.md, Input formats): a
// record whose schema is not cached while the registry cannot be asked is
// not dead-lettered. Its partition is rewound to it and paused; the other
// partitions go on (a record whose schema is cached decodes without the
// registry). Once the registry's backoff has passed, the partitions resume
// and their next record asks again.

// registryLogEvery bounds how often a wait is logged.
const registryLogEvery = 10 * time.Second

// registryWait pauses one consumer's partitions while the registry is
// unavailable (under the caller's lock). It names them as the caller's
// frontier does (the pipeline's partitions, or stage 1's upstream
// partitions); topics maps them to the consumer's topics and back.
type registryWait struct {
	cl      *kgo.Client
	topics  partitionMap
	log     *zap.Logger
	gauge   prometheus.Gauge
	parts   []int32   // paused for the registry
	retry   time.Time // when to resume them
	lastLog time.Time
	failed  bool // a wait since the registry last answered: log when it does
}

// newRegistryWait returns the wait of the partitions topics maps; its
// client is set once made.
func newRegistryWait(topics partitionMap, log *zap.Logger, gauge prometheus.Gauge) *registryWait {
	return &registryWait{topics: topics, log: log, gauge: gauge}
}

// hold rewinds partition part, r's, to r and pauses it: the registry could
// not be asked for r's schema (err), at now.
func (w *registryWait) hold(part int32, r *kgo.Record, err *schema.Unavailable, now time.Time) {
	kp := w.topics.toKafka([]int32{part}) // one topic, one partition
	at := map[string]map[int32]kgo.EpochOffset{}
	for topic, ps := range kp {
		at[topic] = map[int32]kgo.EpochOffset{ps[0]: {Epoch: r.LeaderEpoch, Offset: r.Offset}}
	}
	w.cl.SetOffsets(at)
	w.cl.PauseFetchPartitions(kp)
	if !slices.Contains(w.parts, part) {
		w.parts = append(w.parts, part)
	}
	if err.Retry.After(w.retry) {
		w.retry = err.Retry
	}
	w.failed = true
	w.gauge.Set(float64(len(w.parts)))
	if now.Sub(w.lastLog) >= registryLogEvery {
		w.lastLog = now
		w.log.Warn("schema registry unavailable: partitions paused until it answers (no record is dead-lettered for it)",
			zap.Any("partitions", w.topics.toKafka(w.parts)), zap.Error(err.Err),
			zap.Duration("retry_in", err.Retry.Sub(now).Round(time.Millisecond)))
	}
}

// step resumes the paused partitions once the retry time has passed at
// now; their next record asks the registry again. A partition that
// watermark alignment holds paused (aligned; nil: none) stays paused.
func (w *registryWait) step(now time.Time, aligned func(int32) bool) {
	if len(w.parts) == 0 || now.Before(w.retry) {
		return
	}
	resume := w.parts
	if aligned != nil {
		resume = slices.DeleteFunc(slices.Clone(resume), aligned)
	}
	w.cl.ResumeFetchPartitions(w.topics.toKafka(resume))
	w.parts = w.parts[:0]
	w.gauge.Set(0)
}

// registerRegistryMetrics exports reg's state.
func registerRegistryMetrics(pr prometheus.Registerer, reg *schema.Registry) {
	pr.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "windowd_schema_registry_up",
			Help: "1 when the last schema registry request got an answer (or none was made yet), 0 while it cannot be reached or answers with an error."},
			func() float64 {
				if reg.Up() {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "windowd_schema_registry_failures_total",
			Help: "Schema registry requests that could not reach it or got an error other than not found."},
			func() float64 { return float64(reg.Failures()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "windowd_schema_registry_schemas_fetched_total",
			Help: "Schemas fetched from the registry (each id once while it stays in the cache)."},
			func() float64 { return float64(reg.Fetched()) }),
	)
}

// recovered logs, once after a wait, that the registry answers again.
func (w *registryWait) recovered(reg *schema.Registry) {
	if w.failed && len(w.parts) == 0 && reg.Up() {
		w.failed = false
		w.log.Info("schema registry answers again: consumption resumed")
	}
}

// waiting reports whether part is paused for the registry.
func (w *registryWait) waiting(part int32) bool { return w != nil && slices.Contains(w.parts, part) }

// forget resumes parts, which this consumer no longer owns: a pause would
// outlive their assignment.
func (w *registryWait) forget(parts []int32) {
	var resume []int32
	w.parts = slices.DeleteFunc(w.parts, func(p int32) bool {
		if slices.Contains(parts, p) {
			resume = append(resume, p)
			return true
		}
		return false
	})
	if len(resume) > 0 {
		w.cl.ResumeFetchPartitions(w.topics.toKafka(resume))
	}
	w.gauge.Set(float64(len(w.parts)))
}

// registryUnavailable is handleDecoded's word that a record waits for the
// registry: it was not taken in.
type registryUnavailable struct{ un *schema.Unavailable }

func (e *registryUnavailable) Error() string { return e.un.Error() }
