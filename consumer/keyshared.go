package consumer

import (
	"encoding/binary"
	"slices"

	"github.com/ironbus/ironbus/record"
	"github.com/zeebo/xxh3"
)

// Key-shared routing. Each key belongs to one live member, chosen by
// rendezvous (highest random weight) hashing over the member ids: the
// owner is a pure function of the member set, so no two live members
// ever own a key, and a join or leave moves only the keys whose highest
// weight changed. Per-key order holds because a key has at most one
// record leased at a time and only its lowest unsettled offset may be
// handed out: when membership moves a key while its old owner still
// holds a lease, the new owner waits until that lease is settled or
// expires (drain or expire), then continues from the lowest offset.
// Records without a key are shared freely, like a work group's.
//
// Keys are tracked by a 64-bit hash of the key bytes, so memory does not
// grow with key length; two keys that collide are merely serialized
// together.

// keyRef identifies a record's key; set is false for a record without one.
type keyRef struct {
	hash uint64
	set  bool
}

// recordKey returns the key of a record body. A body that does not
// decode has no key for routing purposes (it cannot be ordered by one).
func recordKey(body []byte) keyRef {
	view, err := record.Parse(body)
	if err != nil || len(view.Key) == 0 {
		return keyRef{}
	}
	return keyRef{hash: xxh3.Hash(view.Key), set: true}
}

// keyState is what the group knows about one key: its unsettled offsets
// (ascending) and whether the lowest is leased.
type keyState struct {
	offsets []uint64
	leased  bool
}

// keyRouter holds the per-key state of a key-shared group; in other
// groups it stays empty and every record is deliverable.
type keyRouter struct {
	keys map[uint64]*keyState
}

// owner returns the member that owns key among members (0 when there
// are none): the highest weight wins, ties go to the larger id.
func keyOwner(key uint64, members map[uint64]struct{}) uint64 {
	var best, bestWeight uint64
	var buf [16]byte
	binary.LittleEndian.PutUint64(buf[8:], key)
	for member := range members {
		binary.LittleEndian.PutUint64(buf[:8], member)
		weight := xxh3.Hash(buf[:])
		if weight > bestWeight || (weight == bestWeight && member > best) {
			best, bestWeight = member, weight
		}
	}
	return best
}

// track notes that offset of key was read and is unsettled.
func (r *keyRouter) track(key keyRef, offset uint64) {
	if !key.set {
		return
	}
	ks := r.keys[key.hash]
	if ks == nil {
		ks = &keyState{}
		r.keys[key.hash] = ks
	}
	i, found := slices.BinarySearch(ks.offsets, offset)
	if !found {
		ks.offsets = slices.Insert(ks.offsets, i, offset)
	}
}

// deliverable reports whether member may take offset of key now.
func (r *keyRouter) deliverable(key keyRef, offset, member uint64, members map[uint64]struct{}) bool {
	if !key.set {
		return true
	}
	ks := r.keys[key.hash]
	if ks == nil {
		return true // not tracked (the record was never read in this run)
	}
	if ks.leased || (len(ks.offsets) > 0 && ks.offsets[0] != offset) {
		return false
	}
	return keyOwner(key.hash, members) == member
}

func (r *keyRouter) lease(key keyRef) {
	if ks := r.keys[key.hash]; key.set && ks != nil {
		ks.leased = true
	}
}

func (r *keyRouter) unlease(key keyRef) {
	if ks := r.keys[key.hash]; key.set && ks != nil {
		ks.leased = false
	}
}

// settle forgets offset of key: it is done.
func (r *keyRouter) settle(key keyRef, offset uint64) {
	ks := r.keys[key.hash]
	if !key.set || ks == nil {
		return
	}
	if i, found := slices.BinarySearch(ks.offsets, offset); found {
		ks.offsets = slices.Delete(ks.offsets, i, i+1)
		if i == 0 {
			ks.leased = false // only the lowest offset is ever leased
		}
	}
	if len(ks.offsets) == 0 {
		delete(r.keys, key.hash)
	}
}

// Owner returns the live member that owns key in a key-shared group (0
// when the group has no members): a Fetch by any other member never
// receives records of that key.
func (g *Group) Owner(key []byte) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return keyOwner(xxh3.Hash(key), g.members)
}

// Join adds member to the group without fetching (Fetch joins too), so a
// key-shared group can rebalance before the member's first request.
func (g *Group) Join(member uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.members[member] = struct{}{}
}
