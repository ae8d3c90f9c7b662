package kafka

import (
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestBalanceWarm(t *testing.T) {
	for _, c := range []struct {
		name    string
		members []string
		owned   map[string][]int32
		warm    map[string]map[int32]int64
		n       int32
		want    map[string][]int32
	}{
		{"fresh group", []string{"b", "a"}, nil, nil, 5,
			map[string][]int32{"a": {0, 2, 4}, "b": {1, 3}}},
		{"owners keep their partitions", []string{"a", "b"}, map[string][]int32{"a": {3, 2}, "b": {0, 1}}, nil, 4,
			map[string][]int32{"a": {2, 3}, "b": {0, 1}}},
		// a died: its partitions 4 and 5 go to the members keeping their
		// standbys (c has 4, b has 5), not by member order.
		{"failover to the standbys", []string{"b", "c"},
			map[string][]int32{"b": {0, 1}, "c": {2, 3}},
			map[string]map[int32]int64{"b": {0: 9, 1: 9, 5: 100}, "c": {2: 9, 3: 9, 4: 80}}, 6,
			map[string][]int32{"b": {0, 1, 5}, "c": {2, 3, 4}}},
		// the warmest holder wins over another warm one
		{"highest position wins", []string{"b", "c"}, map[string][]int32{"b": {0}, "c": {1}},
			map[string]map[int32]int64{"b": {2: 10}, "c": {2: 50}}, 4,
			map[string][]int32{"b": {0, 3}, "c": {1, 2}}},
		// a new member takes from the owner over its quota what it has
		// warm (its standby of 3) rather than what it has not
		{"scale out takes the warm one", []string{"a", "b"}, map[string][]int32{"a": {0, 1, 2, 3}},
			map[string]map[int32]int64{"b": {3: 40}, "a": {0: 1, 1: 1, 2: 1, 3: 1}}, 4,
			map[string][]int32{"a": {0, 1}, "b": {2, 3}}},
		{"claims out of range and twice", []string{"a", "b"}, map[string][]int32{"a": {7, 0}, "b": {0, -1}}, nil, 2,
			map[string][]int32{"a": {0}, "b": {1}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := balanceWarm(c.members, c.owned, c.warm, c.n)
			if !maps.EqualFunc(got, c.want, slices.Equal[[]int32]) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

// TestBalanceWarmInvariants: whatever the members own and hold warm, every
// partition is assigned once, counts differ by at most one, and a member
// keeps all it owns when that is within its share.
func TestBalanceWarmInvariants(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for i := 0; i < 2000; i++ {
		n := int32(rng.Intn(12))
		members := make([]string, 1+rng.Intn(5))
		owned := map[string][]int32{}
		warm := map[string]map[int32]int64{}
		for j := range members {
			m := fmt.Sprintf("m%d", j)
			members[j] = m
			warm[m] = map[int32]int64{}
			for p := int32(0); p < n; p++ {
				if rng.Intn(3) == 0 {
					owned[m] = append(owned[m], p)
				}
				if rng.Intn(3) == 0 {
					warm[m][p] = rng.Int63n(100)
				}
			}
		}
		got := balanceWarm(members, owned, warm, n)
		seen := map[int32]int{}
		lo, hi := 1<<30, 0
		for _, m := range members {
			for _, p := range got[m] {
				seen[p]++
			}
			lo, hi = min(lo, len(got[m])), max(hi, len(got[m]))
		}
		for p := int32(0); p < n; p++ {
			if seen[p] != 1 {
				t.Fatalf("case %d: partition %d assigned %d times: %v", i, p, seen[p], got)
			}
		}
		if hi-lo > 1 || len(seen) != int(n) {
			t.Fatalf("case %d: uneven or extra partitions: %v", i, got)
		}
	}
}

// TestWarmBalancerPlan runs the balancer as franz-go does, from join
// metadata: the positions travel in the user data, owned partitions in the
// cooperative field, and a partition moving between live members is held
// back for the cooperative second round.
func TestWarmBalancerPlan(t *testing.T) {
	join := func(id string, owned []int32, warm map[int32]int64) kmsg.JoinGroupResponseMember {
		b := WarmBalancer([]string{"in"}, func() map[int32]int64 { return warm }, "")
		m := kmsg.NewJoinGroupResponseMember()
		m.MemberID = id
		m.ProtocolMetadata = b.JoinGroupMetadata([]string{"in"}, map[string][]int32{"in": owned}, 3)
		return m
	}
	members := []kmsg.JoinGroupResponseMember{
		join("b", []int32{0, 1}, map[int32]int64{0: 5, 1: 5, 5: 90}),
		join("c", []int32{2, 3}, map[int32]int64{2: 5, 3: 5, 4: 70}),
	}
	gb := WarmBalancer([]string{"in"}, func() map[int32]int64 { return nil }, "")
	mb, topics, err := gb.MemberBalancer(members)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := topics["in"]; !ok || len(topics) != 1 {
		t.Fatalf("topics %v", topics)
	}
	plan, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"in": 6})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]int32{}
	for _, a := range plan.IntoSyncAssignment() {
		parsed, err := gb.ParseSyncAssignment(a.MemberAssignment)
		if err != nil {
			t.Fatal(err)
		}
		got[a.MemberID] = parsed["in"]
	}
	want := map[string][]int32{"b": {0, 1, 5}, "c": {2, 3, 4}}
	if !maps.EqualFunc(got, want, slices.Equal[[]int32]) {
		t.Fatalf("plan %v, want %v", got, want)
	}
	// b joins while a owns everything: 2 and 3 move to b, so the first
	// round takes them from a and gives b nothing yet.
	members = []kmsg.JoinGroupResponseMember{
		join("a", []int32{0, 1, 2, 3}, map[int32]int64{0: 5, 1: 5, 2: 5, 3: 5}),
		join("b", nil, map[int32]int64{3: 40}),
	}
	if mb, _, err = gb.MemberBalancer(members); err != nil {
		t.Fatal(err)
	}
	if plan, err = mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"in": 4}); err != nil {
		t.Fatal(err)
	}
	got = map[string][]int32{}
	for _, a := range plan.IntoSyncAssignment() {
		parsed, _ := gb.ParseSyncAssignment(a.MemberAssignment)
		got[a.MemberID] = parsed["in"]
	}
	if !slices.Equal(got["a"], []int32{0, 1}) || len(got["b"]) != 0 {
		t.Fatalf("first cooperative round %v, want a [0 1] and b nothing", got)
	}
	if w, a := decodeWarm(encodeWarm(map[int32]int64{3: 7, 1: -1}, "10.0.0.7:9100")); !maps.Equal(w, map[int32]int64{1: -1, 3: 7}) || a != "10.0.0.7:9100" {
		t.Fatalf("round trip %v %q", w, a)
	}
	// Version 1 (before the address) still reads.
	if w, a := decodeWarm([]byte{1, 1, 6, 14}); !maps.Equal(w, map[int32]int64{3: 7}) || a != "" {
		t.Fatalf("version 1: %v %q", w, a)
	}
	if w, _ := decodeWarm([]byte{9, 1, 2}); w != nil {
		t.Fatal("foreign user data read as warm positions")
	}
	if w, _ := decodeWarm(nil); w != nil {
		t.Fatal("no user data read as warm positions")
	}
}

