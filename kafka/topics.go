package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/sink"
)

// EnsureTopics waits for every input topic and creates missing output,
// dead-letter and late topics with the input's partition count, and the
// changelog (and a repartitioned pipeline's internal topic) with as many
// partitions as the pipeline's windowing stage consumes. It returns each
// pipeline's input partition count and its changelog's topic id. It is the
// first connection to the cluster: a broker that cannot be reached or a
// missing input topic is retried, but credentials, a certificate or
// permissions that the cluster refuses stop it at once (SecurityError).
func EnsureTopics(ctx context.Context, cfg *config.Config, opts []kgo.Opt, log *zap.Logger) (map[string]Topics, error) {
	inputs := map[string]Topics{}
	if t := cfg.Kafka.TLS; t != nil && t.InsecureSkipVerify {
		log.Warn("kafka.tls.insecure_skip_verify is true: the broker certificate is not verified")
	}
	if s := cfg.Kafka.SASL; s != nil && s.Mechanism == config.SASLPlain && cfg.Kafka.TLS == nil {
		log.Warn("kafka.sasl: PLAIN without kafka.tls sends the password in clear text")
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, p := range cfg.Pipelines {
		var counts []int32
		for _, topic := range p.InputTopics() {
			n, err := waitInput(ctx, adm, cfg, &p, topic, log)
			if err != nil {
				return nil, err
			}
			counts = append(counts, n)
		}
		if err := CoPartitioned(&p, counts); err != nil {
			return nil, err
		}
		partitions := counts[0]
		changelog := ChangelogTopic(&p)
		internal, stateParts := "", partitions
		if p.Repartition != nil {
			internal = RepartitionTopic(&p)
			var err error
			if stateParts, err = repartitionCount(ctx, adm, &p, partitions, log); err != nil {
				return nil, err
			}
		}
		var logged int32
		for _, topic := range []string{p.OutputTopic, p.DeadLetterTopic, p.LateTopic, changelog, internal} {
			if topic == "" {
				continue
			}
			if topic == changelog {
				if err := stateOrNoOffsets(ctx, adm, &p, changelog, log); err != nil {
					if serr := SecurityError(&cfg.Kafka, err, "group "+p.Input.Group+" offsets"); serr != nil {
						return nil, serr
					}
					return nil, err
				}
			}
			var configs map[string]*string
			n := partitions
			switch topic {
			case changelog:
				configs, n = map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, stateParts
			case internal:
				// No time-based deletion: stage 2 deletes what it has processed.
				configs, n = map[string]*string{sink.SettingRetention: kadm.StringPtr("-1")}, stateParts
			default:
				configs = createdTopicConfigs(&p, topic)
			}
			tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			resp, err := adm.CreateTopic(tctx, n, -1, configs, topic)
			cancel()
			if err == nil {
				err = resp.Err
			}
			switch {
			case err == nil:
				log.Info("created topic", zap.String("pipeline", p.Name), zap.String("topic", topic), zap.Int32("partitions", n))
				// A topic just created is not served at once (the more so
				// on a busy broker): producing to it before every
				// partition has a leader can fail with
				// UNKNOWN_TOPIC_OR_PARTITION past franz-go's retries.
				if err := WaitLeaders(ctx, cl, topic, n); err != nil {
					return nil, err
				}
			case errors.Is(err, kerr.TopicAlreadyExists):
				switch topic {
				case changelog:
					// The input grew while windowd was down (or before
					// it ever ran): partition p's state needs changelog
					// partition p.
					had, err := GrowTopic(ctx, adm, cl, topic, n, log.With(zap.String("pipeline", p.Name)))
					if err != nil {
						return nil, err
					}
					if logged, err = loggedPartitions(ctx, adm, topic, had); err != nil {
						return nil, err
					}
				}
			default:
				if serr := SecurityError(&cfg.Kafka, err, "create topic "+topic); serr != nil {
					return nil, serr
				}
				return nil, fmt.Errorf("create topic %s: %w", topic, err)
			}
		}
		id, err := TopicID(ctx, adm, changelog)
		if err != nil {
			return nil, err
		}
		inputs[p.Name] = Topics{Partitions: partitions, InputPartitions: counts, Repartition: stateParts, ChangelogID: id, Logged: logged}
	}
	return inputs, nil
}

// CoPartitioned refuses a pipeline that reads several input topics
// without repartition: true when their partition counts (counts, in the
// order of its inputs) differ: partition p of each must hold the same keys
// (docs/SEMANTICS.md, Several inputs).
func CoPartitioned(p *config.Pipeline, counts []int32) error {
	if p.Inputs == nil || p.Repartition != nil {
		return nil
	}
	for i := 1; i < len(counts); i++ {
		if counts[i] != counts[0] {
			var have []string
			for j, in := range p.Inputs {
				have = append(have, fmt.Sprintf("%s has %d", in.Topic, counts[j]))
			}
			return fmt.Errorf("pipeline %s: its input topics have different partition counts (%s): read without repartition: true, partition p of every input must hold the same keys; give the topics one partition count (and key their records alike), or set repartition: true (docs/SEMANTICS.md, Several inputs)",
				p.Name, strings.Join(have, ", "))
		}
	}
	return nil
}

// loggedPartitions returns had, topic's partition count before it grew,
// when one of those partitions has an end offset above zero, else 0. A
// topic another instance created a moment ago, or a partition without a
// leader yet, is asked again (for up to 30 s).
func loggedPartitions(ctx context.Context, adm *kadm.Client, topic string, had int32) (int32, error) {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		tctx, tcancel := context.WithTimeout(lctx, 10*time.Second)
		ends, err := adm.ListEndOffsets(tctx, topic)
		tcancel()
		if err == nil {
			var seen int32
			held := false
			ends.Each(func(o kadm.ListedOffset) {
				switch {
				case o.Partition >= had:
				case o.Err != nil:
					err = o.Err
				default:
					seen++
					held = held || o.Offset > 0
				}
			})
			switch {
			case err == nil && seen == had && held:
				return had, nil
			case err == nil && seen == had:
				return 0, nil
			case err == nil:
				err = kerr.UnknownTopicOrPartition // not every partition listed yet
			}
		}
		if !errors.Is(err, kerr.UnknownTopicOrPartition) && !errors.Is(err, kerr.LeaderNotAvailable) && !errors.Is(err, kerr.NotLeaderForPartition) {
			return 0, fmt.Errorf("topic %s: end offsets: %w", topic, err)
		}
		select {
		case <-lctx.Done():
			return 0, fmt.Errorf("topic %s: end offsets: %w", topic, err)
		case <-time.After(backoff):
		}
	}
}

