package service

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/kafka"
	"github.com/windowd/windowd/sink"
)

// The retention guard (docs/OPERATIONS.md, Topic retention): a pane's
// timestamp is its window's end, and a dead letter's or a late record's is
// the input's, so a backfill of old data writes records the broker deletes
// at its next retention check, or refuses. Before such a record is written
// the guard counts it (windowd_records_past_retention_total) and warns, at
// most once a minute per topic, naming the topic and the setting.
const (
	// guardRefresh is how often the topics' settings are read again: the
	// broker's default retention check interval.
	guardRefresh = 5 * time.Minute
	// guardWarnEvery spaces the warnings of one topic.
	guardWarnEvery = time.Minute
)

// retentionGuard holds a guardedTopic for each output, late and
// dead-letter topic of each pipeline. The map is built before the
// pipelines start and never changes; each topic's limits are written by
// watch's goroutine only and read by any.
type retentionGuard struct {
	log    *zap.Logger
	now    func() time.Time
	topics map[guardKey]*guardedTopic
}

type guardKey struct{ pipeline, topic string }

// guardedTopic is one topic a pipeline writes to.
type guardedTopic struct {
	pipeline, topic string
	hint            string // what the operator can do about it
	limits          atomic.Pointer[sink.TimeLimits]
	nextWarn        atomic.Int64 // Unix ms: no warning before
	past            map[string]prometheus.Counter
}

func newRetentionGuard(cfg *config.Config, m *metrics, log *zap.Logger, now func() time.Time) *retentionGuard {
	g := &retentionGuard{log: log, now: now, topics: map[guardKey]*guardedTopic{}}
	for i := range cfg.Pipelines {
		p := &cfg.Pipelines[i]
		for _, topic := range []string{p.OutputTopic, p.LateTopic, p.DeadLetterTopic} {
			k := guardKey{p.Name, topic}
			if topic == "" || g.topics[k] != nil {
				continue
			}
			hint := "raise the topic's retention.ms (-1: no time-based deletion) or message.timestamp.before.max.ms, or set message.timestamp.type=LogAppendTime"
			if topic == p.OutputTopic && p.OutputTimestamp == config.WindowEnd {
				hint = "set output.timestamp: emit_time (panes stamped when written), or " + hint
			}
			t := &guardedTopic{pipeline: p.Name, topic: topic, hint: hint, past: map[string]prometheus.Counter{}}
			for _, s := range []string{sink.SettingRetention, sink.SettingBeforeMax} {
				t.past[s] = m.pastRetention.WithLabelValues(p.Name, topic, s)
			}
			g.topics[k] = t
		}
	}
	return g
}

// topic is pipeline's guarded topic named topic; nil (which checks
// nothing) for a topic the guard does not know.
func (g *retentionGuard) topic(pipeline, topic string) *guardedTopic {
	if g == nil {
		return nil
	}
	return g.topics[guardKey{pipeline, topic}]
}

// read reads the settings of every guarded topic once; a topic the
// broker does not describe (or a broker that refuses DescribeConfigs)
// keeps what was read before, unread at first: nothing is checked then.
func (g *retentionGuard) read(ctx context.Context, adm *kadm.Client) {
	var names []string
	seen := map[string]bool{}
	for k := range g.topics {
		if !seen[k.topic] {
			seen[k.topic] = true
			names = append(names, k.topic)
		}
	}
	limits, err := kafka.TimeLimitsOf(ctx, adm, names...)
	if err != nil {
		if ctx.Err() == nil {
			g.log.Warn("cannot read the output, late and dead-letter topics' retention settings: records past them are not reported", zap.Error(err))
		}
		return
	}
	for _, t := range g.topics {
		l, ok := limits[t.topic]
		if !ok {
			continue
		}
		if old := t.limits.Load(); old == nil || *old != l {
			if l.Bounded() {
				g.log.Info("topic limits record timestamps", zap.String("pipeline", t.pipeline), zap.String("topic", t.topic),
					zap.Int64(sink.SettingRetention, l.Retention), zap.Int64(sink.SettingBeforeMax, l.BeforeMax))
			}
			t.limits.Store(&l)
		}
	}
}

// watch reads the settings every guardRefresh until ctx ends.
func (g *retentionGuard) watch(ctx context.Context, adm *kadm.Client) {
	tick := time.NewTicker(guardRefresh)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			g.read(ctx, adm)
		}
	}
}

// check counts r and warns when t's settings would lose it. A record
// without a timestamp is stamped when produced (output.timestamp:
// emit_time) and passes.
func (t *guardedTopic) check(r *kgo.Record, now func() time.Time, log *zap.Logger) {
	if t == nil || r.Timestamp.IsZero() {
		return
	}
	l := t.limits.Load()
	if l == nil || !l.Bounded() {
		return
	}
	ms := now().UnixMilli()
	setting := l.Past(r.Timestamp.UnixMilli(), ms)
	if setting == "" {
		return
	}
	t.past[setting].Inc()
	next := t.nextWarn.Load()
	if ms < next || !t.nextWarn.CompareAndSwap(next, ms+guardWarnEvery.Milliseconds()) {
		return
	}
	value, what := l.Retention, "the broker may delete it at its next retention check"
	if setting == sink.SettingBeforeMax {
		value, what = l.BeforeMax, "the broker refuses it (the produce fails)"
	}
	log.Warn("writing a record older than the topic keeps: "+what+"; such records are counted in windowd_records_past_retention_total, warned about once a minute",
		zap.String("pipeline", t.pipeline), zap.String("topic", t.topic), zap.String("setting", setting+"="+strconv.FormatInt(value, 10)),
		zap.Time("record_timestamp", r.Timestamp), zap.String("fix", t.hint))
}
