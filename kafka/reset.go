package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
)

// ResetTo is where a reset pipeline starts reading its input.
type ResetTo struct {
	Earliest, Latest bool
	At               int64 // Unix ms; used when > 0
	// neither: the group's committed offsets stay
}

// ParseResetTo reads committed, earliest, latest or an RFC 3339 time.
func ParseResetTo(s string) (ResetTo, error) {
	switch s {
	case "committed":
		return ResetTo{}, nil
	case "earliest":
		return ResetTo{Earliest: true}, nil
	case "latest":
		return ResetTo{Latest: true}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return ResetTo{}, fmt.Errorf("--to %q: want committed, earliest, latest or an RFC 3339 time", s)
	}
	return ResetTo{At: t.UnixMilli()}, nil
}

// ResetPipeline makes pipeline p start on fresh state (docs/OPERATIONS.md,
// Changing a deployed pipeline): with no member in its group it deletes the
// changelog (and a repartitioned pipeline's internal topic and stage 2's
// group), sets the group's input offsets as to says, and creates the
// changelog again, empty. Instances find their local state logged to the
// deleted changelog and discard it at their next start.
func ResetPipeline(ctx context.Context, cfg *config.Config, brokers []string, p *config.Pipeline, to ResetTo, log *zap.Logger) error {
	opts, err := ClientOpts(cfg, brokers, log)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	groups := []string{p.Input.Group}
	topics := []string{ChangelogTopic(p)}
	if p.Repartition != nil {
		groups = append(groups, RepartitionTopic(p))
		topics = append(topics, RepartitionTopic(p))
	}
	described, err := adm.DescribeGroups(ctx, groups...)
	if err != nil {
		return fmt.Errorf("describe group %s: %w", p.Input.Group, err)
	}
	for _, g := range described.Sorted() {
		if g.Err != nil && !errors.Is(g.Err, kerr.GroupIDNotFound) {
			return fmt.Errorf("describe group %s: %w", g.Group, g.Err)
		}
		if len(g.Members) > 0 {
			return fmt.Errorf("group %s has %d members: stop every instance of pipeline %s before a reset", g.Group, len(g.Members), p.Name)
		}
	}
	details, err := adm.ListTopics(ctx, p.Input.Topic)
	if err != nil {
		return err
	}
	in, ok := details[p.Input.Topic]
	if !ok || in.Err != nil {
		return fmt.Errorf("input topic %s: %v", p.Input.Topic, in.Err)
	}
	partitions := int32(len(in.Partitions))

	resp, err := adm.DeleteTopics(ctx, topics...)
	if err != nil {
		return err
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("delete topic %s: %w", r.Topic, r.Err)
		}
		log.Info("deleted topic", zap.String("topic", r.Topic))
	}
	if p.Repartition != nil {
		if _, err := adm.DeleteGroup(ctx, RepartitionTopic(p)); err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
			return fmt.Errorf("delete stage 2's group %s: %w", RepartitionTopic(p), err)
		}
	}

	if to.Earliest || to.Latest || to.At > 0 {
		// Every input's offsets: a pipeline of several inputs that
		// started one of them over and resumed another would window
		// the second's records without the first's.
		inputs := p.InputTopics()
		var listed kadm.ListedOffsets
		switch {
		case to.Earliest:
			listed, err = adm.ListStartOffsets(ctx, inputs...)
		case to.Latest:
			listed, err = adm.ListEndOffsets(ctx, inputs...)
		default:
			listed, err = adm.ListOffsetsAfterMilli(ctx, to.At, inputs...)
		}
		if err == nil {
			err = listed.Error()
		}
		if err != nil {
			return fmt.Errorf("list offsets of %s: %w", strings.Join(inputs, ", "), err)
		}
		committed, err := adm.CommitOffsets(ctx, p.Input.Group, listed.Offsets())
		if err == nil {
			err = committed.Error()
		}
		if err != nil {
			return fmt.Errorf("set the offsets of group %s: %w", p.Input.Group, err)
		}
		log.Info("set the group's offsets", zap.String("group", p.Input.Group), zap.Any("offsets", listed.Offsets()))
	}

	// The changelog again, empty: a topic being deleted exists for a
	// while (TOPIC_ALREADY_EXISTS).
	n := partitions
	if p.Repartition != nil {
		n = RepartitionPartitions(p, partitions)
	}
	changelog := ChangelogTopic(p)
	for deadline := time.Now().Add(2 * time.Minute); ; {
		created, err := adm.CreateTopic(ctx, n, -1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, changelog)
		if err == nil {
			err = created.Err
		}
		if err == nil {
			log.Info("created the changelog again, empty", zap.String("topic", changelog), zap.Int32("partitions", n))
			return WaitLeaders(ctx, cl, changelog, n)
		}
		if !errors.Is(err, kerr.TopicAlreadyExists) || time.Now().After(deadline) {
			return fmt.Errorf("create topic %s: %w", changelog, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
