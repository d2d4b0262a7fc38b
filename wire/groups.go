package wire

import "fmt"

// Group start kinds, carried by OpenGroup: where a group created by the
// request begins. They apply only when the request creates the group.
const (
	StartEarliest uint8 = 0 // the first record the log still holds
	StartLatest   uint8 = 1 // the log's end when the group is created
	StartOffset   uint8 = 2 // start_value is an offset (clamped to what the log holds)
	StartTime     uint8 = 3 // start_value is a wall-clock time, unix milliseconds: the first record stamped at or after it
)

// OpenGroup opens a consumer group, creating it with a mode and a start
// position when it does not exist yet (C→S). Answered by GroupInfo, or
// by Error group_mode_mismatch when the group exists with another mode.
type OpenGroup struct {
	Stream     []byte
	Partition  uint32
	Group      []byte
	Mode       uint8 // Mode* of the group
	StartKind  uint8 // Start*
	StartValue uint64
	// Filter, when set, is the group's subject pattern (CapStreams), fixed
	// when the request creates the group: records that do not match are
	// settled as filtered. Optional on the wire: absent when empty.
	Filter []byte
}

// Type implements Message.
func (*OpenGroup) Type() Type { return TypeOpenGroup }

// AppendBody implements Message.
func (m *OpenGroup) AppendBody(dst []byte) []byte {
	dst = appendBytes16(dst, m.Stream)
	dst = le.AppendUint32(dst, m.Partition)
	dst = appendBytes16(dst, m.Group)
	dst = append(dst, m.Mode, m.StartKind)
	dst = le.AppendUint64(dst, m.StartValue)
	if len(m.Filter) > 0 {
		dst = appendBytes16(dst, m.Filter)
	}
	return dst
}

// DecodeOpenGroup decodes an OpenGroup body; Stream and Group alias it.
// A start kind this version does not define is malformed: the group's
// start is fixed at creation, so a guess could never be undone.
func DecodeOpenGroup(body []byte) (OpenGroup, error) {
	r := reader{buf: body, what: "OpenGroup"}
	m := OpenGroup{Stream: r.bytes16("stream"), Partition: r.u32("partition"), Group: r.bytes16("group"),
		Mode: r.u8("mode"), StartKind: r.u8("start kind"), StartValue: r.u64("start value")}
	m.Filter = r.optionalBytes16("filter")
	if err := r.done(); err != nil {
		return m, err
	}
	if m.StartKind > StartTime {
		return m, fmt.Errorf("%w: OpenGroup: start kind %d", ErrMalformed, m.StartKind)
	}
	return m, nil
}

// GroupInfo answers OpenGroup (S→C): the group's mode and its committed
// cursor (every offset below it is done).
type GroupInfo struct {
	Mode      uint8
	Committed uint64
}

// Type implements Message.
func (*GroupInfo) Type() Type { return TypeGroupInfo }

// AppendBody implements Message.
func (m *GroupInfo) AppendBody(dst []byte) []byte {
	dst = append(dst, m.Mode)
	return le.AppendUint64(dst, m.Committed)
}

// DecodeGroupInfo decodes a GroupInfo body.
func DecodeGroupInfo(body []byte) (GroupInfo, error) {
	r := reader{buf: body, what: "GroupInfo"}
	m := GroupInfo{Mode: r.u8("mode"), Committed: r.u64("committed")}
	return m, r.done()
}
