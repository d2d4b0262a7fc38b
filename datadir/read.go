package datadir

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// ReadSummary is what a Read saw.
type ReadSummary struct {
	Records int
	// First is the lowest offset the log holds, End one past the last
	// committed.
	First, End uint64
}

// Read opens one log of a stopped broker's directory read-only and hands
// visit each entry from offset from on, until the committed end or limit
// records (0: no limit). Gaps are handed on but not counted: a limit asks
// for records. A missing log is ErrNoSuchLog; a log frozen because its
// files are from a newer binary or do not form one log is refused
// (it would read as empty). An error of visit ends the read and is
// returned as it is.
func Read(fsys vfs.FS, root string, id segment.LogID, from uint64, limit int, logger *slog.Logger,
	enc segment.Encryption, visit func(segment.Entry) error) (ReadSummary, error) {
	var summary ReadSummary
	dir, err := OpenReadOnly(fsys, root, logger, enc)
	if err != nil {
		return summary, err
	}
	// A read-only directory has nothing to flush; Close only unlocks.
	defer func() { _ = dir.Close() }()
	log, err := dir.OpenLog(id)
	if errors.Is(err, segment.ErrNotFound) {
		return summary, fmt.Errorf("%w: %s in %s: %w", ErrNoSuchLog, id.String(), root, err)
	}
	if err != nil {
		return summary, fmt.Errorf("datadir: cannot open log %s: %w", id.String(), err)
	}
	if frozen := log.Err(); errors.Is(frozen, segment.ErrTooNew) || errors.Is(frozen, segment.ErrInconsistent) {
		return summary, fmt.Errorf("datadir: log %s cannot be read: %w", id.String(), frozen)
	}
	summary.First, summary.End = log.FirstOffset(), log.Committed()
	reader := log.NewReader(from)
	defer reader.Close()
	for limit == 0 || summary.Records < limit {
		entry, err := reader.Next()
		if errors.Is(err, io.EOF) {
			return summary, nil
		}
		if err != nil {
			return summary, fmt.Errorf("datadir: reading log %s at offset %d: %w", id.String(), reader.Offset(), err)
		}
		if entry.Gap == nil {
			summary.Records++
		}
		if err := visit(entry); err != nil {
			return summary, err
		}
	}
	return summary, nil
}
