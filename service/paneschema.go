package service

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/schema"
	"github.com/windowd/windowd/sink"
	"github.com/windowd/windowd/windowing"
)

// registerPaneSchemas registers the pane schema of each pipeline with a
// binary output.format under its subject (docs/SEMANTICS.md, Output) and
// returns the ids by pipeline name. A registry that does not answer is
// asked again with a backoff until ctx ends; a schema it refuses
// (incompatible with the subject's earlier versions, or invalid) stops the
// start with the registry's message.
func registerPaneSchemas(ctx context.Context, cfg *config.Config, reg *schema.Registry, log *zap.Logger) (map[string]int, error) {
	ids := map[string]int{}
	for i := range cfg.Pipelines {
		p := &cfg.Pipelines[i]
		if p.OutputFormat == config.JSON {
			continue
		}
		s := paneSchema(p)
		for backoff := 250 * time.Millisecond; ; backoff = min(2*backoff, 10*time.Second) {
			id, err := reg.Register(ctx, p.OutputSubject, s)
			if err == nil {
				ids[p.Name] = id
				log.Info("pane schema registered", zap.String("pipeline", p.Name), zap.String("format", p.OutputFormat.String()),
					zap.String("subject", p.OutputSubject), zap.Int("id", id))
				break
			}
			if refused := (*schema.Refused)(nil); errors.As(err, &refused) {
				return nil, err
			}
			log.Warn("registering the pane schema: the schema registry does not answer (retrying)", zap.String("pipeline", p.Name),
				zap.String("subject", p.OutputSubject), zap.Error(err), zap.Duration("backoff", backoff))
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(backoff):
			}
		}
	}
	return ids, nil
}

// paneSchema is the registry schema of p's panes.
func paneSchema(p *config.Pipeline) sr.Schema {
	switch p.OutputFormat {
	case config.Avro:
		return sr.Schema{Type: sr.TypeAvro, Schema: sink.AvroSchema(p.Spec.Aggregates)}
	case config.Protobuf:
		return sr.Schema{Type: sr.TypeProtobuf, Schema: sink.ProtoSchema(p.Spec.Aggregates)}
	}
	return sr.Schema{Type: sr.TypeJSON, Schema: sink.JSONSchema(p.Spec.Aggregates)}
}

// newPaneEncoder is the encoder of p's pane values: the pane JSON, or the
// Confluent wire format of its binary output.format with schema id.
func newPaneEncoder(p *config.Pipeline, id int) sink.PaneEncoder {
	switch p.OutputFormat {
	case config.Avro:
		return sink.NewAvroPanes(p.Spec.Aggregates, sink.WirePrefix(id, false))
	case config.Protobuf:
		return sink.NewProtoPanes(p.Spec.Aggregates, sink.WirePrefix(id, true))
	case config.JSONSchema:
		return sink.NewJSONSchemaPanes(p.Spec.Aggregates, sink.WirePrefix(id, false))
	}
	return windowing.NewPaneJSON(p.Spec.Aggregates)
}
