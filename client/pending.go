package client

import (
	"sync"

	"github.com/ironbus/ironbus/wire"
)

// kind says what a pending request is waiting for, so the reader knows
// which replies are legal and where to put them.
type kind uint8

const (
	kindFree      kind = iota
	kindProduce        // an awaited Produce; call is nil once abandoned
	kindProducer       // a pipelined Producer send: producer and seq
	kindFetch          // a Consume: Deliver and Gap frames, then ConsumeEnd
	kindAck            // an Ack or Nack
	kindPing           // Client.Ping
	kindKeepalive      // an idle keepalive; its Pong is dropped
	kindOpenGroup      // an OpenGroup: GroupInfo
	kindAdmin          // a GroupAdmin, DeadLetterAdmin, StreamAdmin or ProducerInit: its one answer
)

// entry is one request in flight. Entries live by value in the table's
// slots, so registering a request allocates nothing.
type entry struct {
	id       uint32 // 0 only in a free slot: request ids are never 0
	kind     kind
	call     *call
	producer *Producer
	seq      uint64
	attempt  uint32 // kindProducer: which send of the record this is
}

// pendingTable maps request ids to entries. The slot of an id is
// id & mask, and new ids skip any whose slot is busy, so a lookup is one
// index and ids stay unique among requests in flight even when the
// counter wraps. The table doubles when half full; doubling keeps every
// live id in a distinct slot (ids distinct modulo n stay distinct modulo
// 2n), and in steady state nothing allocates.
type pendingTable struct {
	slots  []entry
	count  int
	lastID uint32
}

const minPendingSlots = 64

// add stores e under a fresh id and returns the id.
func (t *pendingTable) add(e entry) uint32 {
	if 2*(t.count+1) > len(t.slots) {
		t.grow()
	}
	mask := uint32(len(t.slots) - 1)
	for {
		t.lastID++
		if t.lastID == 0 { // 0 answers nothing in the protocol: never use it
			continue
		}
		slot := &t.slots[t.lastID&mask]
		if slot.kind == kindFree {
			e.id = t.lastID
			*slot = e
			t.count++
			return e.id
		}
	}
}

// get returns the entry of id, or nil when id is not in flight (a reply
// to an abandoned request).
func (t *pendingTable) get(id uint32) *entry {
	if id == 0 || len(t.slots) == 0 {
		return nil
	}
	slot := &t.slots[id&uint32(len(t.slots)-1)]
	if slot.kind == kindFree || slot.id != id {
		return nil
	}
	return slot
}

// remove frees the slot of an entry returned by get.
func (t *pendingTable) remove(slot *entry) {
	*slot = entry{}
	t.count--
}

func (t *pendingTable) grow() {
	size := max(minPendingSlots, 2*len(t.slots))
	slots := make([]entry, size)
	mask := uint32(size - 1)
	for _, e := range t.slots {
		if e.kind != kindFree {
			slots[e.id&mask] = e
		}
	}
	t.slots = slots
}

// drain empties the table and returns what was in it.
func (t *pendingTable) drain() []entry {
	var out []entry
	for i := range t.slots {
		if t.slots[i].kind != kindFree {
			out = append(out, t.slots[i])
			t.slots[i] = entry{}
		}
	}
	t.count = 0
	return out
}

// call is the state of one awaited request. Whoever reads the socket
// (the read loop, or a caller reading its own answer) fills it and then
// sends on done exactly once; the caller reads it only after receiving
// from done, so the channel orders the two.
type call struct {
	done chan struct{}
	err  error

	ack      Ack          // Produce
	fetch    fetchState   // Fetch
	want     int          // Ack: the number of entries sent
	statuses []AckStatus  // Ack: one per entry
	payload  uint64       // Ping: the payload sent
	group    GroupInfo    // OpenGroup
	admin    wire.Message // admin requests, ProducerInit: the decoded answer, names copied
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

func getCall() *call { return callPool.Get().(*call) }

// putCall recycles a call whose done signal was received: nobody touches
// it any more. An abandoned call is left to the collector instead, since
// the reader may still be filling it.
func putCall(c *call) {
	done := c.done
	*c = call{done: done}
	callPool.Put(c)
}

func (k kind) String() string {
	switch k {
	case kindProduce, kindProducer:
		return "Produce"
	case kindFetch:
		return "Consume"
	case kindAck:
		return "Ack"
	case kindPing, kindKeepalive:
		return "Ping"
	case kindOpenGroup:
		return "OpenGroup"
	case kindAdmin:
		return "admin request"
	}
	return "free slot"
}

// Masks of the kinds each reply may answer, for Client.take.
const (
	acceptsProduce = 1<<kindProduce | 1<<kindProducer
	acceptsFetch   = 1 << kindFetch
	acceptsAck     = 1 << kindAck
	acceptsPong    = 1<<kindPing | 1<<kindKeepalive
	acceptsGroup   = 1 << kindOpenGroup
	acceptsAdmin   = 1 << kindAdmin
	acceptsAny     = 0xffff
)
