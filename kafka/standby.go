package kafka

import (
	"slices"
)

// StandbysOf returns the partitions whose standby replicas member keeps,
// given every member's assigned partitions (GroupAssignment) and the
// replicas per partition (state.standby_replicas; docs/OPERATIONS.md,
// Standby replicas). Every member computes the same placement from the
// group's record, so no member has to be told:
//
//   - members are ordered by id; the others of member i are the members
//     after it, cyclically (i+1, i+2, …);
//   - the j-th partition of member i (ascending) keeps its replica r
//     (r < replicas, at most one per other member) on other (j+r) mod
//     (members-1): one owner's partitions spread over the other members,
//     so that when it fails, each of them takes over what it has warm.
func StandbysOf(assignment map[string][]int32, member string, replicas int) []int32 {
	members := make([]string, 0, len(assignment))
	for m := range assignment {
		members = append(members, m)
	}
	slices.Sort(members)
	n := len(members)
	replicas = min(replicas, n-1)
	if replicas <= 0 {
		return nil
	}
	var out []int32
	for i, owner := range members {
		if owner == member {
			continue
		}
		parts := slices.Clone(assignment[owner])
		slices.Sort(parts)
		for j, part := range parts {
			for r := 0; r < replicas; r++ {
				if members[(i+1+(j+r)%(n-1))%n] == member {
					out = append(out, part)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}
