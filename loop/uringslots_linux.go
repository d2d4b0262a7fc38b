package loop

import "github.com/ironbus/ironbus/loop/uring"

// Operation kinds, the top byte of a user_data token. Zero is never used,
// so a zeroed token cannot pass for an operation.
const (
	opWake   uint8 = iota + 1 // the READ kept posted on the reactor's eventfd
	opAccept                  // the multishot ACCEPT (reactor 0)
	opRecv                    // a connection's multishot RECV
	opSend                    // a connection's SEND
	opCancel                  // an ASYNC_CANCEL; its target reports for itself
)

// slotTable maps the slot index carried in a user_data token back to the
// connection, so no Go pointer ever goes through the kernel. A slot's
// generation is bumped when its connection leaves, and a completion whose
// token names an older generation is stale: it belongs to a connection
// that is gone, never to the slot's next owner. A connection leaves only
// once its last operation has posted its final completion, so stale tokens
// are a safety net rather than the normal path.
type slotTable struct {
	conns       []*uringConn
	generations []uint32
	free        []uint32
	live        int
}

// add gives c a slot and returns it with the generation tokens must carry;
// ok is false when the table is full (uring.MaxSlot connections).
func (t *slotTable) add(c *uringConn) (slot, generation uint32, ok bool) {
	if n := len(t.free); n > 0 {
		slot = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		if len(t.conns) > uring.MaxSlot {
			return 0, 0, false
		}
		slot = uint32(len(t.conns))
		t.conns = append(t.conns, nil)
		t.generations = append(t.generations, 0)
	}
	t.conns[slot] = c
	t.live++
	return slot, t.generations[slot], true
}

// lookup returns the connection a token names, or nil when the token is
// stale or names no slot.
func (t *slotTable) lookup(slot, generation uint32) *uringConn {
	if int(slot) >= len(t.conns) || t.generations[slot] != generation {
		return nil
	}
	return t.conns[slot]
}

// remove frees slot; tokens naming its current generation become stale.
func (t *slotTable) remove(slot uint32) {
	if t.conns[slot] == nil {
		return
	}
	t.conns[slot] = nil
	t.generations[slot]++
	t.free = append(t.free, slot)
	t.live--
}

// each calls fn for every connection in the table; fn may remove it.
func (t *slotTable) each(fn func(c *uringConn)) {
	for _, c := range t.conns {
		if c != nil {
			fn(c)
		}
	}
}

// token is the user_data of operation kind on c.
func (c *uringConn) token(kind uint8) uint64 {
	return uring.EncodeUserData(kind, c.slot, c.generation)
}
