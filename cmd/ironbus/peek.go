package main

import (
	"bufio"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/segment"
)

func newPeekCmd(opts *globalOptions) *cobra.Command {
	read := &readOptions{}
	cmd := &cobra.Command{
		Use:   "peek --data-dir DIR",
		Short: "Show a few records of a log, read-only",
		Long: `Show records of one log (a partition of a stream), one line each:

  #<offset> <time> key=<key> subject=<subject> headers={<name>=<value> ...} <size>B payload=<payload>

The time is the broker's wall clock when it stored the record (UTC,
RFC 3339). A payload is shown as text when it is printable UTF-8 (quoted if
it spans lines), otherwise as base64: followed by its base64 encoding. A
compressed payload is shown decompressed, after codec=<lz4|zstd> and
stored=<bytes on disk>B; one that does not decompress is shown as its stored
bytes in base64 with the reason. Offsets the log
does not hold (removed by retention, or lost to damage that recovery
reported) appear as one line: gap <first>..<last> (<reason>).

peek opens the data directory read-only with a shared lock and changes
nothing. --limit counts records, not gaps. If a record cannot be read, the
records before it are printed and peek exits with code 4.

With --json it prints the same NDJSON lines as ironbus dump.`,
		Example: `  # the first 10 records of the default stream
  ironbus peek --data-dir /var/lib/ironbus

  # 3 records of partition 2 of "orders" from offset 1000
  ironbus peek --data-dir /var/lib/ironbus --stream orders --partition 2 --from 1000 --limit 3`,
		Args: cobra.NoArgs,
	}
	addReadFlags(cmd, read, 10, "most records to show (0: every record to the end of the log)")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print NDJSON lines, as ironbus dump does")
	cmd.RunE = classified(func() error {
		if err := read.validate(); err != nil {
			return err
		}
		if opts.json {
			return writeEntryLines(opts, read)
		}
		return peekHuman(opts, read)
	})
	return cmd
}

func peekHuman(opts *globalOptions, read *readOptions) error {
	out := bufio.NewWriter(opts.stdout)
	decompressor := newReadDecompressor()
	summary, readErr := readEntries(opts, read, func(entry segment.Entry) error {
		_, err := fmt.Fprintln(out, humanEntry(entry, decompressor))
		return err
	})
	if readErr == nil && summary.Records == 0 {
		// An empty answer is easy to misread as a broken log; say what
		// the log does hold.
		fmt.Fprintf(out, "(no records at or after offset %d; the log holds %s)\n",
			read.from, offsetRange(summary.First, summary.End))
	}
	if err := out.Flush(); err != nil && readErr == nil {
		return err
	}
	return readErr
}
