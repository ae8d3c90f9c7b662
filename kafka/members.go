package kafka

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// GroupMember is one member of a pipeline's consumer group as the group's
// description shows it: its query address (WarmBalancer) and its
// partitions of the pipeline's input topic.
type GroupMember struct {
	ID         string
	Address    string // "": it has none (an older windowd, or no query API)
	Partitions []int32
}

// GroupMembers describes group and returns its members, by id. The group
// must be stable: while it rebalances no assignment is final.
func GroupMembers(ctx context.Context, adm *kadm.Client, group, topic string) ([]GroupMember, error) {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	groups, err := adm.DescribeGroups(dctx, group)
	if err != nil {
		return nil, err
	}
	g, ok := groups[group]
	if !ok || g.Err != nil {
		return nil, fmt.Errorf("describing group %s: %v", group, g.Err)
	}
	if g.State != "Stable" {
		return nil, fmt.Errorf("group %s is %s", group, g.State)
	}
	out := make([]GroupMember, 0, len(g.Members))
	for _, m := range g.Members {
		gm := GroupMember{ID: m.MemberID}
		if meta, ok := m.Join.AsConsumer(); ok {
			_, gm.Address = decodeWarm(meta.UserData)
		}
		c, ok := m.Assigned.AsConsumer()
		if !ok {
			return nil, fmt.Errorf("group %s: member %s has no consumer assignment", group, m.MemberID)
		}
		gm.Partitions = []int32{}
		for _, t := range c.Topics {
			if t.Topic == topic {
				gm.Partitions = append(gm.Partitions, t.Partitions...)
			}
		}
		slices.Sort(gm.Partitions)
		out = append(out, gm)
	}
	slices.SortFunc(out, func(a, b GroupMember) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out, nil
}
