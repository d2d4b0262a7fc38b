package datadir

import (
	"context"
	"fmt"
	"log/slog"
	"path"

	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// DeadLetters returns the path of root's dead-letter queues (a data
// directory of their own) and whether the broker ever created it.
func DeadLetters(fsys vfs.FS, root string) (string, bool) {
	queues := path.Join(root, DeadLetterDirName)
	_, err := fsys.Stat(path.Join(queues, "FORMAT"))
	return queues, err == nil
}

// OpenReadOnly opens a data directory's logs read-only: segment.Open then
// creates, truncates and quarantines nothing, and takes the lock shared,
// so it fails with segment.ErrLocked while a broker holds it. enc, when
// set, opens encrypted records (and must be the directory's key ring).
func OpenReadOnly(fsys vfs.FS, root string, logger *slog.Logger, enc segment.Encryption) (*segment.Dir, error) {
	return segment.Open(fsys, root, segment.Options{ReadOnly: true, Logger: logger, Encryption: enc})
}

// DeadLetterQueue is one stream's dead-letter queue as its log holds it.
type DeadLetterQueue struct {
	Stream string
	// First is the lowest offset the queue still holds, End one past the
	// last committed.
	First, End uint64
}

// DeadLetterQueues lists the dead-letter queues of a stopped broker's
// directory, read-only. A directory the broker never dead-lettered in has
// none, once it is a data directory at all.
func DeadLetterQueues(fsys vfs.FS, root string, logger *slog.Logger) ([]DeadLetterQueue, error) {
	queues, exists := DeadLetters(fsys, root)
	if !exists {
		dir, err := OpenReadOnly(fsys, root, logger, nil)
		if err != nil {
			return nil, err
		}
		return nil, dir.Close()
	}
	dir, err := OpenReadOnly(fsys, queues, logger, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = dir.Close() }()
	ids, err := dir.Logs()
	if err != nil {
		return nil, fmt.Errorf("datadir: listing the queues in %s: %w", queues, err)
	}
	var out []DeadLetterQueue
	for _, id := range ids {
		log, err := dir.OpenLog(id)
		if err != nil {
			return nil, fmt.Errorf("datadir: opening queue %s: %w", id.String(), err)
		}
		out = append(out, DeadLetterQueue{Stream: id.Stream, First: log.FirstOffset(), End: log.Committed()})
	}
	return out, nil
}

// Redrive republishes up to maxLetters (0: all) of a stream's dead letters
// to it, under the exclusive locks of the directory and of its
// dead-letter queues: the crash-safe rounds of consumer.Redrive, which
// the broker runs too. It returns the round's result and the queue after
// it; a directory without dead-letter queues is ErrNoSuchLog.
func Redrive(ctx context.Context, fsys vfs.FS, root, stream string, maxLetters int, logger *slog.Logger) (consumer.RedriveResult, DeadLetterQueue, error) {
	var result consumer.RedriveResult
	queue := DeadLetterQueue{Stream: stream}
	queuesPath, exists := DeadLetters(fsys, root)
	if !exists {
		return result, queue, fmt.Errorf("%w: %s holds no dead-letter queues", ErrNoSuchLog, root)
	}
	streams, err := segment.Open(fsys, root, segment.Options{Logger: logger})
	if err != nil {
		return result, queue, err
	}
	defer func() { _ = streams.Close() }()
	queues, err := segment.Open(fsys, queuesPath, segment.Options{Logger: logger})
	if err != nil {
		return result, queue, err
	}
	defer func() { _ = queues.Close() }()
	letters, err := queues.OpenLog(segment.LogID{Stream: stream})
	if err != nil {
		return result, queue, fmt.Errorf("datadir: opening the dead-letter queue of %s: %w", stream, err)
	}
	target := func(partition uint32) (*segment.Log, error) {
		return streams.OpenLog(segment.LogID{Stream: stream, Partition: partition})
	}
	result, err = consumer.Redrive(ctx, letters, target, maxLetters)
	if err != nil {
		return result, queue, fmt.Errorf("datadir: redriving %s: %w", stream, err)
	}
	queue.First, queue.End = letters.FirstOffset(), letters.Committed()
	return result, queue, nil
}
