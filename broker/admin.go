package broker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/segment"
)

// Group and dead-letter administration. These touch checkpoint files and
// wait for durable appends: an adapter calls them off its connection's
// reader. None of them creates a stream.

// GroupState is one partition's group as administration shows it: its
// summary (live when the broker has it open, else its checkpoint's) and
// the partition's committed end.
type GroupState struct {
	Stream    string
	Partition uint32
	Summary   consumer.Summary
	LogEnd    uint64
}

// GroupInfo describes one group of a stream partition.
func (b *Broker) GroupInfo(stream string, partition uint32, group string) (GroupState, error) {
	return b.adminGroup(stream, partition, group, b.groupSummary)
}

// ResetGroup moves a group's cursor to start, loading the group first
// (with the type its checkpoint records) when the broker does not have it
// open. ErrGroupActive while it has live members.
func (b *Broker) ResetGroup(stream string, partition uint32, group string, start consumer.StartPosition) (GroupState, error) {
	return b.adminGroup(stream, partition, group, func(l *segment.Log, key groupKey) (consumer.Summary, error) {
		return b.resetGroup(l, key, start)
	})
}

// DeleteGroup removes a group and its checkpoint. ErrGroupActive while it
// has live members.
func (b *Broker) DeleteGroup(stream string, partition uint32, group string) (GroupState, error) {
	return b.adminGroup(stream, partition, group, b.deleteGroup)
}

// adminGroup runs one operation on a group of an existing stream partition.
func (b *Broker) adminGroup(stream string, partition uint32, group string,
	operate func(*segment.Log, groupKey) (consumer.Summary, error)) (GroupState, error) {
	l, err := b.readLog([]byte(stream), partition)
	if err != nil {
		return GroupState{}, err
	}
	key := groupKey{stream: stream, partition: partition, group: group}
	summary, err := operate(l, key)
	if err != nil {
		return GroupState{}, adminError(key, err)
	}
	return GroupState{Stream: stream, Partition: partition, Summary: summary, LogEnd: l.Committed()}, nil
}

// ListGroups lists the groups of one stream partition, or of that
// partition of every stream when stream is empty, sorted by name.
func (b *Broker) ListGroups(stream string, partition uint32) ([]GroupState, error) {
	streams := []string{stream}
	if stream == "" {
		streams = streams[:0]
		for _, served := range b.streamList() {
			streams = append(streams, served.settings.Name)
		}
	}
	list := []GroupState{}
	for _, name := range streams {
		l, err := b.readLog([]byte(name), partition)
		if err != nil {
			return nil, err
		}
		summaries, err := consumer.Inspect(l)
		if err != nil {
			return nil, storageError(err)
		}
		for _, summary := range b.liveSummaries(name, partition, summaries) {
			list = append(list, GroupState{Stream: name, Partition: partition, Summary: summary, LogEnd: l.Committed()})
		}
	}
	return list, nil
}

// liveSummaries replaces the checkpointed summary of every group the
// broker has open with its live one, and adds open groups whose first
// checkpoint has not landed yet.
func (b *Broker) liveSummaries(stream string, partition uint32, summaries []consumer.Summary) []consumer.Summary {
	b.groupsMu.Lock()
	defer b.groupsMu.Unlock()
	seen := map[string]bool{}
	for i, summary := range summaries {
		seen[summary.Name] = true
		if served := b.groups[groupKey{stream: stream, partition: partition, group: summary.Name}]; served != nil {
			summaries[i] = served.group.Summary()
		}
	}
	for key, served := range b.groups {
		if key.stream == stream && key.partition == partition && !seen[key.group] {
			summaries = append(summaries, served.group.Summary())
		}
	}
	// sort.Slice: one sort for every element type, where slices.SortFunc
	// links a copy per struct type (docs/PACKAGING.md).
	sort.Slice(summaries, func(i, j int) bool { return summaries[i].Name < summaries[j].Name })
	return summaries
}

// groupSummary returns one group's live summary, or its checkpoint's.
func (b *Broker) groupSummary(l *segment.Log, key groupKey) (consumer.Summary, error) {
	if served := b.loadedGroup([]byte(key.stream), key.partition, []byte(key.group)); served != nil {
		return served.group.Summary(), nil
	}
	return consumer.InspectGroup(l, key.group)
}

// resetGroup moves a group's cursor, loading the group first (with the
// type its checkpoint records) when the broker does not have it open.
func (b *Broker) resetGroup(l *segment.Log, key groupKey, start consumer.StartPosition) (consumer.Summary, error) {
	served := b.loadedGroup([]byte(key.stream), key.partition, []byte(key.group))
	if served == nil {
		summary, err := consumer.InspectGroup(l, key.group)
		if err != nil {
			return summary, err
		}
		if served, err = b.OpenGroup([]byte(key.stream), key.partition, []byte(key.group), GroupSpec{Type: summary.Type}); err != nil {
			return summary, err
		}
	}
	if err := served.group.Reset(start); err != nil {
		return consumer.Summary{}, err
	}
	served.wake.notify()
	return served.group.Summary(), nil
}