// waitInput waits for input topic topic of p to exist and returns its
// partition count.
func waitInput(ctx context.Context, adm *kadm.Client, cfg *config.Config, p *config.Pipeline, topic string, log *zap.Logger) (int32, error) {
	for backoff := 250 * time.Millisecond; ; backoff = min(2*backoff, 10*time.Second) {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		details, err := adm.ListTopics(tctx, topic)
		cancel()
		if err == nil {
			d, ok := details[topic]
			if ok && d.Err == nil && len(d.Partitions) > 0 {
				return int32(len(d.Partitions)), nil
			}
			err = fmt.Errorf("topic %s does not exist", topic)
			if ok && d.Err != nil && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
				err = d.Err
			}
		}
		if serr := SecurityError(&cfg.Kafka, err, "input topic "+topic); serr != nil {
			return 0, serr
		}
		log.Warn("waiting for input topic (retrying)", zap.String("pipeline", p.Name), zap.String("topic", topic), zap.Error(err), zap.Duration("backoff", backoff))
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(backoff):
		}
	}
}

// createdTopicConfigs are the settings of an output, late or dead-letter
// topic windowd creates: no time-based deletion where records carry event
// times or the input's timestamps, which may be older than any retention
// (a backfill of last year's data). Panes stamped with their emission time
// (output.timestamp: emit_time) keep the broker's default retention, which
// then counts from when they were written (docs/OPERATIONS.md, Topic
// retention).
func createdTopicConfigs(p *config.Pipeline, topic string) map[string]*string {
	if topic == p.OutputTopic && p.OutputTimestamp == config.EmitTime && topic != p.LateTopic && topic != p.DeadLetterTopic {
		return nil
	}
	return map[string]*string{sink.SettingRetention: kadm.StringPtr("-1")}
}

