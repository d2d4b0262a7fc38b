package main

import (
	"bufio"
	"errors"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/datadir"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// readOptions are the flags of the commands that read records.
type readOptions struct {
	logSelection
	from    uint64
	limit   int
	keyFile string
}

func addReadFlags(cmd *cobra.Command, read *readOptions, defaultLimit int, limitHelp string) {
	addLogFlags(cmd, &read.logSelection)
	cmd.Flags().Uint64Var(&read.from, "from", 0, "first offset to read; offsets below the log's first are reported as a gap")
	cmd.Flags().IntVar(&read.limit, "limit", defaultLimit, limitHelp)
	addKeyFileFlag(cmd, &read.keyFile)
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

// readEntries reads the selected log (datadir.Read), handing visit each
// entry from read.from on, up to read.limit records. Entries already
// visited stay printed when a later read fails, so the operator sees
// exactly how far the log is readable; an error of visit is returned as
// it is.
func readEntries(opts *globalOptions, read *readOptions, visit func(segment.Entry) error) (datadir.ReadSummary, error) {
	var visitErr error
	id := read.logID()
	ring, err := loadKeyRing(read.keyFile)
	if err != nil {
		return datadir.ReadSummary{}, err
	}
	summary, err := datadir.Read(vfs.OS{}, read.dataDir, id, read.from, read.limit, opts.logger(), ring, func(entry segment.Entry) error {
		visitErr = visit(entry)
		return visitErr
	})
	switch {
	case err == nil || err == visitErr:
		return summary, err
	case errors.Is(err, datadir.ErrNoSuchLog):
		return summary, openLogError(read.dataDir, id, err)
	}
	return summary, openOfflineError(read.dataDir, datadir.Recovery{}, err)
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
