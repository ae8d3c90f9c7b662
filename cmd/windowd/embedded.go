package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
)

// The quickstart path: `kafka.brokers: embedded` runs an in-process broker
// (franz-go's kfake) next to the service, and a demo generator feeds it.

// startEmbedded starts the in-process broker with every input topic.
func startEmbedded(cfg *config.Config) (*kfake.Cluster, error) {
	_, portStr, err := net.SplitHostPort(cfg.Kafka.EmbeddedListen)
	if err != nil {
		return nil, fmt.Errorf("kafka.embedded_listen: %w", err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("kafka.embedded_listen: %w", err)
	}
	opts := []kfake.Opt{kfake.Ports(port), kfake.AllowAutoTopicCreation()}
	for _, p := range cfg.Pipelines {
		opts = append(opts, kfake.SeedTopics(p.Input.Partitions, p.Input.Topic))
		for _, in := range p.Inputs[min(1, len(p.Inputs)):] { // the first is Input
			opts = append(opts, kfake.SeedTopics(in.Partitions, in.Topic))
		}
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded broker on %s: %w", cfg.Kafka.EmbeddedListen, err)
	}
	return c, nil
}

// startQuickstart starts what cfg's quickstart needs beside the service:
// the embedded broker (kafka.brokers: embedded) and the demo generator
// (generator:), which runs until ctx is done. It returns the brokers the
// service connects to (nil: kafka.brokers) and a function that stops both.
func startQuickstart(ctx context.Context, cfg *config.Config, log *zap.Logger) (brokers []string, stop func(), err error) {
	brokers = cfg.Kafka.Brokers
	var cluster *kfake.Cluster
	if cfg.Kafka.Embedded {
		if cluster, err = startEmbedded(cfg); err != nil {
			return nil, nil, err
		}
		brokers = cluster.ListenAddrs()
		log.Info("embedded broker started", zap.Strings("listen", brokers))
	}
	genCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if cfg.Generator == nil {
			return
		}
		if err := runGenerator(genCtx, cfg, brokers, log.Named("generator"), time.Now); err != nil && genCtx.Err() == nil {
			log.Error("generator stopped", zap.Error(err))
		}
	}()
	return brokers, func() {
		cancel()
		<-done
		if cluster != nil {
			cluster.Close()
		}
	}, nil
}
