package uring

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BufferRing is a provided-buffer ring (IORING_REGISTER_PBUF_RING, 5.19):
// count equal buffers the kernel picks from for RECVs prepared with
// PrepRecvBufferGroup or PrepMultishotRecv, so no connection needs a read
// buffer of its own. Both the ring of io_uring_buf entries and the buffers
// are anonymous mappings, off the Go heap, because the kernel reads the one
// and writes the other at any time while the ring is registered.
//
// Ownership: a buffer whose id arrived in a CQE belongs to the loop until it
// is handed back with Recycle and published with Advance. Like its Ring, a
// BufferRing is used by one goroutine.
type BufferRing struct {
	ring    *Ring
	group   uint16
	mask    uint16
	count   uint16
	size    int
	entries []byte // shared with the kernel: [count]io_uring_buf
	buffers []byte // count × size bytes the kernel writes into
	tail    uint16 // next entry Recycle fills; published by Advance
}

// NewBufferRing registers count buffers of size bytes as group groupID on
// ring r, all of them available to the kernel. count must be a power of two
// up to 32768.
func NewBufferRing(r *Ring, groupID uint16, count uint16, size int) (*BufferRing, error) {
	if count == 0 || count&(count-1) != 0 || count > maximumBufferRingEntries {
		return nil, fmt.Errorf("uring: buffer ring count %d is not a power of two up to %d", count, maximumBufferRingEntries)
	}
	if size <= 0 || uint64(size) > math.MaxUint32 {
		return nil, fmt.Errorf("uring: buffer size %d out of range", size)
	}
	entries, err := mapAnonymous(int(count) * bufferRingEntrySize)
	if err != nil {
		return nil, err
	}
	buffers, err := mapAnonymous(int(count) * size)
	if err != nil {
		unix.Munmap(entries)
		return nil, err
	}
	b := &BufferRing{ring: r, group: groupID, mask: count - 1, count: count, size: size, entries: entries, buffers: buffers}
	for id := range count {
		b.Recycle(id)
	}
	b.Advance()
	registration := bufferRegistration{
		RingAddress: uint64(uintptr(unsafe.Pointer(&entries[0]))),
		RingEntries: uint32(count),
		Group:       groupID,
	}
	if err := r.register(registerBufferRing, unsafe.Pointer(&registration), 1); err != nil {
		b.unmap()
		return nil, err
	}
	return b, nil
}

// Group is the buffer group id to put in RECV SQEs.
func (b *BufferRing) Group() uint16 { return b.group }

// Size is the length of every buffer.
func (b *BufferRing) Size() int { return b.size }

// Buffer returns buffer id, whole. Its bytes are valid until the buffer is
// recycled.
func (b *BufferRing) Buffer(id uint16) []byte {
	if id >= b.count {
		panic("uring: buffer id out of range")
	}
	start := int(id) * b.size
	return b.buffers[start : start+b.size : start+b.size]
}

// Received returns the bytes a RECV CQE delivered into this ring's buffer,
// with the buffer id to recycle afterwards; ok is false when the CQE
// carries no buffer (an error, EOF, or ENOBUFS).
func (b *BufferRing) Received(cqe CQE) (id uint16, data []byte, ok bool) {
	id, ok = cqe.BufferID()
	if !ok || cqe.Result < 0 {
		return 0, nil, false
	}
	return id, b.Buffer(id)[:cqe.Result], true
}

// Recycle queues buffer id to be handed back to the kernel; Advance
// publishes it. Recycling several buffers before one Advance saves stores.
// The entry is written field by field: entry 0's last field is the ring
// tail, which only Advance may write.
func (b *BufferRing) Recycle(id uint16) {
	buffer := b.Buffer(id)
	entry := (*bufferRingEntry)(unsafe.Pointer(&b.entries[int(b.tail&b.mask)*bufferRingEntrySize]))
	entry.Address = uint64(uintptr(unsafe.Pointer(&buffer[0])))
	entry.Length = uint32(b.size)
	entry.ID = id
	b.tail++
}

// Advance publishes every recycled buffer to the kernel with a release
// store of the ring tail.
func (b *BufferRing) Advance() {
	storeBufferRingTail(unsafe.Pointer(&b.entries[0]), b.tail)
}

// Close unregisters the group and unmaps the memory. Cancel every RECV that
// uses the group and reap its final CQE first: a RECV already running may
// still write into a buffer. Close is idempotent.
func (b *BufferRing) Close() error {
	if b.entries == nil {
		return nil
	}
	var err error
	if b.ring.fd >= 0 {
		registration := bufferRegistration{Group: b.group}
		err = b.ring.register(unregisterBufferRing, unsafe.Pointer(&registration), 1)
	}
	return errors.Join(err, b.unmap())
}

// unmap releases both mappings.
func (b *BufferRing) unmap() error {
	err := errors.Join(unix.Munmap(b.entries), unix.Munmap(b.buffers))
	b.entries, b.buffers = nil, nil
	return err
}
