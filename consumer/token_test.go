package consumer

import (
	"math/bits"
	"testing"

	"github.com/ironbus/ironbus/segment/vfs"
)

// TestLeaseTokensAreUnguessable: a consumer that knows its own lease
// tokens cannot derive another's. Tokens are unique, never zero, and
// neither consecutive grants nor two groups share structure a guess could
// use: neighbours differ in about half their bits.
func TestLeaseTokensAreUnguessable(t *testing.T) {
	r := mustRig(t, vfs.NewMemFS())
	const n = 512
	r.appendRecords(n, nil)
	seen := map[uint64]bool{}
	flips := 0
	for _, name := range []string{"a", "b"} {
		g := r.open(name, Options{Type: TypeWork, MaxInFlight: n})
		got, _, err := g.Fetch(1, n, 1<<30, 0)
		if err != nil || len(got) != n {
			t.Fatalf("fetched %d: %v", len(got), err)
		}
		for i, d := range got {
			if d.Lease == 0 || seen[d.Lease] {
				t.Fatalf("token %#x (zero or repeated)", d.Lease)
			}
			seen[d.Lease] = true
			if i > 0 {
				flips += bits.OnesCount64(d.Lease ^ got[i-1].Lease)
			}
		}
		// The owner holds its token; a neighbour's is no use to it.
		for i := 1; i < 8; i++ {
			for delta := uint64(1); delta <= 16; delta++ {
				for _, guess := range []uint64{got[i-1].Lease + delta, got[i-1].Lease - delta} {
					if guess != got[i].Lease && g.Ack(got[i].Offset, guess) == StatusOK {
						t.Fatalf("offset %d acked with guessed token %#x", got[i].Offset, guess)
					}
				}
			}
		}
		_ = g.Close()
	}
	if mean := float64(flips) / float64(2*(n-1)); mean < 28 || mean > 36 {
		t.Errorf("consecutive tokens differ in %.1f bits on average; want about 32", mean)
	}
}
