package service

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/windowd/windowd/watermark"
)

// metrics are the Prometheus series of docs/SEMANTICS.md, Operation, labelled
// by pipeline (and partition or timing).
type metrics struct {
	recordsIn      *prometheus.CounterVec
	deadLetters    *prometheus.CounterVec
	filtered       *prometheus.CounterVec
	lateDropped    *prometheus.CounterVec
	panes          *prometheus.CounterVec
	watermark      *prometheus.GaugeVec
	idle           *prometheus.GaugeVec
	holds          *prometheus.GaugeVec
	lag            *prometheus.GaugeVec
	frontier       *prometheus.GaugeVec
	frontierLag    *prometheus.GaugeVec
	openWindows    *prometheus.GaugeVec
	cacheBytes     *prometheus.GaugeVec
	evictions      *prometheus.CounterVec
	quietAdvances  *prometheus.CounterVec
	discarded      *prometheus.CounterVec
	stateBytes     *prometheus.GaugeVec
	commitLatency  *prometheus.HistogramVec
	ready          *prometheus.GaugeVec
	assigned       *prometheus.GaugeVec
	commitFailures *prometheus.CounterVec
	commitsPutOff  *prometheus.CounterVec

	changelogRecords *prometheus.CounterVec
	changelogBytes   *prometheus.CounterVec
	stateWrites      *prometheus.CounterVec
	restoreRecords   *prometheus.CounterVec
	restoreSeconds   *prometheus.GaugeVec
	restoreRemaining *prometheus.GaugeVec
	standbys         *prometheus.GaugeVec
	transactions     *prometheus.CounterVec

	// repartitioning (docs/SEMANTICS.md, Repartitioning)
	repartitioned     *prometheus.CounterVec
	markers           *prometheus.CounterVec
	upstreamWatermark *prometheus.GaugeVec
	markerLag         *prometheus.GaugeVec
	duplicates        *prometheus.CounterVec
	splitKeys         *prometheus.CounterVec

	// progress records and watermark alignment (docs/SEMANTICS.md)
	finalThrough  *prometheus.GaugeVec
	progress      *prometheus.CounterVec
	paused        *prometheus.GaugeVec
	pausedSeconds *prometheus.CounterVec

	// schema registry (docs/SEMANTICS.md, Input formats)
	registryWaiting *prometheus.GaugeVec

	// the retention guard (docs/OPERATIONS.md, Topic retention)
	pastRetention *prometheus.CounterVec

	// the query API (docs/OPERATIONS.md, Querying windows)
	queries      *prometheus.CounterVec
	queryLatency *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	pp := []string{"pipeline", "partition"}
	p := []string{"pipeline"}
	m := &metrics{
		recordsIn:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "windowd_records_in_total", Help: "Input records consumed."}, pp),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "windowd_dead_letters_total", Help: "Input records that could not be decoded, sent to the dead-letter topic."}, pp),
		filtered:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "windowd_filtered_total", Help: "Input records the pipeline's filter rejected (not events, not dead letters)."}, pp),
		lateDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "windowd_late_dropped_total", Help: "Records dropped because every window they belong to had expired."}, pp),
		panes:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "windowd_panes_total", Help: "Panes emitted (retractions not included), by timing."}, []string{"pipeline", "timing"}),
		watermark:   prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "windowd_partition_watermark_ms", Help: "Watermark of each assigned partition, Unix ms (NaN before its first watermark)."}, pp),
		idle:        prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "windowd_partition_idle", Help: "1 when the partition is idle and left out of the frontier."}, pp),
		holds:       prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "windowd_partition_holds_frontier", Help: "1 when the partition's watermark is the one holding the frontier back."}, pp),
		lag:         prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "windowd_partition_lag_records", Help: "Records between the consumer position and the partition's high watermark."}, pp),
		frontier:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "windowd_frontier_ms", Help: "Event-time frontier of the pipeline, Unix ms (NaN before the first)."}, p),
		frontierLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "windowd_frontier_lag_seconds", Help: "Wall clock minus the frontier, in seconds."}, p),
		openWindows: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "windowd_open_windows", Help: "Windows holding state."}, p),
		cacheBytes:  prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "windowd_cache_bytes", Help: "Estimated bytes of window state in the in-memory cache, held against state.cache_bytes."}, p),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "windowd_cache_evictions_total",
			Help: "Times the window cache passed state.cache_bytes and was flushed and emptied (its keys are then read back from Pebble)."}, p),
		quietAdvances: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "windowd_quiet_advances_total",
			Help: "Frontier steps made by the quiet advance: every partition idle, the frontier moving with processing time (watermark.quiet_advance)."}, p),
		discarded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "windowd_discarded_records_total",
			Help: "Records of transaction windows that a record discarded (window.discard_when): they were in no pane that stands."}, p),
		stateBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "windowd_state_bytes", Help: "On-disk size of the pipeline's Pebble state."}, p),
		commitLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "windowd_commit_latency_seconds", Help: "Duration of a commit cycle (flush output, sync state, commit offsets).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}, p),
		ready:          prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "windowd_pipeline_ready", Help: "1 when the pipeline has its assignment and commits succeed."}, p),
		assigned:       prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "windowd_assigned_partitions", Help: "Input partitions assigned to this instance."}, p),
		commitFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "windowd_commit_failures_total", Help: "Commit cycles that failed (the cycle is retried; offsets are not committed)."}, p),
		commitsPutOff: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "windowd_commit_cycles_put_off_total",
			Help: "Commit cycles put off past commit_interval (up to commit_interval_max) because the pipeline was behind its input: more input waiting in Kafka than the cycle had processed, or a draining backlog's tail longer than commit_interval of work."}, p),
		changelogRecords: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "windowd_changelog_records_total", Help: "Records written to the changelog topic (changed keys and partition markers)."}, p),
		changelogBytes:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "windowd_changelog_bytes_total", Help: "Key and value bytes of the changelog's key records."}, p),
		stateWrites:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "windowd_state_writes_total", Help: "Window state writes to the local store (changelog key records / this is the coalescing ratio)."}, p),
		restoreRecords:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "windowd_restore_records_total", Help: "Changelog records applied when a partition was assigned."}, pp),
		restoreSeconds:   prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "windowd_restore_seconds", Help: "Duration of the partition's last restore from the changelog."}, pp),
		standbys: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "windowd_standby_partitions",
			Help: "Partitions of which this instance keeps a standby replica (state.standby_replicas)."}, p),
		restoreRemaining: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "windowd_restore_remaining_records",
			Help: "Changelog offsets a restore under way still has to read (the partition is absent when it is not restoring)."}, pp),
		transactions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "windowd_transactions_total",
			Help: "exactly_once commit cycles by result: committed, or aborted (a rebalance; state rolled back)."}, []string{"pipeline", "result"}),
		repartitioned: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "windowd_repartitioned_records_total",
			Help: "Stage 1: input records written to the repartition topic, by input (upstream) partition."}, []string{"pipeline", "upstream"}),
		markers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "windowd_repartition_markers_total",
			Help: "Stage 1: watermark marker records written (one per repartition partition per broadcast)."}, p),
		upstreamWatermark: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "windowd_upstream_watermark_ms",
			Help: "Stage 2: watermark of the last marker of each upstream (input) partition seen, Unix ms (NaN before its first watermark)."}, []string{"pipeline", "upstream"}),
		markerLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "windowd_marker_lag_ms",
			Help: "Stage 2: wall clock minus the time the last marker of each upstream partition was written, ms."}, []string{"pipeline", "upstream"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "windowd_repartition_duplicates_total",
			Help: "Stage 2: repartitioned records dropped because their upstream offset was processed already (stage 1 wrote them again after a restart)."}, p),
		splitKeys: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "windowd_split_keys_total",
			Help: "Records whose key was last seen on another input partition (a key from the value, or a key moved to a partition added to the input): without repartition: true its windows are split."}, p),
		pastRetention: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "windowd_records_past_retention_total",
			Help: "Records written with a timestamp the topic's settings do not keep: older than retention.ms (the broker may delete them at its next retention check) or than message.timestamp.before.max.ms (the broker refuses them)."},
			[]string{"pipeline", "topic", "setting"}),
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "windowd_queries_total",
			Help: "Requests to /api/windows by kind (point, scan) and outcome (ok, forwarded, standby, bad_request, unavailable, error)."},
			[]string{"pipeline", "kind", "outcome"}),
		queryLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "windowd_query_seconds", Help: "Duration of a request to /api/windows, forwarding included.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}, []string{"pipeline", "kind"}),
		finalThrough: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "windowd_final_through_ms",
			Help: "Event time through which every final pane is written: the last progress record's final_through (frontier minus allowed_lateness), Unix ms."}, p),
		progress: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "windowd_progress_records_total",
			Help: "Progress records written to the output topic (one per output partition per interval)."}, p),
		paused: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "windowd_partition_paused",
			Help: "1 while the partition is paused by watermark alignment (its watermark is more than max_drift ahead of the frontier)."}, pp),
		pausedSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "windowd_partition_paused_seconds_total",
			Help: "Time the partition spent paused by watermark alignment."}, pp),
		registryWaiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "windowd_schema_registry_waiting_partitions",
			Help: "Input partitions paused because the schema registry could not be asked for their next record's schema (stage: pipeline or repartition)."}, []string{"pipeline", "stage"}),
	}
	reg.MustRegister(m.finalThrough, m.progress, m.paused, m.pausedSeconds, m.registryWaiting, m.pastRetention, m.queries, m.queryLatency)
	reg.MustRegister(m.repartitioned, m.markers, m.upstreamWatermark, m.markerLag, m.duplicates, m.splitKeys)
	reg.MustRegister(m.recordsIn, m.deadLetters, m.filtered, m.lateDropped, m.panes, m.watermark, m.idle, m.holds, m.lag,
		m.frontier, m.frontierLag, m.openWindows, m.cacheBytes, m.evictions, m.quietAdvances, m.discarded, m.stateBytes, m.commitLatency, m.ready, m.assigned, m.commitFailures, m.commitsPutOff,
		m.changelogRecords, m.changelogBytes, m.stateWrites, m.restoreRecords, m.restoreSeconds, m.restoreRemaining, m.standbys, m.transactions)
	return m
}