// TestWarmBalancerCoPartitioned: a topic listed after the first with as
// many partitions gets the first's plan, partition for partition, also in
// a cooperative round that moves some; other topics are balanced alone,
// and a member that does not consume the co-partitioned topic leaves its
// partitions of it to no one.
func TestWarmBalancerCoPartitioned(t *testing.T) {
	co := []string{"imp", "click", "few"}
	join := func(id string, topics []string, owned map[string][]int32, warm map[int32]int64) kmsg.JoinGroupResponseMember {
		m := kmsg.NewJoinGroupResponseMember()
		m.MemberID = id
		m.ProtocolMetadata = WarmBalancer(co, func() map[int32]int64 { return warm }, "").JoinGroupMetadata(topics, owned, 3)
		return m
	}
	counts := map[string]int32{"imp": 6, "click": 6, "few": 2, "other": 6}
	balance := func(members ...kmsg.JoinGroupResponseMember) map[string]map[string][]int32 {
		t.Helper()
		gb := WarmBalancer(co, func() map[int32]int64 { return nil }, "")
		mb, _, err := gb.MemberBalancer(members)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(counts)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]map[string][]int32{}
		for _, a := range plan.IntoSyncAssignment() {
			if got[a.MemberID], err = gb.ParseSyncAssignment(a.MemberAssignment); err != nil {
				t.Fatal(err)
			}
		}
		return got
	}
	all := []string{"click", "few", "imp", "other"}
	// A fresh group where b holds imp's 0 warm: balanced alone, click
	// would go a 0, 2, 4 and b 1, 3, 5.
	got := balance(join("a", all, nil, nil), join("b", all, nil, map[int32]int64{0: 90}))
	if !slices.Equal(got["b"]["imp"], []int32{0, 3, 5}) || !slices.Equal(got["b"]["click"], []int32{0, 3, 5}) || !slices.Equal(got["a"]["click"], []int32{1, 2, 4}) {
		t.Fatalf("fresh group %v, want b imp and click 0, 3, 5, a both 1, 2, 4", got)
	}
	// c joins a and b, and holds imp's 5 warm: it takes 5 of both.
	own := func(p ...int32) map[string][]int32 {
		return map[string][]int32{"imp": p, "click": p, "other": p, "few": p[:1]}
	}
	got = balance(
		join("a", all, own(0, 1, 2), map[int32]int64{0: 1, 1: 1, 2: 1}),
		join("b", all, own(3, 4, 5), map[int32]int64{3: 1, 4: 1, 5: 1}),
		join("c", all, nil, map[int32]int64{5: 90}))
	for id, topics := range got {
		if !slices.Equal(topics["imp"], topics["click"]) {
			t.Errorf("member %s: imp %v, click %v; want the same partitions", id, topics["imp"], topics["click"])
		}
	}
	// The first cooperative round only takes away: c gets nothing yet,
	// and b gives up 5 of both topics.
	if len(got["c"]["imp"]) != 0 || !slices.Equal(got["b"]["imp"], []int32{3, 4}) {
		t.Fatalf("first round %v, want b keeping imp 3 and 4, c nothing", got)
	}
	// The second round: c owns nothing, b and a are at their quota.
	got = balance(
		join("a", all, own(0, 1), map[int32]int64{0: 1, 1: 1}),
		join("b", all, own(3, 4), map[int32]int64{3: 1, 4: 1}),
		join("c", all, nil, map[int32]int64{5: 90}))
	want := map[string][]int32{"a": {0, 1}, "b": {3, 4}, "c": {2, 5}}
	for id, parts := range want {
		if !slices.Equal(got[id]["imp"], parts) || !slices.Equal(got[id]["click"], parts) {
			t.Errorf("member %s: imp %v, click %v; want %v of both", id, got[id]["imp"], got[id]["click"], parts)
		}
	}
	// few has another partition count: balanced alone, every partition once.
	var few []int32
	for _, topics := range got {
		few = append(few, topics["few"]...)
	}
	if slices.Sort(few); !slices.Equal(few, []int32{0, 1}) {
		t.Errorf("few assigned %v, want 0 and 1 once", few)
	}
	// d consumes imp only (a configuration without click): its imp
	// partitions' click partitions go to no one.
	got = balance(
		join("a", all, map[string][]int32{"imp": {0, 1, 2}, "click": {0, 1, 2}}, nil),
		join("d", []string{"imp"}, map[string][]int32{"imp": {3, 4, 5}}, nil))
	if !slices.Equal(got["d"]["imp"], []int32{3, 4, 5}) || len(got["d"]["click"]) != 0 || !slices.Equal(got["a"]["click"], []int32{0, 1, 2}) {
		t.Fatalf("plan %v, want d imp 3-5 and click 3-5 unassigned", got)
	}
}
