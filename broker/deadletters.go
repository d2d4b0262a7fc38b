package broker

import (
	"context"
	"fmt"
	"path"
	"strings"
	"sync"

	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/segment"
)

// Dead-letter queues. Each stream's queue is a log named like the stream
// in a data directory of its own, <data-dir>/deadletters, so no user
// stream name can ever collide with a queue and a queue needs no name
// longer than its stream's. To readers a queue is the stream
// ".dlq.<stream>": user stream names cannot start with '.', so that name
// too is free, and it is read-only (only the broker appends to it).
const (
	deadLetterDirName = "deadletters"
	deadLetterPrefix  = ".dlq."
)

// deadLetterSource returns the source stream of a name that addresses a
// dead-letter queue.
func deadLetterSource(stream string) (string, bool) {
	return strings.CutPrefix(stream, deadLetterPrefix)
}

// deadLetterStore opens the dead-letter directory and its logs lazily: a
// broker whose groups never dead-letter anything never creates them.
type deadLetterStore struct {
	mu     sync.Mutex
	dir    *segment.Dir
	logs   map[string]*segment.Log
	closed bool
}

// deadLetterLog returns the dead-letter log of stream, opening the
// directory and the log on first use. A queue counts against MaxStreams:
// it holds staging buffers like any log.
func (b *Broker) deadLetterLog(stream string) (*segment.Log, error) {
	if err := segment.ValidateStreamName(stream); err != nil {
		return nil, err
	}
	store := &b.deadLetters
	store.mu.Lock()
	defer store.mu.Unlock()
	if l, ok := store.logs[stream]; ok {
		return l, nil
	}
	if store.closed {
		return nil, segment.ErrClosed
	}
	if int(b.openLogs.Load())+len(store.logs) >= b.cfg.MaxStreams {
		return nil, fmt.Errorf("%w: the dead-letter queue of stream %s was not opened: the broker serves at most %d streams, queues included (serve --max-streams)",
			ErrBusy, stream, b.cfg.MaxStreams)
	}
	if store.dir == nil {
		dir, err := segment.Open(b.cfg.FS, path.Join(b.cfg.DataDir, deadLetterDirName), b.cfg.Storage)
		if err != nil {
			return nil, fmt.Errorf("broker: dead-letter directory: %w", err)
		}
		store.dir, store.logs = dir, map[string]*segment.Log{}
	}
	l, err := store.dir.OpenLog(segment.LogID{Stream: stream})
	if err != nil {
		return nil, fmt.Errorf("broker: dead-letter queue of stream %s: %w", stream, err)
	}
	store.logs[stream] = l
	b.openDeadLetters.Add(1)
	b.cfg.Logger.Info("dead-letter queue opened", "stream", stream)
	return l, nil
}

// close closes the dead-letter directory (a final sync of every queue).
func (s *deadLetterStore) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.dir == nil {
		return nil
	}
	return s.dir.Close()
}

// deadLetterReadLog returns the log a name ".dlq.<stream>" reads: the
// queue exists while its stream does (ErrNoSuchStream otherwise), and has
// one partition.
func (b *Broker) deadLetterReadLog(source string, partition uint32) (*segment.Log, error) {
	if _, ok := b.existingStream(source); !ok {
		if err := segment.ValidateStreamName(source); err != nil {
			return nil, withKind(ErrInvalidName, err)
		}
		return nil, fmt.Errorf("%w %q, so it has no dead-letter queue %s%s", ErrNoSuchStream, source, deadLetterPrefix, source)
	}
	if partition != 0 {
		return nil, fmt.Errorf("%w: dead-letter queue %s%s has one partition (0); partition %d does not exist", ErrNoSuchPartition, deadLetterPrefix, source, partition)
	}
	if b.draining.Load() {
		return nil, ErrShuttingDown
	}
	l, err := b.deadLetterLog(source)
	if err != nil {
		return nil, storageError(err)
	}
	return l, nil
}

// streamQueue is one stream's dead-letter queue as its groups see it
// (consumer.DeadLetters). The log opens on first use, so a failure to
// open it (disk full, stream limit) only delays a move: the group
// retries it, and the record is never delivered again meanwhile.
type streamQueue struct {
	broker *Broker
	stream string

	mu    sync.Mutex
	queue *consumer.LogDeadLetters
}

var _ consumer.DeadLetters = (*streamQueue)(nil)

func (q *streamQueue) open() (*consumer.LogDeadLetters, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queue != nil {
		return q.queue, nil
	}
	l, err := q.broker.deadLetterLog(q.stream)
	if err != nil {
		return nil, err
	}
	q.queue = consumer.NewLogDeadLetters(l)
	return q.queue, nil
}

// End implements consumer.DeadLetters. A queue that cannot open yet
// answers 0, which is at or below any offset a later append gets.
func (q *streamQueue) End() uint64 {
	queue, err := q.open()
	if err != nil {
		return 0
	}
	return queue.End()
}

// Append implements consumer.DeadLetters.
func (q *streamQueue) Append(ctx context.Context, letter consumer.DeadLetter) error {
	queue, err := q.open()
	if err != nil {
		return err
	}
	// A queue counts in the disk budget: over it, the move waits (the
	// group retries it) like on a full disk.
	if err := q.broker.admitRecords(len(letter.Body), true); err != nil {
		return err
	}
	return queue.Append(ctx, letter)
}

// Find implements consumer.DeadLetters.
func (q *streamQueue) Find(from uint64, group string, partition uint32, source uint64) (bool, error) {
	queue, err := q.open()
	if err != nil {
		return false, err
	}
	return queue.Find(from, group, partition, source)
}
