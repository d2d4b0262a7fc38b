package wire

import (
	"fmt"
	"math"

	"github.com/zeebo/xxh3"
)

// Streams, partitions and subjects (CapStreams).

// Partition sentinels. They share the value no real partition can have
// (a stream holds at most MaxPartitions).
const (
	// PartitionAny in a Produce lets the broker pick the partition: the
	// stable hash of the record's key, or the connection's own partition
	// for a record without a key (docs/STREAMS.md).
	PartitionAny uint32 = math.MaxUint32
	// PartitionAll in a Consume or OpenGroup spans every partition of the
	// stream: Deliver, Gap and DeliverBatch frames name their partition,
	// and Acks go to the partition a record came from.
	PartitionAll uint32 = math.MaxUint32
	// MaxPartitions bounds a stream's partition count.
	MaxPartitions = 1024
)

// Produce flag bits.
const (
	// ProduceRouteBySubject: Stream is empty and the broker picks the
	// stream whose binding matches the record's subject; no match is
	// Error no_route and nothing is stored.
	ProduceRouteBySubject uint8 = 1 << 0
)

// StreamAdmin operations.
const (
	StreamOpList   uint8 = 0 // every stream and every binding
	StreamOpInfo   uint8 = 1 // one stream
	StreamOpCreate uint8 = 2 // create a stream; the same settings again is not an error
	StreamOpPurge  uint8 = 3 // drop every record of a stream (needs StreamForce); offsets keep rising
	StreamOpRemove uint8 = 4 // delete a stream, its groups, bindings and dead letters (needs StreamForce)
	StreamOpBind   uint8 = 5 // route subjects matching Pattern to Stream
	StreamOpUnbind uint8 = 6 // remove the binding of Pattern
	// StreamOpCompact seals each partition's active segment and compacts
	// the stream now; answered by StreamCompacted. Only for a stream
	// created with StreamCompact.
	StreamOpCompact uint8 = 7
)

// StreamAdmin flag bits.
const (
	StreamForce uint8 = 1 << 0 // the caller confirmed a destructive operation
)

// Stream settings bits (StreamAdmin create and StreamState; CapProducers).
const (
	// StreamCompact: sealed segments keep only the latest record per key
	// (and tombstones until DeleteRetentionMs has passed).
	StreamCompact uint8 = 1 << 0
	// StreamDedupWindowSet: DedupWindowMs is given (0 turns message-id
	// dedup off); without it a create takes the broker's default window.
	StreamDedupWindowSet uint8 = 1 << 1
	// StreamCompactPastGroups (with StreamCompact): compaction may remove
	// records a consumer group has not committed.
	StreamCompactPastGroups uint8 = 1 << 2
	// StreamReplicated: a u8 replication factor follows the settings
	// block (StreamAdmin create, extended StreamList entries); only with
	// CapCluster.
	StreamReplicated uint8 = 1 << 3
)

// StreamAdmin asks about, creates or changes streams and subject bindings
// (C→S, CapAdmin and CapStreams). Answered by StreamList once a change is
// durable, or by Error (not_found, invalid_name, invalid_request,
// conflict for an overlapping binding or a stream that exists with other
// settings).
type StreamAdmin struct {
	Op         uint8 // StreamOp*
	Flags      uint8 // Stream* flag bits
	Stream     []byte
	Pattern    []byte // StreamOpBind, StreamOpUnbind
	Partitions uint32 // StreamOpCreate; 0 = 1
	MaxBytes   uint64 // StreamOpCreate retention bounds; 0 = the broker's default
	MaxAgeMs   uint64
	MaxRecords uint64
	// Settings (StreamCompact, StreamDedupWindowSet), DedupWindowMs and
	// DeleteRetentionMs (how long a compacted stream keeps tombstones; 0 =
	// the broker's default) travel in a trailing block sent only when one
	// of them is not zero, and only with CapProducers.
	Settings          uint8
	DedupWindowMs     uint64
	DeleteRetentionMs uint64
	// Replicas, with Settings&StreamReplicated, is the replication factor
	// a create asks for (1 to 255).
	Replicas uint8
}

// StreamSettingsSize is the trailing settings block of StreamAdmin.
const StreamSettingsSize = 1 + 8 + 8

// Type implements Message.
func (*StreamAdmin) Type() Type { return TypeStreamAdmin }

