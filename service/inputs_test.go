package service

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/repartition"
	"github.com/windowd/windowd/schema"
)

// Several inputs in different formats: each input's decoder reads its own
// format, and only those of avro and protobuf inputs ask the registry.
func TestDecodersWithSchemas(t *testing.T) {
	cfg, err := config.Parse("c.yaml", []byte(`kafka: {brokers: ["127.0.0.1:1"]}
schema_registry: {url: "http://127.0.0.1:1"}
pipelines:
  - name: ctr
    timestamp: {field: ts}
    inputs: [{topic: views}, {topic: clicks, format: avro}, {topic: buys, format: protobuf}]
    window: {type: tumbling, size: 1m}
    aggregates: [{name: n, op: count}]
    output: {topic: out}
`))
	if err != nil {
		t.Fatal(err)
	}
	p := &cfg.Pipelines[0]
	if !p.BinaryInput() {
		t.Fatal("BinaryInput() = false for inputs in avro and protobuf")
	}
	reg, err := schema.New(schema.Options{URL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	ds := newDecoders(p)
	if !ds.withSchemas(p, reg, true) {
		t.Fatal("withSchemas reports no binary input")
	}
	var binary []bool
	for _, d := range ds.each {
		binary = append(binary, d.Binary())
	}
	if want := []bool{false, true, true}; !slices.Equal(binary, want) {
		t.Fatalf("binary decoders %v, want %v", binary, want)
	}
	p.Inputs[1].Format, p.Inputs[2].Format = config.JSON, config.JSON
	if p.BinaryInput() || newDecoders(p).withSchemas(p, reg, false) {
		t.Fatal("inputs in json only ask the registry")
	}
}

// The registry's wait names partitions as the frontier does and pauses the
// consumer's own: a co-partitioned follower's partition of its topic, and
// stage 1's upstream partition of its input.
func TestRegistryWaitInputs(t *testing.T) {
	for _, c := range []struct {
		name   string
		topics partitionMap
		part   int32
	}{
		{"co-partitioned follower", inputTopics{topics: []string{"views", "clicks"}}, coStride + 1},
		{"stage 1", layoutTopics{topics: []string{"views", "clicks"}, layout: repartition.NewLayout([]int32{2, 2})}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.ConsumeTopics("views", "clicks"))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			w := newRegistryWait(c.topics, zap.NewNop(), prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"}))
			w.cl = cl
			now := time.Unix(1_000, 0)
			w.hold(c.part, &kgo.Record{Topic: "views", Partition: c.part, Offset: 7},
				&schema.Unavailable{Err: errors.New("503"), Retry: now.Add(time.Second)}, now)
			if got := cl.PauseFetchPartitions(nil); !maps.EqualFunc(got, map[string][]int32{"clicks": {1}}, slices.Equal) {
				t.Fatalf("paused %v, want clicks partition 1", got)
			}
			if !w.waiting(c.part) {
				t.Fatalf("partition %d not waiting", c.part)
			}
			w.step(now.Add(2*time.Second), nil)
			if got := cl.PauseFetchPartitions(nil); len(got) > 0 || w.waiting(c.part) {
				t.Fatalf("after the retry time: paused %v, waiting %v", got, w.waiting(c.part))
			}
		})
	}
}
