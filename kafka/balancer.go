package kafka

import (
	"cmp"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/windowd/windowd/codec"
)

// WarmBalancerProtocol is the group protocol name of WarmBalancer.
const WarmBalancerProtocol = "windowd-warm-v1"

// WarmBalancer is a cooperative group balancer (docs/OPERATIONS.md, Standby
// replicas) that moves as few partitions as the even spread allows, like
// franz-go's cooperative-sticky, and gives a partition that has to move to
// the member that holds the most of its state: each member sends, in its
// join metadata, the changelog position its local state of each partition
// of topic has reached (warm: owned partitions, standby replicas, state
// left from before), and the leader prefers the highest. Members that do
// not know it (an older windowd during a rolling upgrade) make the group
// use cooperative-sticky, listed after it.
//
// Each member also sends the address its query API answers at (address:
// "" for none), which every instance reads from the group's description
// (GroupMembers) to forward a query to a key's owner.
//
// The warm positions are those of topics[0]. Every other topic of topics
// with as many partitions is co-partitioned with it: partition p goes to
// the member that gets partition p of topics[0] (when it consumes that
// topic; otherwise to no one until the next rebalance), so that records
// keyed alike in both meet in one member.
func WarmBalancer(topics []string, warm func() map[int32]int64, address string) kgo.GroupBalancer {
	return &warmBalancer{topics: topics, warm: warm, address: address}
}

type warmBalancer struct {
	topics  []string
	warm    func() map[int32]int64
	address string
}

func (*warmBalancer) ProtocolName() string { return WarmBalancerProtocol }
func (*warmBalancer) IsCooperative() bool  { return true }

func (w *warmBalancer) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = interests
	meta.Generation = generation
	for topic, parts := range current {
		owned := kmsg.NewConsumerMemberMetadataOwnedPartition()
		owned.Topic, owned.Partitions = topic, parts
		meta.OwnedPartitions = append(meta.OwnedPartitions, owned)
	}
	slices.SortFunc(meta.OwnedPartitions, func(a, b kmsg.ConsumerMemberMetadataOwnedPartition) int { return cmp.Compare(a.Topic, b.Topic) })
	meta.UserData = encodeWarm(w.warm(), w.address)
	return meta.AppendTo(nil)
}

func (*warmBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	return kgo.ParseConsumerSyncAssignment(assignment)
}

func (w *warmBalancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	b, err := kgo.NewConsumerBalancer(w, members)
	if err != nil {
		return nil, nil, err
	}
	return b, b.MemberTopics(), nil
}

// Balance plans every topic the members consume, topics[0] first: the
// warm positions count for it only, and the topics co-partitioned with it
// follow its plan.
func (w *warmBalancer) Balance(b *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	plan := b.NewPlan()
	lead := w.topics[0]
	order := slices.Sorted(maps.Keys(topics))
	if i := slices.Index(order, lead); i > 0 {
		order = append(append([]string{lead}, order[:i]...), order[i+1:]...)
	}
	var leadPlan map[string][]int32 // member id: its partitions of lead
	for _, topic := range order {
		n := topics[topic]
		var ids []string
		byID := map[string]*kmsg.JoinGroupResponseMember{}
		owned := map[string][]int32{}
		warm := map[string]map[int32]int64{}
		for i := range b.Members() {
			m, meta := b.MemberAt(i)
			if !slices.Contains(meta.Topics, topic) {
				continue
			}
			ids = append(ids, m.MemberID)
			byID[m.MemberID] = m
			for _, o := range meta.OwnedPartitions {
				if o.Topic == topic {
					owned[m.MemberID] = append(owned[m.MemberID], o.Partitions...)
				}
			}
			if topic == lead {
				warm[m.MemberID], _ = decodeWarm(meta.UserData)
			}
		}
		var assigned map[string][]int32
		if topic != lead && leadPlan != nil && n == topics[lead] && slices.Contains(w.topics, topic) {
			assigned = leadPlan // co-partitioned: partition p where lead's p goes
		} else {
			assigned = balanceWarm(ids, owned, warm, n)
		}
		if topic == lead {
			leadPlan = assigned
		}
		for id, parts := range assigned {
			if m := byID[id]; m != nil {
				plan.AddPartitions(m, topic, parts)
			}
		}
	}
	plan.AdjustCooperative(b)
	return plan
}