// Topics is what EnsureTopics found of a pipeline's topics.
type Topics struct {
	Partitions int32 // of the input topic (with several: the first)
	// InputPartitions: of each input topic, in config.Pipeline.Inputs'
	// order (one input: Partitions).
	InputPartitions []int32
	// Repartition: the repartition topic's partition count (repartitioned
	// pipelines), which the state is keyed by.
	Repartition int32
	ChangelogID [16]byte // the changelog's topic id: local state of another id was logged to a changelog since deleted
	// Logged: the changelog's partition count at the start, before it
	// grew with the input, when it held records (state of an earlier run,
	// which a start without local state restores); 0 when it held none.
	Logged int32
}

// existingPartitions is topic's partition count, or 0 when it does not exist.
func existingPartitions(ctx context.Context, adm *kadm.Client, topic string) (int32, error) {
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	details, err := adm.ListTopics(tctx, topic)
	if err != nil {
		return 0, fmt.Errorf("topic %s: %w", topic, err)
	}
	d, ok := details[topic]
	if !ok || d.Err != nil {
		return 0, nil
	}
	return int32(len(d.Partitions)), nil
}

// repartitionCount is the partition count of p's repartition topic, which
// the state is keyed by: repartition_partitions, else the input's count
// (partitions) when the topic is made, and the count it has once it
// exists, whatever the input grew to since. An existing topic of another
// count than repartition_partitions is refused (stage 1 would write keys
// where stage 2's state does not expect them).
func repartitionCount(ctx context.Context, adm *kadm.Client, p *config.Pipeline, partitions int32, log *zap.Logger) (int32, error) {
	topic, want := RepartitionTopic(p), RepartitionPartitions(p, partitions)
	have, err := existingPartitions(ctx, adm, topic)
	switch {
	case err != nil:
		return 0, err
	case have == 0 || have == want:
		return want, nil
	case p.Repartition.Partitions > 0:
		return 0, fmt.Errorf("repartition topic %s has %d partitions, the pipeline needs %d: set repartition_partitions: %d, or delete the topic (and the changelog) to start over",
			topic, have, want, have)
	}
	log.Info("the input's partition count changed; the repartition topic keeps its count, which the state is keyed by (repartition_partitions sets it)",
		zap.String("pipeline", p.Name), zap.String("topic", topic), zap.Int32("partitions", have), zap.Int32("input_partitions", partitions))
	return have, nil
}

// GrowTopic makes topic have at least need partitions; it returns the
// count topic had.
func GrowTopic(ctx context.Context, adm *kadm.Client, cl *kgo.Client, topic string, need int32, log *zap.Logger) (had int32, err error) {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var have int32
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		// A topic another instance created a moment ago may not be in
		// every broker's metadata yet.
		RefreshTopicMetadata(lctx, cl, topic)
		var tds kadm.TopicDetails
		tds, err = adm.ListTopics(lctx, topic)
		if err == nil {
			if td, ok := tds[topic]; !ok {
				err = kerr.UnknownTopicOrPartition
			} else if err = td.Err; err == nil {
				have = int32(len(td.Partitions))
				break
			}
		}
		if !errors.Is(err, kerr.UnknownTopicOrPartition) && !errors.Is(err, kerr.LeaderNotAvailable) {
			return 0, fmt.Errorf("topic %s: %w", topic, err)
		}
		select {
		case <-lctx.Done():
			return 0, fmt.Errorf("topic %s: %w", topic, err)
		case <-time.After(backoff):
		}
	}
	if have >= need {
		return have, nil
	}
	resp, err := adm.CreatePartitions(lctx, int(need-have), topic)
	if err == nil {
		if r, ok := resp[topic]; ok && r.Err != nil && !errors.Is(r.Err, kerr.InvalidPartitions) {
			err = r.Err
		}
	}
	if err != nil {
		return 0, fmt.Errorf("adding %d partitions to %s (the input grew to %d): %w", need-have, topic, need, err)
	}
	log.Info("input grew: added partitions to match", zap.String("topic", topic), zap.Int32("from", have), zap.Int32("to", need))
	RefreshTopicMetadata(lctx, cl, topic)
	return have, nil
}

