package wire

import "fmt"

// StreamCompacted answers a StreamAdmin compact (S→C, CapAdmin and
// CapStreams): what compacting each partition of the stream did.
type StreamCompacted struct {
	Stream     []byte
	Partitions []CompactedPartition
}

// CompactedPartition is one partition of a StreamCompacted.
type CompactedPartition struct {
	RecordsRemoved    uint64 // tombstones included
	TombstonesRemoved uint64
	RecordsKept       uint64 // in the sealed segments, after
	BytesBefore       uint64 // of the sealed segments
	BytesAfter        uint64
	Segments          uint32 // sealed segments rewritten
	Passes            uint32 // key-map passes over the partition
}

// CompactedPartitionSize is the encoded size of one CompactedPartition.
const CompactedPartitionSize = 5*8 + 2*4

// Type implements Message.
func (*StreamCompacted) Type() Type { return TypeStreamCompacted }

// AppendBody implements Message.
func (m *StreamCompacted) AppendBody(dst []byte) []byte {
	dst = appendBytes16(dst, m.Stream)
	dst = le.AppendUint32(dst, uint32(len(m.Partitions)))
	for _, p := range m.Partitions {
		dst = le.AppendUint64(dst, p.RecordsRemoved)
		dst = le.AppendUint64(dst, p.TombstonesRemoved)
		dst = le.AppendUint64(dst, p.RecordsKept)
		dst = le.AppendUint64(dst, p.BytesBefore)
		dst = le.AppendUint64(dst, p.BytesAfter)
		dst = le.AppendUint32(dst, p.Segments)
		dst = le.AppendUint32(dst, p.Passes)
	}
	return dst
}

// DecodeStreamCompacted decodes a StreamCompacted body; Stream aliases
// body.
func DecodeStreamCompacted(body []byte) (StreamCompacted, error) {
	r := reader{buf: body, what: "StreamCompacted"}
	m := StreamCompacted{Stream: r.bytes16("stream")}
	count := r.u32("partitions")
	if r.err == nil && (count > MaxPartitions || uint64(count)*CompactedPartitionSize > uint64(len(r.buf))) {
		return m, fmt.Errorf("%w: StreamCompacted: %d partitions in %d bytes", ErrMalformed, count, len(r.buf))
	}
	for i := uint32(0); i < count && r.err == nil; i++ {
		m.Partitions = append(m.Partitions, CompactedPartition{RecordsRemoved: r.u64("records removed"),
			TombstonesRemoved: r.u64("tombstones removed"), RecordsKept: r.u64("records kept"),
			BytesBefore: r.u64("bytes before"), BytesAfter: r.u64("bytes after"), Segments: r.u32("segments"), Passes: r.u32("passes")})
	}
	return m, r.done()
}