// balanceWarm assigns partitions 0..n-1 to members: every member gets n/M
// or n/M+1 of them (M members; n mod M get one more); a member keeps what
// it owns as far as that allows (a partition two members claim stays with
// the first in id order); every other partition goes to the member with
// room that has the highest warm position for it, then the fewest
// partitions, then the lowest id.
func balanceWarm(members []string, owned map[string][]int32, warm map[string]map[int32]int64, n int32) map[string][]int32 {
	members = slices.Clone(members)
	slices.Sort(members)
	out := make(map[string][]int32, len(members))
	if len(members) == 0 || n <= 0 {
		return out
	}
	lo, extra := int(n)/len(members), int(n)%len(members)
	atHi := 0 // members holding lo+1
	position := func(m string, p int32) int64 {
		if pos, ok := warm[m][p]; ok {
			return pos
		}
		return -1
	}
	// Another member's best position for p: how cheaply p can move off m.
	elsewhere := func(m string, p int32) int64 {
		best := int64(-1)
		for _, o := range members {
			if o != m {
				best = max(best, position(o, p))
			}
		}
		return best
	}
	taken := make([]bool, n)
	for _, m := range members {
		var keep []int32
		for _, p := range owned[m] {
			if p >= 0 && p < n && !taken[p] {
				taken[p] = true
				keep = append(keep, p)
			}
		}
		// Over the quota: give up first what another member has warmest.
		slices.SortStableFunc(keep, func(a, b int32) int { return cmp.Compare(elsewhere(m, a), elsewhere(m, b)) })
		limit := lo
		if atHi < extra {
			limit = lo + 1
		}
		if len(keep) > limit {
			for _, p := range keep[limit:] {
				taken[p] = false
			}
			keep = keep[:limit]
		}
		if len(keep) == lo+1 {
			atHi++
		}
		slices.Sort(keep)
		out[m] = keep
	}
	var free []int32
	for p := int32(0); p < n; p++ {
		if !taken[p] {
			free = append(free, p)
		}
	}
	// The partitions some member holds warmest go first: they choose
	// before the members with room are filled with others.
	best := func(p int32) int64 { return elsewhere("", p) }
	slices.SortStableFunc(free, func(a, b int32) int { return cmp.Compare(best(b), best(a)) })
	for _, p := range free {
		var to string
		for _, m := range members {
			c := len(out[m])
			if c > lo || (c == lo && atHi >= extra) {
				continue // full
			}
			if to == "" {
				to = m
				continue
			}
			pm, pt := position(m, p), position(to, p)
			if pm > pt || (pm == pt && c < len(out[to])) {
				to = m
			}
		}
		out[to] = append(out[to], p)
		if len(out[to]) == lo+1 {
			atHi++
		}
	}
	for _, m := range members {
		slices.Sort(out[m])
	}
	return out
}

// The join metadata's user data: a version byte, then the warm positions
// as (partition, changelog position) pairs; since version 2, then the
// member's query address. A version 1 reader takes a version 2 member's
// data for none (no warm state), as it does any other version's.
const (
	warmVersion1 = 1
	warmVersion  = 2
)

func encodeWarm(warm map[int32]int64, address string) []byte {
	parts := make([]int32, 0, len(warm))
	for p := range warm {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	w := codec.NewWriter(nil).Byte(warmVersion).Uvarint(uint64(len(parts)))
	for _, p := range parts {
		w.Varint(int64(p)).Varint(warm[p])
	}
	return w.String(address).Bytes()
}

// decodeWarm reads encodeWarm's bytes (or version 1's, without address);
// anything else (another version, a member of another balancer) is no
// warm state and no address.
func decodeWarm(b []byte) (map[int32]int64, string) {
	r := codec.NewReader(b, "warm positions")
	if len(b) == 0 {
		return nil, ""
	}
	v := r.Byte()
	if v != warmVersion1 && v != warmVersion {
		return nil, ""
	}
	out := map[int32]int64{}
	for i := r.Count(); i > 0; i-- {
		p, pos := r.Varint(), r.Varint()
		out[int32(p)] = pos
	}
	var address string
	if v == warmVersion {
		address = r.String()
	}
	if r.Done() != nil {
		return nil, ""
	}
	return out, address
}
