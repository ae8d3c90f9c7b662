package service

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
)

// clientOpts are the connection options every Kafka client of windowd
// shares (consumers, producers, admin, generator): brokers, client id,
// logging, and the cluster's security settings.
func clientOpts(c *config.Config, brokers []string, log *zap.Logger) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ClientID(c.Kafka.ClientID),
		kgo.WithLogger(kgoLogger{log.Named("kgo")}),
	}
}