// ProducerSees waits until cl's producer knows partition need-1 of topic
// (a producer that has written to a topic keeps its partition count until
// its next metadata refresh, and refuses a record for a partition beyond it).
func ProducerSees(ctx context.Context, cl *kgo.Client, topic string, need int32) error {
	if leader, _, _ := cl.PartitionLeader(topic, 0); leader < 0 {
		return nil // not loaded yet: its first record loads it whole
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if leader, _, _ := cl.PartitionLeader(topic, need-1); leader >= 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("topic %s: partition %d not in the producer's metadata after 30s", topic, need-1)
		}
		cl.ForceMetadataRefresh()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// RefreshTopicMetadata asks the broker for topic's metadata, so that
// cl's next offset listing sees its partitions. franz-go shards listings by
// metadata it keeps for MetadataMinAge (5 s), "unknown topic" answers
// included: a topic created moments ago, listed before the broker had
// applied its creation, stays unknown to cl that long, and kadm's Metadata
// answers from that cache too. A metadata request issued through cl
// replaces the cached entry. Errors show in the next listing.
func RefreshTopicMetadata(ctx context.Context, cl *kgo.Client, topic string) {
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, _ = topicMetadata(mctx, cl, topic)
}

// ChangelogTopic names the pipeline's changelog: <group>-<pipeline>-changelog.
func ChangelogTopic(p *config.Pipeline) string { return p.ChangelogTopic() }

// RepartitionTopic names the internal topic, which is also the name of
// stage 2's consumer group: <group>-<pipeline>-repartition.
func RepartitionTopic(p *config.Pipeline) string { return p.RepartitionTopic() }

// RepartitionPartitions is the internal topic's partition count.
func RepartitionPartitions(p *config.Pipeline, inputs int32) int32 {
	if p.Repartition.Partitions > 0 {
		return p.Repartition.Partitions
	}
	return inputs
}

// WaitLeaders waits until topic has partitions partitions, each with a
// leader, or ctx ends. It asks the broker each time (topicMetadata): kadm's
// listings answer from franz-go's metadata cache, which kept a topic's
// state from just before or just after its creation (unknown, or without
// leaders) for MetadataMinAge, and so held every topic windowd created for
// about 1.5 s of backoff before its first answer with leaders.
func WaitLeaders(ctx context.Context, cl *kgo.Client, topic string, partitions int32) error {
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		t, err := topicMetadata(tctx, cl, topic)
		cancel()
		if err == nil && t.ErrorCode == 0 && int32(len(t.Partitions)) == partitions && allLed(t.Partitions) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s: waiting for its partitions' leaders: %w", topic, ctx.Err())
		case <-time.After(backoff):
		}
	}
}

func allLed(parts []kmsg.MetadataResponseTopicPartition) bool {
	for _, p := range parts {
		if p.ErrorCode != 0 || p.Leader < 0 {
			return false
		}
	}
	return true
}

