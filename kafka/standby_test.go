package kafka

import (
	"fmt"
	"slices"
	"testing"
)

func TestStandbysOf(t *testing.T) {
	three := map[string][]int32{"a": {0, 1}, "b": {2, 3}, "c": {5, 4}}
	for _, c := range []struct {
		assignment map[string][]int32
		member     string
		replicas   int
		want       []int32
	}{
		{three, "a", 0, nil},
		// a's partitions 0 and 1 spread over b and c; b's over c and a; c's over a and b.
		{three, "a", 1, []int32{3, 4}},
		{three, "b", 1, []int32{0, 5}},
		{three, "c", 1, []int32{1, 2}},
		// two replicas on three members: every other member keeps each partition.
		{three, "a", 2, []int32{2, 3, 4, 5}},
		{three, "a", 5, []int32{2, 3, 4, 5}},
		{map[string][]int32{"a": {0, 1, 2, 3}}, "a", 1, nil},
		{map[string][]int32{"a": {0, 1}, "b": {2, 3}}, "b", 1, []int32{0, 1}},
		{map[string][]int32{"a": {0, 1}, "b": {}}, "b", 1, []int32{0, 1}},
		{map[string][]int32{"a": {0, 1}, "b": {2, 3}}, "x", 1, nil},
	} {
		if got := StandbysOf(c.assignment, c.member, c.replicas); !slices.Equal(got, c.want) {
			t.Errorf("StandbysOf(%v, %s, %d) = %v, want %v", c.assignment, c.member, c.replicas, got, c.want)
		}
	}
	// Every partition has min(replicas, members-1) standbys, none on its owner.
	for members := 1; members <= 5; members++ {
		for replicas := 1; replicas <= 3; replicas++ {
			asg := map[string][]int32{}
			owner := map[int32]string{}
			for p := int32(0); p < 12; p++ {
				m := fmt.Sprintf("m%d", int(p)%members)
				asg[m] = append(asg[m], p)
				owner[p] = m
			}
			count := map[int32]int{}
			for m := range asg {
				for _, p := range StandbysOf(asg, m, replicas) {
					if owner[p] == m {
						t.Fatalf("%d members, %d replicas: %s keeps a standby of its own partition %d", members, replicas, m, p)
					}
					count[p]++
				}
			}
			for p := int32(0); p < 12; p++ {
				if want := min(replicas, members-1); count[p] != want {
					t.Fatalf("%d members, %d replicas: partition %d has %d standbys, want %d", members, replicas, p, count[p], want)
				}
			}
		}
	}
}
