package kafka

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
)

// PartitionsSeenWithin bounds how long partitions added to a topic stay
// unseen by a group member (franz-go's metadata refresh interval).
const PartitionsSeenWithin = 10 * time.Second

// ClientOpts are the connection options every Kafka client of windowd
// shares (consumers, producers, admin, generator): brokers, client id,
// logging, the codec of produced batches (kafka.compression), and the
// cluster's security settings (kafka.tls, kafka.sasl). It fails when the
// TLS files cannot be loaded.
func ClientOpts(c *config.Config, brokers []string, log *zap.Logger) ([]kgo.Opt, error) {
	comp, err := Compressor(c.Kafka.Compression)
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ClientID(c.Kafka.ClientID),
		kgo.WithLogger(kgoLogger{log.Named("kgo")}),
		kgo.WithCompressor(comp),
	}
	if c.Kafka.TLS != nil {
		tc, err := tlsConfig(c.Kafka.TLS)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if c.Kafka.SASL != nil {
		m, err := saslMechanism(c.Kafka.SASL)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// kgoLogger adapts zap to franz-go's logger (warnings and errors only).
type kgoLogger struct{ l *zap.Logger }

func (k kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	fields := make([]zap.Field, 0, len(keyvals)/2)
	for i := 0; i+1 < len(keyvals); i += 2 {
		fields = append(fields, zap.Any(fmt.Sprint(keyvals[i]), keyvals[i+1]))
	}
	switch level {
	case kgo.LogLevelError:
		k.l.Error(msg, fields...)
	case kgo.LogLevelWarn:
		k.l.Warn(msg, fields...)
	default:
		k.l.Debug(msg, fields...)
	}
}

// GroupOpts are the client options of a consumer-group member of group on
// topic: read_committed from the log start, offsets committed by the
// caller, cooperative-sticky rebalances.
func GroupOpts(base []kgo.Opt, c *config.Config, group, topic string) []kgo.Opt {
	session := time.Duration(c.Kafka.SessionTimeout) * time.Millisecond
	return append(append([]kgo.Opt(nil), base...),
		// Partitions added to the input (kafka-topics --alter) are seen
		// within this: the group leader then rebalances them in.
		kgo.MetadataMaxAge(PartitionsSeenWithin),
		kgo.ConsumerGroup(group),
		kgo.SessionTimeout(session),
		kgo.HeartbeatInterval(min(3*time.Second, session/3)),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DisableAutoCommit(),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
	)
}
