package service

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
)

// TestRunRefusesInputs: run reads several input topics through
// repartition: true; without it a pipeline with several is refused before
// anything starts, with the reason, a join too.
func TestRunRefusesInputs(t *testing.T) {
	cfg, err := config.Parse("c.yaml", []byte(`kafka: {brokers: ["127.0.0.1:1"]}
pipelines:
  - name: ctr
    inputs: [{topic: impressions}, {topic: clicks}]
    timestamp: {field: ts}
    window: {type: tumbling, size: 1m}
    aggregates: [{name: n, op: count}]
    output: {topic: out}
`))
	if err != nil {
		t.Fatal(err)
	}
	err = Run(context.Background(), cfg, Options{Log: zap.NewNop()})
	if err == nil || !strings.Contains(err.Error(), "pipeline ctr: windowd run reads several input topics through repartition: true in this version") {
		t.Fatalf("got %v", err)
	}
	join, err := config.Parse("c.yaml", []byte(`kafka: {brokers: ["127.0.0.1:1"]}
pipelines:
  - name: unpaid
    inputs: [{topic: orders}, {topic: payments}]
    key: {field: id}
    timestamp: {field: ts}
    join: {type: interval, left: orders, right: payments, between: [0s, 15m], kind: left}
    output: {topic: out}
`))
	if err != nil {
		t.Fatal(err)
	}
	err = Run(context.Background(), join, Options{Log: zap.NewNop()})
	if err == nil || !strings.Contains(err.Error(), "pipeline unpaid: windowd run reads several input topics through repartition: true in this version") {
		t.Fatalf("join: got %v", err)
	}
}
