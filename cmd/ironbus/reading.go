package main

import (
	"bufio"
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/segment"
)

// readOptions are the flags of the commands that read records.
type readOptions struct {
	logSelection
	from  uint64
	limit int
}

func addReadFlags(cmd *cobra.Command, read *readOptions, defaultLimit int, limitHelp string) {
	addLogFlags(cmd, &read.logSelection)
	cmd.Flags().Uint64Var(&read.from, "from", 0, "first offset to read; offsets below the log's first are reported as a gap")
	cmd.Flags().IntVar(&read.limit, "limit", defaultLimit, limitHelp)
}

func (read *readOptions) validate() error {
	if err := read.logSelection.validate(); err != nil {
		return err
	}
	if read.limit < 0 {
		return exitErrorf(exitUsage, "--limit must be 0 or more, not %d", read.limit)
	}
	return nil
}

// readSummary is what a read saw, for the messages around the records.
type readSummary struct {
	records     int
	firstOffset uint64 // the lowest offset the log holds
	committed   uint64 // one past the last committed offset
}

// readEntries opens the selected log read-only and hands visit each entry
// from read.from on, until the committed end or read.limit records (0: no
// limit). Gaps are handed on but not counted: a limit asks for records.
// Entries already visited stay printed when a later read fails, so the
// operator sees exactly how far the log is readable.
func readEntries(opts *globalOptions, read *readOptions, visit func(segment.Entry) error) (readSummary, error) {
	var summary readSummary
	dir, err := openDataDir(opts, read.dataDir)
	if err != nil {
		return summary, err
	}
	// A read-only directory has nothing to flush; Close only unlocks.
	defer func() { _ = dir.Close() }()
	id := read.logID()
	log, err := dir.OpenLog(id)
	if err != nil {
		return summary, openLogError(read.dataDir, id, err)
	}
	// A log frozen for damage still serves its valid records, but one
	// frozen because its files are newer than this binary (a downgrade) or
	// do not form one log would read as empty: say why instead.
	if frozen := log.Err(); errors.Is(frozen, segment.ErrTooNew) || errors.Is(frozen, segment.ErrInconsistent) {
		return summary, exitErrorf(exitUnreadable, "log %s cannot be read: %w", id.String(), frozen)
	}
	summary.firstOffset, summary.committed = log.FirstOffset(), log.Committed()
	reader := log.NewReader(read.from)
	defer reader.Close()
	for read.limit == 0 || summary.records < read.limit {
		entry, err := reader.Next()
		if errors.Is(err, io.EOF) {
			return summary, nil
		}
		if err != nil {
			return summary, exitErrorf(exitUnreadable, "reading log %s at offset %d: %w", id.String(), reader.Offset(), err)
		}
		if entry.Gap == nil {
			summary.records++
		}
		if err := visit(entry); err != nil {
			return summary, err
		}
	}
	return summary, nil
}

// writeEntryLines streams entries as NDJSON through a buffer, flushing
// before it returns so a failure is reported after the lines read.
func writeEntryLines(opts *globalOptions, read *readOptions) error {
	out := bufio.NewWriter(opts.stdout)
	decompressor := newReadDecompressor()
	_, readErr := readEntries(opts, read, func(entry segment.Entry) error {
		return writeJSON(out, entryOutput(entry, decompressor))
	})
	if err := out.Flush(); err != nil && readErr == nil {
		return err
	}
	return readErr
}
