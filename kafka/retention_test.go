package kafka

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/sink"
)

// The output, late and dead-letter topics windowd creates keep records
// whatever their timestamps (a backfill writes last year's event times),
// except an output topic of panes stamped when written (emit_time), which
// keeps the broker's retention; TimeLimitsOf reads what the broker says.
func TestCreatedTopicsKeepOldRecords(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const yaml = `kafka: {brokers: ["x:9092"]}
pipelines:
  - name: ev
    input: {topic: in}
    timestamp: {field: ts}
    window: {type: tumbling, size: 1m}
    aggregates: [{name: n, op: count}]
    output: {topic: ev-out}
    late_topic: ev-late
  - name: em
    input: {topic: in}
    timestamp: {field: ts}
    window: {type: tumbling, size: 1m}
    aggregates: [{name: n, op: count}]
    output: {topic: em-out, timestamp: emit_time}
`
	cfg, err := config.Parse("c.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	opts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := EnsureTopics(ctx, cfg, opts, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		sink.SettingRetention: kadm.StringPtr("3600000"), sink.SettingTimeType: kadm.StringPtr("LogAppendTime"),
		sink.SettingBeforeMax: kadm.StringPtr("86400000")}, "theirs")
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	got, err := TimeLimitsOf(ctx, adm, "ev-out", "ev-late", "ev-dlq", "em-dlq", "em-out", "theirs")
	if err != nil {
		t.Fatal(err)
	}
	kept := sink.TimeLimits{Retention: -1, BeforeMax: math.MaxInt64}
	for _, topic := range []string{"ev-out", "ev-late", "ev-dlq", "em-dlq"} {
		if got[topic] != kept {
			t.Errorf("%s (created by windowd): %+v, want %+v", topic, got[topic], kept)
		}
	}
	if l := got["em-out"]; l.Retention < 0 {
		t.Errorf("em-out (emit_time panes): %+v, want the broker's default retention", l)
	}
	if want := (sink.TimeLimits{Retention: 3600000, BeforeMax: 86400000, LogAppendTime: true}); got["theirs"] != want {
		t.Errorf("theirs: %+v, want %+v", got["theirs"], want)
	}
}
