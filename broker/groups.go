package broker

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/wire"
)

// servedGroup is a consumer group as the broker serves it: the group, the
// log it reads, and the wakeup long polls wait on for what time alone
// cannot predict (an ack freeing a credit or a key, a member leaving).
type servedGroup struct {
	group *consumer.Group
	log   *segment.Log
	key   groupKey
	wake  wakeup
	// lastActive is the monotonic time of the group's last request, for
	// group expiry (retention_pass.go).
	lastActive atomic.Int64
	// span is the state a group shares across its stream's partitions
	// (rotation, streaming assignment); only partition 0's is used, so
	// every partition of one group name agrees on it.
	span spanState
}

// wakeup wakes every waiter at once. The channel is made only when
// someone waits, so notifying a group nobody waits on costs a lock and
// nothing else (acks are a hot path; long polls are not).
type wakeup struct {
	mu sync.Mutex
	ch chan struct{}
}

// channel returns a channel closed by the next notify. Take it before
// looking at the group, so a change in between is not missed.
func (w *wakeup) channel() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

// notify wakes every waiter.
func (w *wakeup) notify() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
}

// groupSpec is what a request says about the group it names: its type,
// and where it starts should the request create it.
type groupSpec struct {
	kind  consumer.Type
	start consumer.StartPosition
	// filter is the subject pattern the request fixes for the group; ""
	// asks for none and accepts whatever filter the group has.
	filter string
}

// modeType maps a wire consume mode to a group type.
func modeType(mode uint8) (consumer.Type, bool) {
	switch mode {
	case wire.ModeWork:
		return consumer.TypeWork, true
	case wire.ModeKeyShared:
		return consumer.TypeKeyShared, true
	case wire.ModeBroadcast:
		return consumer.TypeBroadcast, true
	case wire.ModeStreaming:
		return consumer.TypeStreaming, true
	}
	return 0, false
}

// typeMode maps a group type to its wire consume mode (the numbers agree).
func typeMode(kind consumer.Type) uint8 { return uint8(kind) }

// startPosition maps OpenGroup's start fields to a group start. A time
// too far in the future for nanoseconds means "after every record".
func startPosition(kind uint8, value uint64) consumer.StartPosition {
	switch kind {
	case wire.StartLatest:
		return consumer.StartPosition{Kind: consumer.StartLatest}
	case wire.StartOffset:
		return consumer.StartPosition{Kind: consumer.StartOffset, Offset: value}
	case wire.StartTime:
		nanos := int64(math.MaxInt64)
		if value <= math.MaxInt64/uint64(time.Millisecond) {
			nanos = int64(value) * int64(time.Millisecond)
		}
		return consumer.StartPosition{Kind: consumer.StartTime, Time: nanos}
	}
	return consumer.StartPosition{Kind: consumer.StartEarliest}
}

// loadedGroup returns a group this broker opened since it started, or
// nil. Leases live only in open groups, so an operation on a lease of a
// group that is not open has nothing to act on.
func (b *Broker) loadedGroup(stream []byte, partition uint32, name []byte) *servedGroup {
	b.groupsMu.Lock()
	served := b.groups[groupKey{stream: string(stream), partition: partition, group: string(name)}]
	b.groupsMu.Unlock()
	if served != nil {
		served.touch(b.retention.clock.Elapsed())
	}
	return served
}

// openGroups returns the groups a request names: the one of its
// partition, or with wire.PartitionAll one per partition of the stream, in
// partition order (a group over a multi-partition stream is one group
// name with one consumer.Group per partition).
func (b *Broker) openGroups(stream []byte, partition uint32, name []byte, spec groupSpec) ([]*servedGroup, *wire.Error) {
	if partition != wire.PartitionAll {
		served, werr := b.openGroup(stream, partition, name, spec)
		if werr != nil {
			return nil, werr
		}
		return []*servedGroup{served}, nil
	}
	count, werr := b.partitionCount(stream)
	if werr != nil {
		return nil, werr
	}
	groups := make([]*servedGroup, 0, count)
	for p := range count {
		served, werr := b.openGroup(stream, p, name, spec)
		if werr != nil {
			return nil, werr
		}
		groups = append(groups, served)
	}
	return groups, nil
}

