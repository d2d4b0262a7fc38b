package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/format"
)

// deadLetterRow is one queue in the --json output of dlq ls.
type deadLetterRow struct {
	Stream    string `json:"stream"`
	WireName  string `json:"wire_name"`
	Records   uint64 `json:"records"`
	FirstHeld uint64 `json:"first_offset"`
	End       uint64 `json:"end_offset"`
}

type deadLettersOutput struct {
	Schema    string          `json:"schema"`
	Directory string          `json:"directory"`
	Queues    []deadLetterRow `json:"queues"`
}

func newDeadLetterCmd(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq ls|peek",
		Short: "Show the dead-letter queues (offline)",
		Long: `A record delivered more than max-deliver times (5), rejected by a consumer, or
too large to deliver moves to its stream's dead-letter queue, with headers
naming the group, the source offset, the attempts and the reason. The queue
of stream S is the log S in <data-dir>/deadletters, a data directory of its
own; consumers read it live as the stream .dlq.S, and the offline tools read
it with --data-dir <data-dir>/deadletters (peek, dump, verify).

dlq ls lists the queues and dlq peek shows dead letters with where they
came from and why, both read-only, so the broker must be stopped. The live
forms and the idempotent redrive arrive with the broker's admin verbs.`,
		Example: `  ironbus dlq ls --data-dir /var/lib/ironbus
  ironbus dlq peek --data-dir /var/lib/ironbus --stream orders
  ironbus sub --stream .dlq.orders --group triage --max 0     # live`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newDeadLetterListCmd(opts), newDeadLetterPeekCmd(opts))
	return cmd
}

func newDeadLetterListCmd(opts *globalOptions) *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:     "ls --data-dir DIR",
		Short:   "List the dead-letter queues and how many records each holds",
		Example: `  ironbus dlq ls --data-dir ./data --json`,
		Args:    cobra.NoArgs,
	}
	addDataDirFlag(cmd, &dataDir)
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object (schema ironbus.cli.dlq.v1)")
	cmd.RunE = classified(func() error { return runDeadLetterList(opts, dataDir) })
	return cmd
}

func runDeadLetterList(opts *globalOptions, dataDir string) error {
	if err := requireDataDir(dataDir); err != nil {
		return err
	}
	path, exists := deadLetterDir(dataDir)
	out := deadLettersOutput{Schema: "ironbus.cli.dlq.v1", Directory: path, Queues: []deadLetterRow{}}
	if exists {
		dir, err := openDataDir(opts, path)
		if err != nil {
			return err
		}
		defer func() { _ = dir.Close() }()
		ids, err := dir.Logs()
		if err != nil {
			return exitErrorf(exitUnreadable, "listing the queues in %s: %w", path, err)
		}
		for _, id := range ids {
			log, err := dir.OpenLog(id)
			if err != nil {
				return openLogError(path, id, err)
			}
			first, end := log.FirstOffset(), log.Committed()
			out.Queues = append(out.Queues, deadLetterRow{Stream: id.Stream, WireName: ".dlq." + id.Stream,
				Records: end - min(first, end), FirstHeld: first, End: end})
		}
	} else {
		// No queue yet: still say so only about a real, idle data directory.
		dir, err := openDataDir(opts, dataDir)
		if err != nil {
			return err
		}
		_ = dir.Close()
	}
	if opts.json {
		return writeJSON(opts.stdout, out)
	}
	if len(out.Queues) == 0 {
		fmt.Fprintln(opts.stdout, "no dead letters")
	}
	for _, queue := range out.Queues {
		fmt.Fprintf(opts.stdout, "%s: %d records (offsets %d..%d), read live as %s\n",
			queue.Stream, queue.Records, queue.FirstHeld, queue.End, queue.WireName)
	}
	return nil
}

// deadLetterEntry is one dead letter in the --json output of dlq peek.
type deadLetterEntry struct {
	Offset          uint64 `json:"offset"`
	Group           string `json:"group"`
	SourceStream    string `json:"source_stream"`
	SourcePartition uint32 `json:"source_partition"`
	SourceOffset    uint64 `json:"source_offset"`
	Attempts        uint32 `json:"attempts"`
	Reason          string `json:"reason"`
	Payload         string `json:"payload"`
}

func newDeadLetterPeekCmd(opts *globalOptions) *cobra.Command {
	read := &readOptions{}
	cmd := &cobra.Command{
		Use:   "peek --data-dir DIR --stream S [--from OFFSET] [--limit N]",
		Short: "Show the dead letters of a stream with where they came from and why",
		Example: `  ironbus dlq peek --data-dir ./data --stream orders
  ironbus dlq peek --data-dir ./data --stream orders --json --limit 0`,
		Args: cobra.NoArgs,
	}
	addReadFlags(cmd, read, 10, "dead letters to show (0 = all)")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print NDJSON: one object per dead letter")
	cmd.RunE = classified(func() error { return runDeadLetterPeek(opts, read) })
	return cmd
}

func runDeadLetterPeek(opts *globalOptions, read *readOptions) error {
	if err := read.validate(); err != nil {
		return err
	}
	path, exists := deadLetterDir(read.dataDir)
	if !exists {
		return exitErrorf(exitNotFound, "%s holds no dead-letter queues", read.dataDir)
	}
	queue := *read
	queue.dataDir = path
	summary, err := readEntries(opts, &queue, func(entry segment.Entry) error {
		if entry.Gap != nil {
			fmt.Fprintf(opts.stdout, "gap %d..%d (%s)\n", entry.Gap.From, entry.Gap.To-1, entry.Gap.Reason)
			return nil
		}
		letter, err := consumer.DecodeDeadLetter(entry.Body)
		if err != nil {
			return exitErrorf(exitDamage, "record %d of the queue: %w", entry.Offset, err)
		}
		payload := ""
		if view, err := format.DecodeBody(entry.Body); err == nil {
			payload = humanPayload(view.Payload)
		}
		if opts.json {
			return writeJSON(opts.stdout, deadLetterEntry{Offset: entry.Offset, Group: letter.Group, SourceStream: letter.Stream,
				SourcePartition: letter.Partition, SourceOffset: letter.Offset, Attempts: letter.Attempts,
				Reason: letter.Reason, Payload: payload})
		}
		fmt.Fprintf(opts.stdout, "#%d from %s/%d#%d group=%s attempts=%d reason=%s payload=%s\n", entry.Offset,
			letter.Stream, letter.Partition, letter.Offset, letter.Group, letter.Attempts, letter.Reason, payload)
		return nil
	})
	if err != nil {
		return err
	}
	if summary.records == 0 && !opts.json {
		fmt.Fprintln(opts.stdout, "no dead letters from there")
	}
	return nil
}
