package service

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr/srfake"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/schema"
	"github.com/windowd/windowd/windowing"
)

func paneSchemaConfig(t *testing.T, url string) (*config.Config, *schema.Registry) {
	t.Helper()
	cfg := &config.Config{Pipelines: []config.Pipeline{
		{Name: "j", OutputTopic: "j-out"},
		{Name: "a", OutputTopic: "a-out", OutputFormat: config.Avro, OutputSubject: "a-out-value",
			Spec: windowing.Spec{Aggregates: []windowing.AggSpec{{Name: "n", Op: windowing.Count}}}},
	}}
	reg, err := schema.New(schema.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, reg
}

// The pane schema of a binary output is registered under its subject
// (once: a second start gets the same id); JSON pipelines register none.
func TestRegisterPaneSchemas(t *testing.T) {
	fake := srfake.New()
	defer fake.Close()
	cfg, reg := paneSchemaConfig(t, fake.URL())
	ids, err := registerPaneSchemas(context.Background(), cfg, reg, zap.NewNop())
	if err != nil || len(ids) != 1 || ids["a"] == 0 {
		t.Fatalf("ids %v, %v", ids, err)
	}
	again, err := registerPaneSchemas(context.Background(), cfg, reg, zap.NewNop())
	if err != nil || again["a"] != ids["a"] {
		t.Fatalf("registered again: %v (first %v), %v", again, ids, err)
	}
}

// A registry that refuses the schema (409: incompatible) stops the start
// with its message; one that does not answer is asked again, with a
// warning, until the start is cancelled.
func TestRegisterPaneSchemasRefusedOrDown(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"error_code":409,"message":"Schema being registered is incompatible with an earlier schema"}`))
	}))
	defer srv.Close()
	cfg, reg := paneSchemaConfig(t, srv.URL)
	_, err := registerPaneSchemas(context.Background(), cfg, reg, zap.NewNop())
	var refused *schema.Refused
	if !errors.As(err, &refused) || refused.Subject != "a-out-value" || !strings.Contains(err.Error(), "incompatible with an earlier schema") {
		t.Fatalf("refused schema: %v", err)
	}

	var calls atomic.Int32
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()
	cfg, reg = paneSchemaConfig(t, down.URL)
	core, logs := observer.New(zap.WarnLevel)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = registerPaneSchemas(ctx, cfg, reg, zap.New(core))
	if !errors.Is(err, context.DeadlineExceeded) || calls.Load() < 2 || logs.FilterMessageSnippet("does not answer").Len() < 2 {
		t.Fatalf("registry down: %v after %d requests, %d warnings", err, calls.Load(), logs.Len())
	}
}
