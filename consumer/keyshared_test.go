package consumer

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ironbus/ironbus/segment/vfs"
)

func testKey(i int) string {
	if i%5 == 0 {
		return "" // keyless records are shared freely
	}
	return fmt.Sprint("k", i%7)
}

// TestPropertyKeyShared runs random fetches, acks, nacks, expiries, joins
// and leaves, and checks that a record goes only to its key's owner, that
// a keyed record is handed out only when every earlier record of its key
// is done (per-key order, also across a member leaving with leases), and
// that everything is acked exactly once in the end.
func TestPropertyKeyShared(t *testing.T) {
	for _, seed := range propertySeeds() {
		runKeySharedProperty(t, seed)
	}
}

func runKeySharedProperty(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	r := mustRig(t, vfs.NewMemFS())
	const records = 150
	r.appendRecords(records, testKey)
	clock := &manualClock{now: time.Unix(0, 0)}
	g := r.open("keys", Options{Type: TypeKeyShared, MaxInFlight: 1 + rng.IntN(6), Visibility: 5 * time.Second, Now: clock.Now})
	latest := map[uint64]uint64{}
	settled := map[uint64]bool{}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: %s", seed, fmt.Sprintf(format, args...))
	}
	deliver := func(member uint64, got []Delivery) {
		t.Helper()
		for _, d := range got {
			key := keyOf(t, d)
			if settled[d.Offset] {
				fail("offset %d delivered after its ack", d.Offset)
			}
			if key == "" {
				latest[d.Offset] = d.Lease
				continue
			}
			if owner := g.Owner([]byte(key)); owner != member {
				fail("key %s delivered to %d, owned by %d", key, member, owner)
			}
			for earlier := int(d.Offset) - 1; earlier >= 0; earlier-- {
				if testKey(earlier) == key && !settled[uint64(earlier)] {
					fail("offset %d of key %s handed out before offset %d was done", d.Offset, key, earlier)
				}
			}
			latest[d.Offset] = d.Lease
		}
	}
	for step := 0; step < 800; step++ {
		member := uint64(1 + rng.IntN(4))
		switch op := rng.IntN(10); {
		case op < 4:
			got, _, err := g.Fetch(member, 1+rng.IntN(4), 1<<20, 0)
			if err != nil {
				fail("fetch: %v", err)
			}
			deliver(member, got)
		case op < 8:
			for offset, token := range latest {
				if rng.IntN(3) == 0 && g.Nack(offset, token, 0) == StatusOK {
					delete(latest, offset)
				} else if g.Ack(offset, token) == StatusOK {
					settled[offset] = true
					delete(latest, offset)
				}
				break
			}
		case op == 8:
			clock.advance(time.Duration(rng.IntN(8)) * time.Second)
		default:
			g.Release(member) // leaves with whatever it holds
		}
	}
	for member := uint64(1); member <= 4; member++ {
		g.Release(member) // live members keep their keys; the drainer needs them all
	}
	clock.advance(time.Hour)
	for i := 0; i < records*4 && g.Committed() < records; i++ {
		got, _, _ := g.Fetch(50, 10, 1<<20, 0)
		deliver(50, got)
		for _, d := range got {
			if g.Ack(d.Offset, d.Lease) == StatusOK {
				settled[d.Offset] = true
			}
		}
		clock.advance(time.Minute)
	}
	if c := g.Committed(); c != records {
		fail("cursor %d after draining, stats %+v", c, g.Stats())
	}
}

func TestKeySharedMemberLeavesWithLeases(t *testing.T) {
	r := mustRig(t, vfs.NewMemFS())
	r.appendRecords(12, func(i int) string { return fmt.Sprint("key-", i%3) })
	g := r.open("keys", Options{Type: TypeKeyShared})
	g.Join(1)
	g.Join(2)
	held := map[uint64][]Delivery{}
	for _, member := range []uint64{1, 2} {
		got, _, _ := g.Fetch(member, 12, 1<<20, 0)
		held[member] = got
		seen := map[string]bool{}
		for _, d := range got {
			key := keyOf(t, d)
			if seen[key] {
				t.Fatalf("two records of key %s leased at once", key)
			}
			seen[key] = true
		}
	}
	if len(held[1])+len(held[2]) != 3 {
		t.Fatalf("one record per key in flight: %d + %d", len(held[1]), len(held[2]))
	}
	// Member 1 leaves holding leases; member 2 takes over its keys and
	// must get the lowest offset of each first.
	g.Release(1)
	for _, d := range held[2] {
		g.Ack(d.Offset, d.Lease)
	}
	next := map[string]uint64{"key-0": 0, "key-1": 1, "key-2": 2}
	for _, d := range held[2] {
		next[keyOf(t, d)] += 3
	}
	for round := 0; round < 20; round++ {
		got, _, _ := g.Fetch(2, 12, 1<<20, 0)
		for _, d := range got {
			key := keyOf(t, d)
			if d.Offset != next[key] {
				t.Fatalf("key %s: got offset %d, want %d", key, d.Offset, next[key])
			}
			next[key] += 3
			g.Ack(d.Offset, d.Lease)
		}
	}
	if c := g.Committed(); c != 12 {
		t.Fatalf("cursor %d", c)
	}
	for _, d := range held[1] {
		if s := g.Ack(d.Offset, d.Lease); s == StatusOK {
			t.Fatalf("the departed member acked offset %d", d.Offset)
		}
	}
}

func TestKeyOwnerIsUnique(t *testing.T) {
	members := map[uint64]struct{}{3: {}, 9: {}, 12: {}, 40: {}}
	moved := 0
	for key := uint64(0); key < 1000; key++ {
		owner := keyOwner(key, members)
		if _, ok := members[owner]; !ok {
			t.Fatalf("key %d owned by non-member %d", key, owner)
		}
		if keyOwner(key, members) != owner {
			t.Fatal("owner is not deterministic")
		}
		delete(members, 12)
		if after := keyOwner(key, members); after != owner {
			moved++
			if owner != 12 {
				t.Fatalf("key %d moved from %d though only 12 left", key, owner)
			}
		}
		members[12] = struct{}{}
	}
	if moved == 0 || moved > 400 {
		t.Fatalf("%d of 1000 keys moved when one of four members left", moved)
	}
}
