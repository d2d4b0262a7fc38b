package uring

// user_data is an integer token, never a Go pointer: the kernel stores it
// where the garbage collector cannot see it, and turning it back into a
// pointer would break the unsafe.Pointer rules. The token names a slot in a
// table the loop owns, and a generation that the loop bumps each time it
// reuses the slot, so a CQE that arrives after its operation was given up
// (a cancel racing a completion, a multishot tail) is recognised as stale
// instead of being delivered to the slot's next owner.
//
// Layout, most significant bits first:
//
//	kind (8 bits) | slot (24 bits) | generation (32 bits)

const (
	// MaxSlot is the largest slot index a token can carry; tables of
	// in-flight operations must not be larger than MaxSlot+1 entries.
	MaxSlot         = 1<<24 - 1
	userDataKindPos = 56
	userDataSlotPos = 32
)

// EncodeUserData packs an operation kind, a slot index and the slot's
// generation into a user_data token. It panics if slot exceeds MaxSlot, as
// that is a table-sizing bug that would otherwise alias another slot.
func EncodeUserData(kind uint8, slot uint32, generation uint32) uint64 {
	if slot > MaxSlot {
		panic("uring: user_data slot exceeds MaxSlot")
	}
	return uint64(kind)<<userDataKindPos | uint64(slot)<<userDataSlotPos | uint64(generation)
}

// DecodeUserData unpacks a token made by EncodeUserData.
func DecodeUserData(token uint64) (kind uint8, slot uint32, generation uint32) {
	return uint8(token >> userDataKindPos), uint32(token>>userDataSlotPos) & MaxSlot, uint32(token)
}

// SetUserData sets the token the CQE will carry back.
func (sqe *SQE) SetUserData(token uint64) {
	sqe.UserData = token
}
