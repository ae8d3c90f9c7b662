package evolve_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/evolve"
)

// inputsPipeline parses a pipeline over inputs, each "as:topic" keyed by
// user, with a count per input.
func inputsPipeline(t *testing.T, inputs ...string) *config.Pipeline {
	t.Helper()
	var b strings.Builder
	b.WriteString("pipelines:\n  - name: p\n    group: g\n    repartition: true\n    inputs:\n")
	for _, in := range inputs {
		as, topic, _ := strings.Cut(in, ":")
		fmt.Fprintf(&b, "      - {topic: %s, as: %s}\n", topic, as)
	}
	b.WriteString("    key: {field: user}\n    timestamp: {field: ts}\n    window: {type: tumbling, size: 10s}\n    aggregates:\n")
	for _, in := range inputs {
		as, _, _ := strings.Cut(in, ":")
		fmt.Fprintf(&b, "      - {name: n_%s, op: count, input: %s}\n", as, as)
	}
	b.WriteString("    output: {topic: out}\n")
	cfg, err := config.Parse("windowd.yaml", []byte(b.String()))
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	return &cfg.Pipelines[0]
}

// TestInputsAdded: inputs added after the last one of a pipeline of
// several are applied by rule (their aggregates are added ones); any other
// change of the inputs (one removed, reordered, another topic, one input
// becoming several) is refused: the repartition records and markers
// number the inputs by their place, and the state holds the topics'
// offsets.
func TestInputsAdded(t *testing.T) {
	two := inputsPipeline(t, "imp:impressions", "click:clicks")
	one := inputsPipeline(t, "imp:impressions", "x:x") // made a pipeline of one input below
	one.Inputs, one.AggregateInputs = nil, nil
	one.Input.Topic = "impressions"
	plan := evolve.Compare(evolve.Of(two, 0), evolve.Of(inputsPipeline(t, "imp:impressions", "click:clicks", "conv:conversions"), 0))
	if plan.Refused() || !strings.Contains(plan.Text(), "inputs: impressions, clicks → impressions, clicks, conversions") || !strings.Contains(plan.Text(), "n_conv") {
		t.Errorf("a third input: refused %v\n%s", plan.Refused(), plan.Text())
	}
	for _, c := range []struct {
		name string
		to   *config.Pipeline
	}{
		{"removed", one},
		{"removed and added", inputsPipeline(t, "imp:impressions", "conv:conversions")},
		{"reordered", inputsPipeline(t, "click:clicks", "imp:impressions")},
		{"added first", inputsPipeline(t, "conv:conversions", "imp:impressions", "click:clicks")},
		{"other topic", inputsPipeline(t, "imp:impressions", "click:clicks-v2")},
	} {
		if plan := evolve.Compare(evolve.Of(two, 0), evolve.Of(c.to, 0)); !plan.Refused() {
			t.Errorf("%s: applied\n%s", c.name, plan.Text())
		}
	}
	if plan := evolve.Compare(evolve.Of(one, 0), evolve.Of(two, 0)); !plan.Refused() {
		t.Errorf("one input becoming two: applied\n%s", plan.Text())
	}
}