// deleteGroup removes a group and its checkpoint. groupsMu is held
// throughout, so no request can open the group between the check and the
// removal and find a half-deleted one.
func (b *Broker) deleteGroup(l *segment.Log, key groupKey) (consumer.Summary, error) {
	b.groupsMu.Lock()
	defer b.groupsMu.Unlock()
	served := b.groups[key]
	if served == nil {
		summary, err := consumer.InspectGroup(l, key.group)
		if err != nil {
			return summary, err
		}
		return summary, consumer.DeleteGroup(l, key.group)
	}
	summary := served.group.Summary()
	if err := served.group.Delete(); err != nil {
		return summary, err
	}
	delete(b.groups, key)
	served.wake.notify()
	return summary, nil
}

// adminError gives what a group admin operation failed with its kind.
func adminError(key groupKey, err error) error {
	if errors.Is(err, consumer.ErrNoGroup) {
		return fmt.Errorf("%w: stream %q partition %d has no group %q", ErrNoSuchGroup, key.stream, key.partition, key.group)
	}
	return consumerError(err)
}

// DeadLetterQueue is one stream's dead-letter queue.
type DeadLetterQueue struct {
	Stream   string // the source stream (the queue reads as ".dlq.<stream>")
	First    uint64 // the first offset the queue still holds
	End      uint64 // the queue's committed end
	Redriven uint64 // every dead letter below it has been redriven
}

// DeadLetterQueues describes one stream's queue, or every queue the
// dead-letter directory holds when stream is empty.
func (b *Broker) DeadLetterQueues(stream string) ([]DeadLetterQueue, error) {
	streams := []string{stream}
	if stream == "" {
		var err error
		if streams, err = b.deadLetterStreams(); err != nil {
			return nil, storageError(err)
		}
	} else if _, err := b.readLog([]byte(stream), 0); err != nil {
		return nil, err
	}
	queues := []DeadLetterQueue{}
	for _, name := range streams {
		queue, err := b.deadLetterLog(name)
		if err != nil {
			return nil, storageError(err)
		}
		mark, err := consumer.RedriveMark(queue)
		if err != nil {
			return nil, storageError(err)
		}
		queues = append(queues, DeadLetterQueue{Stream: name, First: queue.FirstOffset(), End: queue.Committed(), Redriven: mark})
	}
	return queues, nil
}

// deadLetterStreams lists the streams with a queue on disk, without
// creating the dead-letter directory when there is none.
func (b *Broker) deadLetterStreams() ([]string, error) {
	if _, err := b.cfg.FS.Stat(path.Join(b.cfg.DataDir, deadLetterDirName)); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	store := &b.deadLetters
	store.mu.Lock()
	dir := store.dir
	store.mu.Unlock()
	if dir == nil {
		return b.deadLetterStreamsOnDisk()
	}
	ids, err := dir.Logs()
	if err != nil {
		return nil, err
	}
	streams := make([]string, 0, len(ids))
	for _, id := range ids {
		streams = append(streams, id.Stream)
	}
	return streams, nil
}

// deadLetterStreamsOnDisk lists the queues of a dead-letter directory this
// broker has not opened yet (queues left by an earlier run): each stream
// is a directory under streams/.
func (b *Broker) deadLetterStreamsOnDisk() ([]string, error) {
	names, err := b.cfg.FS.List(path.Join(b.cfg.DataDir, deadLetterDirName, "streams"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return names, err
}

// Redrive republishes up to maxLetters of a stream's dead letters
// (consumer.Redrive) and returns what it did and the queue after it.
// Redrives run one at a time: two at once would read the same mark and
// both republish.
func (b *Broker) Redrive(ctx context.Context, stream string, maxLetters int) (consumer.RedriveResult, DeadLetterQueue, error) {
	if stream == "" {
		return consumer.RedriveResult{}, DeadLetterQueue{}, fmt.Errorf("%w: a redrive names its stream", ErrInvalidArgument)
	}
	if _, err := b.readLog([]byte(stream), 0); err != nil || strings.HasPrefix(stream, ".") {
		return consumer.RedriveResult{}, DeadLetterQueue{}, fmt.Errorf("%w %q, so it has no dead letters to redrive", ErrNoSuchStream, stream)
	}
	queue, err := b.deadLetterLog(stream)
	if err != nil {
		return consumer.RedriveResult{}, DeadLetterQueue{}, storageError(err)
	}
	target := func(partition uint32) (*segment.Log, error) { return b.readLog([]byte(stream), partition) }
	// Republished letters are new records: a used-up budget refuses the
	// redrive before it starts (what one redrive adds is not known ahead).
	if err := b.admitRecords(0, false); err != nil {
		return consumer.RedriveResult{}, DeadLetterQueue{}, storageError(err)
	}
	b.redriveMu.Lock()
	result, err := consumer.Redrive(ctx, queue, target, maxLetters)
	b.redriveMu.Unlock()
	if err != nil {
		return consumer.RedriveResult{}, DeadLetterQueue{}, consumerError(err)
	}
	b.cfg.Logger.Info("dead letters redriven", "stream", stream, "republished", result.Republished, "skipped", result.Skipped, "mark", result.Mark)
	return result, DeadLetterQueue{Stream: stream, First: queue.FirstOffset(), End: queue.Committed(), Redriven: result.Mark}, nil
}