func msGauge(v int64) float64 {
	if v == watermark.MinTime || v == watermark.MaxTime {
		return math.NaN()
	}
	return float64(v)
}

// countEngineStatsLocked adds the engine's cache evictions, quiet
// advances and discarded records not counted yet to their metrics.
func (p *pipeline) countEngineStatsLocked() {
	st := p.mu.eng.Stats()
	p.m.evictions.WithLabelValues(p.cfg.Name).Add(float64(st.Evictions - p.mu.counted.Evictions))
	p.m.quietAdvances.WithLabelValues(p.cfg.Name).Add(float64(st.QuietAdvances - p.mu.counted.QuietAdvances))
	p.m.discarded.WithLabelValues(p.cfg.Name).Add(float64(st.Discarded - p.mu.counted.Discarded))
	p.mu.counted = st
}

// updateMetricsLocked refreshes the gauges.
func (p *pipeline) updateMetricsLocked() {
	name := p.cfg.Name
	f := p.mu.eng.Frontier()
	p.m.frontier.WithLabelValues(name).Set(msGauge(f))
	if f == watermark.MinTime || f == watermark.MaxTime {
		p.m.frontierLag.WithLabelValues(name).Set(math.NaN())
	} else {
		p.m.frontierLag.WithLabelValues(name).Set(float64(p.nowMS()-f) / 1000)
	}
	p.m.openWindows.WithLabelValues(name).Set(float64(p.mu.eng.OpenWindows()))
	p.m.cacheBytes.WithLabelValues(name).Set(float64(p.mu.eng.CacheBytes()))
	p.countEngineStatsLocked()
	p.m.assigned.WithLabelValues(name).Set(float64(len(p.mu.parts)))
	ok, _ := p.ready()
	p.m.ready.WithLabelValues(name).Set(b2f(ok))
	status := p.mu.eng.Watermarks().Status()
	minActive := watermark.MaxTime
	for _, s := range status {
		if s.Assigned && !s.Idle && s.Watermark < minActive {
			minActive = s.Watermark
		}
	}
	for _, s := range status {
		st := p.mu.parts[s.Partition]
		if st == nil || !s.Assigned {
			continue
		}
		label := p.in.label(s.Partition)
		p.m.watermark.WithLabelValues(name, label).Set(msGauge(s.Watermark))
		p.m.idle.WithLabelValues(name, label).Set(b2f(s.Idle))
		p.m.holds.WithLabelValues(name, label).Set(b2f(!s.Idle && s.Watermark == minActive && f < watermark.MaxTime))
		if c := st.consumed(); st.end >= 0 && c >= 0 {
			p.m.lag.WithLabelValues(name, label).Set(float64(max(0, st.end-c)))
		}
	}
	p.publishStatusLocked(status, minActive)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