// openGroup returns a stream partition's group, loading it (from its
// checkpoint) or creating it with spec on first use. A group that exists
// with another type is refused with both types named.
func (b *Broker) openGroup(stream []byte, partition uint32, name []byte, spec groupSpec) (*servedGroup, *wire.Error) {
	if served := b.loadedGroup(stream, partition, name); served != nil {
		return served, checkGroup(served, spec)
	}
	l, werr := b.logFor(stream, partition)
	if werr != nil {
		return nil, werr
	}
	key := groupKey{stream: string(stream), partition: partition, group: string(name)}
	b.groupsMu.Lock()
	defer b.groupsMu.Unlock()
	if served, ok := b.groups[key]; ok {
		return served, checkGroup(served, spec)
	}
	if len(b.groups) >= b.cfg.MaxGroups {
		return nil, wire.NewError(wire.CodeBusy, "the broker serves at most %d consumer groups (serve --max-groups); group %q was not opened", b.cfg.MaxGroups, key.group)
	}
	opts := consumer.Options{Type: spec.kind, Start: spec.start, Filter: spec.filter, Visibility: b.cfg.Visibility,
		MaxInFlight: b.cfg.MaxInFlight, MaxUnsettled: b.cfg.MaxUnsettled, MaxDeliver: b.cfg.MaxDeliver,
		CheckpointDue: b.nudgeCheckpoints, CreateInBackground: true}
	// A dead-letter queue has no queue of its own: its records are never
	// moved again (and without a queue, never dropped either).
	if _, internal := deadLetterSource(key.stream); !internal {
		opts.DeadLetters = &streamQueue{broker: b, stream: key.stream}
	}
	g, err := consumer.Open(l, key.group, opts)
	switch {
	case errors.Is(err, consumer.ErrInvalidName):
		return nil, wire.NewError(wire.CodeInvalidName, "%v", err)
	case errors.Is(err, consumer.ErrInvalidFilter):
		return nil, wire.NewError(wire.CodeInvalidRequest, "%v", err)
	case errors.Is(err, consumer.ErrTypeMismatch), errors.Is(err, consumer.ErrFilterMismatch):
		return nil, wire.NewError(wire.CodeGroupModeMismatch, "%v", err)
	case err != nil:
		return nil, storageError(err)
	}
	served := &servedGroup{group: g, log: l, key: key}
	served.touch(b.retention.clock.Elapsed())
	b.groups[key] = served
	select {
	case <-g.Created():
	case <-b.stop:
		_ = g.Checkpoint() // no flusher any more: write it here
	default:
		b.nudgeCheckpoints() // the flusher writes the new group's first checkpoint
	}
	return served, nil
}

// checkGroup refuses a request for another type, or another filter,
// than the group's: both are fixed when the group is created. A request
// without a filter accepts the group's.
func checkGroup(served *servedGroup, spec groupSpec) *wire.Error {
	if have := served.group.Type(); have != spec.kind {
		return wire.NewError(wire.CodeGroupModeMismatch, "group %q of stream %q is a %s group; the request asked for %s (a group's type is fixed when it is created)",
			served.key.group, served.key.stream, have, spec.kind)
	}
	if have := served.group.Filter(); spec.filter != "" && have != spec.filter {
		return wire.NewError(wire.CodeGroupModeMismatch, "group %q of stream %q has subject filter %s; the request asked for filter %q (a group's filter is fixed when it is created)",
			served.key.group, served.key.stream, describeFilter(have), spec.filter)
	}
	return nil
}

// describeFilter names a group's filter in a message.
func describeFilter(pattern string) string {
	if pattern == "" {
		return "none"
	}
	return fmt.Sprintf("%q", pattern)
}

// consumerError maps a group error to a structured wire error.
func consumerError(err error) *wire.Error {
	switch {
	case errors.Is(err, consumer.ErrBroadcastBusy):
		e := wire.NewError(wire.CodeBusy, "%v", err)
		e.RetryAfter = consumeRetryAfter
		return e
	case errors.Is(err, consumer.ErrWrongType):
		return wire.NewError(wire.CodeGroupModeMismatch, "%v", err)
	case errors.Is(err, consumer.ErrClosed):
		return wire.NewError(wire.CodeShuttingDown, "the broker is shutting down")
	case errors.Is(err, consumer.ErrNoDeadLetters):
		return wire.NewError(wire.CodeInvalidRequest, "%v", err)
	}
	return storageError(err)
}

// String names a group for logs.
func (k groupKey) String() string { return fmt.Sprintf("%s/%d/%s", k.stream, k.partition, k.group) }
