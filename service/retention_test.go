package service

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/sink"
)

// A record older than its topic keeps is counted, by topic and setting,
// and warned about before it is written: once, then at most once a minute,
// naming the topic, the setting and what to do. A record stamped when
// produced (emit_time: no timestamp yet) and a topic without limits pass.
func TestRetentionGuard(t *testing.T) {
	cl := fakeCluster(t)()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	for topic, retention := range map[string]string{"out": "3600000", "dlq": "-1"} {
		resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{sink.SettingRetention: kadm.StringPtr(retention)}, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	cfg := &config.Config{Pipelines: []config.Pipeline{{Name: "p", OutputTopic: "out", DeadLetterTopic: "dlq"}}}
	core, logs := observer.New(zap.WarnLevel)
	m := newMetrics(prometheus.NewRegistry())
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	g := newRetentionGuard(cfg, m, zap.New(core), clock)
	g.read(ctx, adm)

	out, dlq := g.topic("p", "out"), g.topic("p", "dlq")
	old := &kgo.Record{Topic: "out", Timestamp: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)}
	recent := &kgo.Record{Topic: "out", Timestamp: now.Add(-59 * time.Minute)}
	past := func() float64 {
		return testutil.ToFloat64(m.pastRetention.WithLabelValues("p", "out", sink.SettingRetention))
	}
	out.check(recent, clock, g.log)
	out.check(&kgo.Record{Topic: "out"}, clock, g.log) // emit_time
	dlq.check(&kgo.Record{Topic: "dlq", Timestamp: old.Timestamp}, clock, g.log)
	if past() != 0 || logs.Len() != 0 {
		t.Fatalf("records the topics keep: counted %v, warnings %v", past(), logs.All())
	}
	out.check(old, clock, g.log)
	out.check(old, clock, g.log)
	now = now.Add(59 * time.Second)
	out.check(old, clock, g.log)
	if past() != 3 || logs.Len() != 1 {
		t.Fatalf("three records past retention.ms within a minute: counted %v, %d warnings", past(), logs.Len())
	}
	w := logs.All()[0].ContextMap()
	if w["topic"] != "out" || w["setting"] != "retention.ms=3600000" || !strings.Contains(w["fix"].(string), "emit_time") {
		t.Fatalf("warning %q %v", logs.All()[0].Message, w)
	}
	now = now.Add(time.Second)
	out.check(old, clock, g.log)
	if past() != 4 || logs.Len() != 2 {
		t.Fatalf("a minute after the first warning: counted %v, %d warnings", past(), logs.Len())
	}
	if g.topic("p", "elsewhere") != nil || g.topic("q", "out") != nil {
		t.Fatal("the guard knows topics the pipelines do not write")
	}
	var none *guardedTopic
	none.check(old, clock, g.log) // an unknown topic checks nothing
}
