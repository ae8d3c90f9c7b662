package kafka

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
)

// PartitionsSeenWithin bounds how long partitions added to a topic stay
// unseen by a group member (franz-go's metadata refresh interval).
const PartitionsSeenWithin = 10 * time.Second

// groupRetryMargin is how much longer than the session timeout a group
// request is retried while its coordinator is unreachable (GroupOpts).
const groupRetryMargin = 20 * time.Second

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
		LoggerOpt(log),
		kgo.WithCompressor(comp),
	}
	opts = append(opts, FailoverOpts()...)
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

// LoggerOpt logs franz-go's lines through log (named "kgo"); appended to
// ClientOpts' options it replaces their logger.
func LoggerOpt(log *zap.Logger) kgo.Opt { return kgo.WithLogger(kgoLogger{log.Named("kgo")}) }

// FailoverOpts make a client find a moved partition leader or coordinator
// within about a second of the cluster naming it, instead of franz-go's
// defaults (metadata refreshed at most every 5 s, retries backing off to 5 s,
// 20 tries): when a broker dies, its partitions and coordinators move only
// once the controller has fenced it (broker.session.timeout.ms, 9 s by
// default), and a client that backs off for seconds more stalls the
// pipeline for that much longer (docs/OPERATIONS.md, Broker failures).
// Retries stay bounded by franz-go's per-request retry timeout (30 s;
// the group's requests: GroupOpts). The broker-failure tests' stall meter
// uses them too, so that its own lag is not counted as a stall.
func FailoverOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.MetadataMinAge(time.Second),
		kgo.RetryBackoffFn(func(tries int) time.Duration {
			return min(100*time.Millisecond<<min(tries, 4), time.Second)
		}),
		kgo.RequestRetries(100),
	}
}

// kgoLogger adapts zap to franz-go's logger: warnings and errors, and with
// --log-level debug also franz-go's info lines (as debug: every group and
// transaction step, which coordinator a request went to, why a
// transaction did not commit).
type kgoLogger struct{ l *zap.Logger }

func (k kgoLogger) Level() kgo.LogLevel {
	if k.l.Core().Enabled(zap.DebugLevel) {
		return kgo.LogLevelInfo
	}
	return kgo.LogLevelWarn
}

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

// FetchPartitionBytes is how much a group member's fetch asks of each
// partition (franz-go's default is 1 MiB). A fetch is about a poll's
// records, and the client holds up to two (the one the loop works on, the
// next one buffered): at 1 MiB a 4-partition member kept about 30 MiB more
// of fetched batches and decoded records live, which every collection
// marks; at 512 KiB a fetch still holds about 13,000 records of 160 bytes,
// milliseconds of work for the loop (256 KiB measured the same). A
// producer's batch larger than this is still fetched whole when it comes
// first in a fetch, later in the fetch after (docs/PERFORMANCE.md, Tuning
// knobs).
const FetchPartitionBytes = 512 << 10

// GroupOpts are the client options of a consumer-group member of group on
// topic: read_committed from the log start, offsets committed by the
// caller, cooperative-sticky rebalances.
func GroupOpts(base []kgo.Opt, session time.Duration, group string, topics ...string) []kgo.Opt {
	return append(append([]kgo.Opt(nil), base...),
		// A heartbeat, join or sync that finds its coordinator dead is
		// retried until the cluster has moved the coordinator and well
		// past it (franz-go's default gives up after the session timeout,
		// shorter than the controller's 9 s to fence a dead broker): the
		// new coordinator loads the group with every member's session
		// restarted, so the member keeps its partitions and state
		// instead of losing them and rejoining.
		kgo.RetryTimeoutFn(func(key int16) time.Duration {
			switch key {
			case (*kmsg.JoinGroupRequest)(nil).Key(), (*kmsg.SyncGroupRequest)(nil).Key(), (*kmsg.HeartbeatRequest)(nil).Key():
				return session + groupRetryMargin
			}
			return 30 * time.Second
		}),
		// Partitions added to the input (kafka-topics --alter) are seen
		// within this: the group leader then rebalances them in.
		kgo.MetadataMaxAge(PartitionsSeenWithin),
		kgo.ConsumerGroup(group),
		kgo.SessionTimeout(session),
		kgo.HeartbeatInterval(min(3*time.Second, session/3)),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// A transaction's commit or abort marker takes an offset: kept, the
		// position passes it and reaches the high watermark (caught up).
		kgo.KeepControlRecords(),
		kgo.DisableAutoCommit(),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.FetchMaxPartitionBytes(FetchPartitionBytes),
	)
}
