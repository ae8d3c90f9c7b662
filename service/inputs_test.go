package service

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
)

// TestRunRefusesInputs: run reads several input topics, co-partitioned or
// through repartition: true, in json only: a pipeline with an input in
// another format is refused before anything starts, with the reason, a
// join too.
func TestRunRefusesInputs(t *testing.T) {
	for _, c := range []struct{ name, pipeline string }{
		{"ctr", `
    inputs: [{topic: impressions, format: avro}, {topic: clicks}]
    window: {type: tumbling, size: 1m}
    aggregates: [{name: n, op: count}]`},
		{"unpaid", `
    inputs: [{topic: orders}, {topic: payments, format: protobuf}]
    key: {field: id}
    repartition: true
    join: {type: interval, left: orders, right: payments, between: [0s, 15m], kind: left}`},
	} {
		cfg, err := config.Parse("c.yaml", []byte(`kafka: {brokers: ["127.0.0.1:1"]}
schema_registry: {url: "http://127.0.0.1:1"}
pipelines:
  - name: `+c.name+`
    timestamp: {field: ts}`+c.pipeline+`
    output: {topic: out}
`))
		if err != nil {
			t.Fatal(err)
		}
		err = Run(context.Background(), cfg, Options{Log: zap.NewNop()})
		if err == nil || !strings.Contains(err.Error(), "pipeline "+c.name+": input ") || !strings.Contains(err.Error(), ": several input topics are read as json in this version") {
			t.Fatalf("%s: got %v", c.name, err)
		}
	}
}
