package client_test

import (
	"fmt"
	"strings"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/wire"
)

// The fake broker's streams: partition counts and subject bindings, set
// in the configure func. A stream not listed has one partition.

// fakeAck is one Ack frame as received.
type fakeAck struct {
	partition uint32
	entries   int
}

// logKey names the fake log of one partition: the stream itself for
// partition 0, so single-partition tests read b.logs[stream].
func logKey(stream []byte, partition uint32) string {
	if partition == 0 {
		return string(stream)
	}
	return fmt.Sprintf("%s#%d", stream, partition)
}

// logOf returns the log of a partition, nil if it has none; without
// allocating for partition 0 (the allocation benchmarks count the fake).
// b.mu is held.
func (b *fakeBroker) logOf(stream []byte, partition uint32) *fakeLog {
	if partition == 0 || b.discard {
		return b.logs[string(stream)]
	}
	return b.logs[logKey(stream, partition)]
}

// partitionCount is a stream's partition count. b.mu is held.
func (b *fakeBroker) partitionCount(stream []byte) uint32 {
	if n := b.partitions[string(stream)]; n > 0 {
		return n
	}
	return 1
}

// route picks the stream and partition of a Produce, as the real broker
// does: by binding for a subject-routed record, by key hash for
// PartitionAny. b.mu is held.
func (b *fakeBroker) route(m wire.Produce) (stream []byte, partition uint32, werr *wire.Error) {
	stream, partition = m.Stream, m.Partition
	if b.discard {
		return b.routeDiscarding(m)
	}
	body, _ := record.Parse(m.Body)
	if m.Flags&wire.ProduceRouteBySubject != 0 {
		if len(stream) != 0 {
			return nil, 0, wire.NewError(wire.CodeInvalidRequest, "route_by_subject with a stream")
		}
		stream = nil
		for pattern, bound := range b.bindings {
			if fakeMatch(pattern, string(body.Subject)) {
				stream = []byte(bound)
			}
		}
		if stream == nil {
			return nil, 0, wire.NewError(wire.CodeNoRoute, "no binding matches %q", body.Subject)
		}
	}
	count := b.partitionCount(stream)
	switch {
	case partition == wire.PartitionAny && len(body.Key) > 0:
		partition = wire.PartitionForKey(body.Key, count)
	case partition == wire.PartitionAny:
		partition = 0
	case partition >= count:
		return nil, 0, wire.NewError(wire.CodeNotFound, "stream %q has %d partitions", stream, count)
	}
	return stream, partition, nil
}

// routeDiscarding is route for the allocation benchmarks, which must
// measure the client alone: no body decoding, the first binding's stream
// for a routed record, partition 0 for "any". b.mu is held.
func (b *fakeBroker) routeDiscarding(m wire.Produce) ([]byte, uint32, *wire.Error) {
	partition := m.Partition
	if partition == wire.PartitionAny {
		partition = 0
	}
	if m.Flags&wire.ProduceRouteBySubject == 0 {
		return m.Stream, partition, nil
	}
	if b.routed == nil {
		for _, stream := range b.bindings {
			b.routed = []byte(stream)
		}
	}
	return b.routed, partition, nil
}

// consumedPartitions is what a Consume reads: its partition, or all.
// b.mu is held.
func (b *fakeBroker) consumedPartitions(m wire.Consume) []uint32 {
	if m.Partition != wire.PartitionAll {
		return []uint32{m.Partition}
	}
	var all []uint32
	for p := range b.partitionCount(m.Stream) {
		all = append(all, p)
	}
	return all
}

// fakeMatch is the reference matcher: `*` one token, `>` the rest.
func fakeMatch(pattern, subject string) bool {
	if subject == "" {
		return false
	}
	ps, ss := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, p := range ps {
		if p == ">" {
			return len(ss) > i
		}
		if i >= len(ss) || (p != "*" && p != ss[i]) {
			return false
		}
	}
	return len(ps) == len(ss)
}

// matches reports whether a stored body passes a Consume's filter.
func matches(filter []byte, body []byte) bool {
	if len(filter) == 0 {
		return true
	}
	view, err := record.Parse(body)
	return err == nil && fakeMatch(string(filter), string(view.Subject))
}

// openGroup answers OpenGroup for the one group the fake keeps per
// stream, recording the filters asked for.
func (fc *fakeConn) openGroup(f wire.Frame) {
	m, err := wire.DecodeOpenGroup(f.Body)
	if err != nil {
		fc.b.problem("OpenGroup: %v", err)
		return
	}
	if werr := fc.followerRefusal(m.Stream, m.Partition); werr != nil {
		fc.out = wire.Append(fc.out, f.RequestID, werr)
		return
	}
	fc.b.locked(func() { fc.b.groupFilters = append(fc.b.groupFilters, string(m.Filter)) })
	fc.out = wire.Append(fc.out, f.RequestID, &wire.GroupInfo{Mode: m.Mode})
}

// streamAdmin answers StreamAdmin list with the configured bindings (the
// fake knows no other admin operation).
func (fc *fakeConn) streamAdmin(f wire.Frame) {
	if werr := fc.adminRefusal(); werr != nil {
		fc.out = wire.Append(fc.out, f.RequestID, werr)
		return
	}
	m, err := wire.DecodeStreamAdmin(f.Body)
	if err == nil && m.Op == wire.StreamOpInfo {
		fc.streamInfo(f, m)
		return
	}
	if err != nil || m.Op != wire.StreamOpList {
		fc.out = wire.Append(fc.out, f.RequestID, wire.NewError(wire.CodeInvalidRequest, "fake: stream admin op %d", m.Op))
		return
	}
	list := &wire.StreamList{}
	fc.b.locked(func() {
		for pattern, stream := range fc.b.bindings {
			list.Bindings = append(list.Bindings, wire.StreamBinding{Pattern: []byte(pattern), Stream: []byte(stream)})
		}
	})
	fc.out = wire.Append(fc.out, f.RequestID, list)
}