// AppendBody implements Message.
func (m *StreamAdmin) AppendBody(dst []byte) []byte {
	dst = append(dst, m.Op, m.Flags)
	dst = appendBytes16(dst, m.Stream)
	dst = appendBytes16(dst, m.Pattern)
	dst = le.AppendUint32(dst, m.Partitions)
	dst = le.AppendUint64(dst, m.MaxBytes)
	dst = le.AppendUint64(dst, m.MaxAgeMs)
	dst = le.AppendUint64(dst, m.MaxRecords)
	if m.Settings != 0 || m.DedupWindowMs != 0 || m.DeleteRetentionMs != 0 {
		dst = append(dst, m.Settings)
		dst = le.AppendUint64(dst, m.DedupWindowMs)
		dst = le.AppendUint64(dst, m.DeleteRetentionMs)
		if m.Settings&StreamReplicated != 0 {
			dst = append(dst, m.Replicas)
		}
	}
	return dst
}

// DecodeStreamAdmin decodes a StreamAdmin body; Stream and Pattern alias
// it. An unknown op decodes (the broker answers invalid_request).
func DecodeStreamAdmin(body []byte) (StreamAdmin, error) {
	r := reader{buf: body, what: "StreamAdmin"}
	m := StreamAdmin{Op: r.u8("op"), Flags: r.u8("flags"), Stream: r.bytes16("stream"), Pattern: r.bytes16("pattern"),
		Partitions: r.u32("partitions"), MaxBytes: r.u64("max bytes"), MaxAgeMs: r.u64("max age ms"), MaxRecords: r.u64("max records")}
	if r.err == nil && len(r.buf) > 0 {
		m.Settings, m.DedupWindowMs, m.DeleteRetentionMs = r.u8("settings"), r.u64("dedup window ms"), r.u64("delete retention ms")
		if r.err == nil && m.Settings == 0 && m.DedupWindowMs == 0 && m.DeleteRetentionMs == 0 {
			return m, fmt.Errorf("%w: StreamAdmin: an all-zero settings block is sent by leaving it out", ErrMalformed)
		}
		if m.Settings&StreamReplicated != 0 {
			m.Replicas = r.u8("replicas")
		}
	}
	return m, r.done()
}

// StreamPartitionSize is the size of one StreamPartition on the wire.
const StreamPartitionSize = 8 + 8 + 8

// StreamPartition is one partition of a stream.
type StreamPartition struct {
	First uint64 // the first offset it still holds
	End   uint64 // its committed end
	Bytes uint64 // bytes of its segments on disk
}

// StreamStateSize is the fixed part of one StreamState: the name's bytes
// and the partitions follow.
const StreamStateSize = 2 + 8 + 8 + 8 + 8 + 4 + 4

// StreamState is one stream as the broker sees it.
type StreamState struct {
	Name       []byte
	CreatedMs  uint64 // wall clock at creation, unix milliseconds (0 for a stream made by its first publish)
	MaxBytes   uint64 // retention bounds; 0 = the broker's default
	MaxAgeMs   uint64
	MaxRecords uint64
	Groups     uint32 // consumer groups over all partitions
	Partitions []StreamPartition
	// Settings (StreamCompact), DedupWindowMs (0: no dedup) and
	// DeleteRetentionMs are sent only in an extended StreamList.
	Settings          uint8
	DedupWindowMs     uint64
	DeleteRetentionMs uint64
	// Replicas, with Settings&StreamReplicated, is the stream's
	// replication factor.
	Replicas uint8
}

// StreamBindingSize is the fixed part of one StreamBinding.
const StreamBindingSize = 2 + 2

// StreamBinding routes subjects matching Pattern to Stream.
type StreamBinding struct {
	Pattern []byte
	Stream  []byte
}

// StreamList answers StreamAdmin (S→C): the streams (one for info,
// create, purge and remove, the last as it was just before) and the
// bindings (every binding for list, bind and unbind; the stream's for
// the others).
type StreamList struct {
	Streams  []StreamState
	Bindings []StreamBinding
	// Extended: every stream entry carries its settings (StreamSettingsSize
	// bytes after its partitions), announced by the top bit of the stream
	// count. A broker sends it only with CapProducers.
	Extended bool
}

// streamListExtended is the bit of the stream count that marks an
// extended StreamList.
const streamListExtended = 1 << 31

// Type implements Message.
func (*StreamList) Type() Type { return TypeStreamList }

