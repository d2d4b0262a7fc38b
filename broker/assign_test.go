package broker

import "testing"

// TestSpanAssignmentBalance: the assignment is disjoint, covers every
// partition and is balanced for any member count.
func TestSpanAssignmentBalance(t *testing.T) {
	var st spanState
	for members := uint64(1); members <= 6; members++ {
		st.join(members)
		owner := map[uint32]uint64{}
		sizes := map[int]bool{}
		for m := uint64(1); m <= members; m++ {
			partitions, _ := st.assigned(m, 8)
			sizes[len(partitions)] = true
			for _, p := range partitions {
				if _, taken := owner[p]; taken {
					t.Fatalf("%d members: partition %d assigned twice", members, p)
				}
				owner[p] = m
			}
		}
		if len(owner) != 8 || len(sizes) > 2 {
			t.Fatalf("%d members: %d partitions assigned, sizes %v", members, len(owner), sizes)
		}
	}
	st.leave(1)
	if partitions, gained := st.assigned(2, 8); len(partitions) == 0 || len(gained) == 0 {
		t.Fatalf("after a leave member 2 has %v, gained %v", partitions, gained)
	}
}