// topicMetadata asks the broker for topic's metadata, past franz-go's
// cache; the answer also replaces the cache's entry for topic.
func topicMetadata(ctx context.Context, cl *kgo.Client, topic string) (kmsg.MetadataResponseTopic, error) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return kmsg.MetadataResponseTopic{}, err
	}
	for _, rt := range resp.Topics {
		if rt.Topic != nil && *rt.Topic == topic {
			return rt, nil
		}
	}
	return kmsg.MetadataResponseTopic{}, fmt.Errorf("topic %s: not in the metadata answer", topic)
}

// PartitionCounts returns the number of partitions of each topic, listed
// in one request.
func PartitionCounts(ctx context.Context, adm *kadm.Client, topics ...string) (map[string]int32, error) {
	details, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return nil, err
	}
	counts := make(map[string]int32, len(topics))
	for _, topic := range topics {
		d, ok := details[topic]
		switch {
		case !ok:
			return nil, fmt.Errorf("topic %s not listed", topic)
		case d.Err != nil:
			return nil, fmt.Errorf("topic %s: %w", topic, d.Err)
		}
		counts[topic] = int32(len(d.Partitions))
	}
	return counts, nil
}

// ErrOffsetsWithoutState: the group has committed offsets on the input but
// the pipeline has no changelog, as after a rename that kept the group.
var ErrOffsetsWithoutState = errors.New("offsets without state")

// stateOrNoOffsets refuses to start a pipeline whose changelog does not
// exist while its group has committed offsets on its input: the state of
// the windows open at those offsets is elsewhere (a pipeline renamed with
// its group kept: the changelog is named after the pipeline, so the new
// name has none), and starting would lose their records (docs/OPERATIONS.md,
// Changing a deployed pipeline). `windowd reset` creates the changelog:
// that is how an operator says the fresh start is meant. A broker that cannot answer yet is asked
// again.
func stateOrNoOffsets(ctx context.Context, adm *kadm.Client, p *config.Pipeline, changelog string, log *zap.Logger) error {
	var n int
	for backoff := 250 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		var err error
		if n, err = offsetsWithoutChangelog(ctx, adm, p, changelog); err == nil {
			break
		} else if errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.GroupAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) {
			return err
		} else {
			log.Warn("asking for the group's offsets and the changelog (retrying)", zap.String("pipeline", p.Name),
				zap.String("group", p.Input.Group), zap.Error(err), zap.Duration("backoff", backoff))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("pipeline %s: %w: group %s has committed offsets on %d partitions of %s, but the pipeline's changelog %s does not exist: "+
		"was the pipeline renamed with its group kept? The open windows' state is in the old pipeline's changelog, and starting at those offsets would lose their records. "+
		"Choices: (1) keep the old pipeline name; (2) start fresh on purpose: `windowd reset --config FILE --pipeline %s --to committed|earliest|latest|<RFC 3339 time>` "+
		"(docs/OPERATIONS.md, Changing a deployed pipeline)",
		p.Name, ErrOffsetsWithoutState, p.Input.Group, n, strings.Join(p.InputTopics(), ", "), changelog, p.Name)
}

// offsetsWithoutChangelog returns how many partitions of p's input the
// group has committed offsets for when p's changelog does not exist (0
// when it does).
func offsetsWithoutChangelog(ctx context.Context, adm *kadm.Client, p *config.Pipeline, changelog string) (int, error) {
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	details, err := adm.ListTopics(tctx, changelog)
	if err != nil {
		return 0, err
	}
	if d, ok := details[changelog]; ok && d.Err == nil {
		return 0, nil
	} else if ok && d.Err != nil && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return 0, d.Err
	}
	offs, err := adm.FetchOffsets(tctx, p.Input.Group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return 0, nil // no group yet (kfake says so; Kafka answers no offsets)
	}
	if err != nil {
		return 0, err
	}
	n := 0
	offs.Each(func(o kadm.OffsetResponse) {
		if slices.Contains(p.InputTopics(), o.Topic) && o.Err == nil && o.At >= 0 {
			n++
		}
	})
	return n, nil
}
