package broker

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/segment"
)

// Group is one partition's consumer group as the broker serves it: the
// group (package consumer: leases, cursors, reads), the log it reads, and
// the wakeup long polls wait on for what time alone cannot predict (an
// ack freeing a credit or a key, a member leaving). A group name over a
// stream of n partitions is n Groups; partition 0's holds what they share
// (rotation, streaming assignment).
type Group struct {
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

// GroupSpec is what a request says about the group it names: its type,
// where it starts should the request create it, and its subject filter.
type GroupSpec struct {
	Type  consumer.Type
	Start consumer.StartPosition
	// Filter is the subject pattern the request fixes for the group; ""
	// asks for none and accepts whatever filter the group has.
	Filter string
}

// AllPartitions names every partition of a stream in OpenGroups.
const AllPartitions = ^uint32(0)

// loadedGroup returns a group this broker opened since it started, or
// nil. Leases live only in open groups, so an operation on a lease of a
// group that is not open has nothing to act on.
func (b *Broker) loadedGroup(stream []byte, partition uint32, name []byte) *Group {
	b.groupsMu.Lock()
	served := b.groups[groupKey{stream: string(stream), partition: partition, group: string(name)}]
	b.groupsMu.Unlock()
	if served != nil {
		served.touch(b.retention.clock.Elapsed())
	}
	return served
}

// LoadedGroup returns a group the broker has open, without opening it:
// nil when it is not open (then no lease of it exists). A name that is
// no stream's (or a partition it does not have) is ErrNoSuchStream (or
// ErrNoSuchPartition): nothing is created.
func (b *Broker) LoadedGroup(stream []byte, partition uint32, name []byte) (*Group, error) {
	if served := b.loadedGroup(stream, partition, name); served != nil {
		return served, nil
	}
	if _, err := b.readLog(stream, partition); err != nil {
		return nil, err
	}
	return nil, nil
}

// OpenGroups returns the groups a request names: the one of its
// partition, or with AllPartitions one per partition of the stream, in
// partition order (a group over a multi-partition stream is one group
// name with one consumer.Group per partition). A group is loaded from its
// checkpoint or created with spec; the stream must exist (ErrNoSuchStream:
// opening a group never creates a stream). ".dlq.<stream>" reads the
// stream's dead-letter queue. A group created here has its creation
// written in the background: Group.Created says when it is on disk.
func (b *Broker) OpenGroups(stream []byte, partition uint32, name []byte, spec GroupSpec) ([]*Group, error) {
	if partition != AllPartitions {
		served, err := b.OpenGroup(stream, partition, name, spec)
		if err != nil {
			return nil, err
		}
		return []*Group{served}, nil
	}
	count, err := b.partitionCount(stream)
	if err != nil {
		return nil, err
	}
	groups := make([]*Group, 0, count)
	for p := range count {
		served, err := b.OpenGroup(stream, p, name, spec)
		if err != nil {
			return nil, err
		}
		groups = append(groups, served)
	}
	return groups, nil
}

// OpenGroup returns a stream partition's group, loading it (from its
// checkpoint) or creating it with spec on first use. A group that exists
// with another type or filter is ErrGroupMismatch with both named.
func (b *Broker) OpenGroup(stream []byte, partition uint32, name []byte, spec GroupSpec) (*Group, error) {
	if served := b.loadedGroup(stream, partition, name); served != nil {
		return served, checkGroup(served, spec)
	}
	l, err := b.readLog(stream, partition)
	if err != nil {
		return nil, err
	}
	key := groupKey{stream: string(stream), partition: partition, group: string(name)}
	b.groupsMu.Lock()
	defer b.groupsMu.Unlock()
	if served, ok := b.groups[key]; ok {
		return served, checkGroup(served, spec)
	}
	if len(b.groups) >= b.cfg.MaxGroups {
		return nil, fmt.Errorf("%w: the broker serves at most %d consumer groups (serve --max-groups); group %q was not opened", ErrBusy, b.cfg.MaxGroups, key.group)
	}
	opts := consumer.Options{Type: spec.Type, Start: spec.Start, Filter: spec.Filter, Visibility: b.cfg.Visibility,
		MaxInFlight: b.cfg.MaxInFlight, MaxUnsettled: b.cfg.MaxUnsettled, MaxDeliver: b.cfg.MaxDeliver,
		CheckpointDue: b.nudgeCheckpoints, CreateInBackground: true}
	// A dead-letter queue has no queue of its own: its records are never
	// moved again (and without a queue, never dropped either).
	if _, internal := deadLetterSource(key.stream); !internal {
		opts.DeadLetters = &streamQueue{broker: b, stream: key.stream}
	}
	g, err := consumer.Open(l, key.group, opts)
	if err != nil {
		return nil, consumerError(err)
	}
	served := &Group{group: g, log: l, key: key}
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
func checkGroup(served *Group, spec GroupSpec) error {
	if have := served.group.Type(); have != spec.Type {
		return fmt.Errorf("%w: group %q of stream %q is a %s group; the request asked for %s (a group's type is fixed when it is created)",
			ErrGroupMismatch, served.key.group, served.key.stream, have, spec.Type)
	}
	if have := served.group.Filter(); spec.Filter != "" && have != spec.Filter {
		return fmt.Errorf("%w: group %q of stream %q has subject filter %s; the request asked for filter %q (a group's filter is fixed when it is created)",
			ErrGroupMismatch, served.key.group, served.key.stream, describeFilter(have), spec.Filter)
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

// String names a group for logs.
func (k groupKey) String() string { return fmt.Sprintf("%s/%d/%s", k.stream, k.partition, k.group) }

// Stream is the name of the group's stream (".dlq.<stream>" for a
// dead-letter queue's).
func (g *Group) Stream() string { return g.key.stream }

// Partition is the partition the group reads.
func (g *Group) Partition() uint32 { return g.key.partition }

// Name is the group's name.
func (g *Group) Name() string { return g.key.group }

// Type is the group's type, fixed when it was created.
func (g *Group) Type() consumer.Type { return g.group.Type() }

// Consumer is the group itself: fetch and read records, settle leases,
// move the cursor. Closing and deleting it are the engine's (DeleteGroup,
// RemoveStream); an adapter never calls them.
func (g *Group) Consumer() *consumer.Group { return g.group }

// Log is the log the group reads: its committed end and the channel that
// closes when it moves (CommittedChange), for long polls.
func (g *Group) Log() *segment.Log { return g.log }

// Changed returns a channel closed by the next Notify. Take it before
// looking at the group, so a change in between is not missed.
func (g *Group) Changed() <-chan struct{} { return g.wake.channel() }

// Notify wakes every waiter on Changed: call it after an operation that
// frees a credit or a key (an ack, a nack, a reset), or a member change.
func (g *Group) Notify() { g.wake.notify() }

// Created returns once the group's first checkpoint is on disk: a group
// delivers nothing a power cut could leave it without (such as the offset
// a "latest" start resolved to).
func (g *Group) Created() <-chan struct{} { return g.group.Created() }

// Release removes a connection from the group's members: its leases and
// keys go to the other members at once, a streaming group keeps its last
// commit, and waiters are woken.
func (g *Group) Release(member uint64) {
	g.group.Release(member)
	if g.group.Type() == consumer.TypeStreaming {
		_ = g.group.Checkpoint() // a clean disconnect keeps its last commit
	}
	g.wake.notify()
}

// Rotation returns where a fetch over all count partitions of the group
// starts, a different partition each time, so a busy partition cannot
// starve the others. Kept on partition 0's Group.
func (g *Group) Rotation(count int) int { return g.span.start(count) }

// JoinAssignment adds member to the streaming members sharing every
// partition (kept on partition 0's Group); it reports whether the member
// is new.
func (g *Group) JoinAssignment(member uint64) bool { return g.span.join(member) }

// LeaveAssignment removes member from the streaming members: its
// partitions go to the others.
func (g *Group) LeaveAssignment(member uint64) { g.span.leave(member) }

// Assigned returns the partitions out of count that member reads now,
// ascending, and those it gained since it last asked (read them from the
// group's committed position there).
func (g *Group) Assigned(member uint64, count uint32) (partitions, gained []uint32) {
	return g.span.assigned(member, count)
}
