package wire

import "fmt"

// DeliverBatchHeaderSize is the fixed part of a DeliverBatch body: the
// stored frames follow it.
const DeliverBatchHeaderSize = 4 + 8 + 8 + 4 + 4

// DeliverBatch carries a contiguous run of a partition's records answering
// a streaming Consume (S→C), on connections with CapDeliverBatch. Frames
// holds the stored frames exactly as they are on disk (docs/FORMAT.md):
// Count record frames, in offset order from First, and possibly the
// commit frames that closed producer batches between them, which a
// client skips. The broker never re-encodes a record on the way out, so
// the client verifies each record frame's checksums itself.
type DeliverBatch struct {
	Partition uint32
	First     uint64 // offset of the first record frame
	Next      uint64 // the read position after this run: last offset + 1
	Count     uint32 // record frames in Frames
	Frames    []byte // stored frames; aliases the body when decoded
}

// Type implements Message.
func (*DeliverBatch) Type() Type { return TypeDeliverBatch }

// AppendBody implements Message.
func (m *DeliverBatch) AppendBody(dst []byte) []byte {
	dst = m.appendHeader(dst, len(m.Frames))
	return append(dst, m.Frames...)
}

func (m *DeliverBatch) appendHeader(dst []byte, framesLength int) []byte {
	dst = le.AppendUint32(dst, m.Partition)
	dst = le.AppendUint64(dst, m.First)
	dst = le.AppendUint64(dst, m.Next)
	dst = le.AppendUint32(dst, m.Count)
	return le.AppendUint32(dst, uint32(framesLength))
}

// AppendDeliverBatchHeader appends the envelope and fixed fields of a
// DeliverBatch whose frames (framesLength bytes) the caller sends right
// after it from where they are stored: the frames are never copied into
// the header's buffer. m.Frames is ignored.
func AppendDeliverBatchHeader(dst []byte, requestID uint32, m *DeliverBatch, framesLength int) []byte {
	dst = le.AppendUint32(dst, uint32(minLength+DeliverBatchHeaderSize+framesLength))
	dst = append(dst, byte(TypeDeliverBatch))
	dst = le.AppendUint32(dst, requestID)
	return m.appendHeader(dst, framesLength)
}

// DecodeDeliverBatch decodes a DeliverBatch body; Frames aliases it. It
// checks the envelope of the run, not the frames: the client walks and
// verifies those one by one.
func DecodeDeliverBatch(body []byte) (DeliverBatch, error) {
	r := reader{buf: body, what: "DeliverBatch"}
	m := DeliverBatch{Partition: r.u32("partition"), First: r.u64("first"), Next: r.u64("next"), Count: r.u32("count")}
	length := r.u32("frames length")
	if r.err != nil {
		return m, r.err
	}
	if uint64(len(r.buf)) != uint64(length) {
		return m, fmt.Errorf("%w: DeliverBatch: frames length %d, %d bytes follow", ErrMalformed, length, len(r.buf))
	}
	if m.Count > 0 && (m.Next < m.First || m.Next-m.First < uint64(m.Count)) {
		return m, fmt.Errorf("%w: DeliverBatch: %d records cannot span offsets %d..%d", ErrMalformed, m.Count, m.First, m.Next)
	}
	if m.Count > 0 && length == 0 {
		return m, fmt.Errorf("%w: DeliverBatch: %d records in no bytes", ErrMalformed, m.Count)
	}
	m.Frames = r.rest()
	return m, nil
}
