package service

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
)

// TestRunRefusesInputs: run reads one input topic per pipeline; a pipeline
// with several (inputs, which replay runs) is refused before anything
// starts, with the reason.
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
	if err == nil || !strings.Contains(err.Error(), "pipeline ctr: inputs (several input topics) replay with windowd replay; windowd run reads one input topic per pipeline") {
		t.Fatalf("got %v", err)
	}
}