// AppendBody implements Message.
func (m *StreamList) AppendBody(dst []byte) []byte {
	count := uint32(len(m.Streams))
	if m.Extended {
		count |= streamListExtended
	}
	dst = le.AppendUint32(dst, count)
	for i := range m.Streams {
		s := &m.Streams[i]
		dst = appendBytes16(dst, s.Name)
		dst = le.AppendUint64(dst, s.CreatedMs)
		dst = le.AppendUint64(dst, s.MaxBytes)
		dst = le.AppendUint64(dst, s.MaxAgeMs)
		dst = le.AppendUint64(dst, s.MaxRecords)
		dst = le.AppendUint32(dst, s.Groups)
		dst = le.AppendUint32(dst, uint32(len(s.Partitions)))
		for _, p := range s.Partitions {
			dst = le.AppendUint64(dst, p.First)
			dst = le.AppendUint64(dst, p.End)
			dst = le.AppendUint64(dst, p.Bytes)
		}
		if m.Extended {
			dst = append(dst, s.Settings)
			dst = le.AppendUint64(dst, s.DedupWindowMs)
			dst = le.AppendUint64(dst, s.DeleteRetentionMs)
			if s.Settings&StreamReplicated != 0 {
				dst = append(dst, s.Replicas)
			}
		}
	}
	dst = le.AppendUint32(dst, uint32(len(m.Bindings)))
	for i := range m.Bindings {
		dst = appendBytes16(dst, m.Bindings[i].Pattern)
		dst = appendBytes16(dst, m.Bindings[i].Stream)
	}
	return dst
}

// DecodeStreamList decodes a StreamList body; names alias it. A count the
// body cannot hold is malformed before anything is allocated.
func DecodeStreamList(body []byte) (StreamList, error) {
	r := reader{buf: body, what: "StreamList"}
	count := r.u32("stream count")
	extended := count&streamListExtended != 0
	count &^= streamListExtended
	if r.err == nil && uint64(count) > uint64(len(r.buf)/StreamStateSize) {
		return StreamList{}, fmt.Errorf("%w: StreamList: %d streams in %d bytes", ErrMalformed, count, len(r.buf))
	}
	m := StreamList{Streams: make([]StreamState, 0, count), Extended: extended}
	for i := uint32(0); i < count && r.err == nil; i++ {
		s := StreamState{Name: r.bytes16("name"), CreatedMs: r.u64("created ms"), MaxBytes: r.u64("max bytes"),
			MaxAgeMs: r.u64("max age ms"), MaxRecords: r.u64("max records"), Groups: r.u32("groups")}
		partitions := r.u32("partition count")
		if r.err == nil && uint64(partitions) > uint64(len(r.buf)/StreamPartitionSize) {
			return StreamList{}, fmt.Errorf("%w: StreamList: %d partitions in %d bytes", ErrMalformed, partitions, len(r.buf))
		}
		s.Partitions = make([]StreamPartition, 0, partitions)
		for p := uint32(0); p < partitions && r.err == nil; p++ {
			s.Partitions = append(s.Partitions, StreamPartition{First: r.u64("first"), End: r.u64("end"), Bytes: r.u64("bytes")})
		}
		if extended {
			s.Settings, s.DedupWindowMs, s.DeleteRetentionMs = r.u8("settings"), r.u64("dedup window ms"), r.u64("delete retention ms")
			if s.Settings&StreamReplicated != 0 {
				s.Replicas = r.u8("replicas")
			}
		}
		m.Streams = append(m.Streams, s)
	}
	bindings := r.u32("binding count")
	if r.err == nil && uint64(bindings) > uint64(len(r.buf)/StreamBindingSize) {
		return StreamList{}, fmt.Errorf("%w: StreamList: %d bindings in %d bytes", ErrMalformed, bindings, len(r.buf))
	}
	m.Bindings = make([]StreamBinding, 0, bindings)
	for i := uint32(0); i < bindings && r.err == nil; i++ {
		m.Bindings = append(m.Bindings, StreamBinding{Pattern: r.bytes16("pattern"), Stream: r.bytes16("stream")})
	}
	return m, r.done()
}

// PartitionForKey is the partition a record with this key goes to in a
// stream of the given number of partitions: the xxh3-64 hash of the key
// (seed 0) modulo the count. It is part of the protocol: any client may
// compute it to know where a key lands, so it never changes within a
// protocol version. A count of 0 is treated as 1.
func PartitionForKey(key []byte, partitions uint32) uint32 {
	if partitions <= 1 {
		return 0
	}
	return uint32(xxh3.Hash(key) % uint64(partitions))
}
