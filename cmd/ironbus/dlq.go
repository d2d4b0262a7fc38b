package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/datadir"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// deadLetterRow is one queue in the --json output of dlq ls.
type deadLetterRow struct {
	Stream    string `json:"stream"`
	WireName  string `json:"wire_name"`
	Records   uint64 `json:"records"`
	FirstHeld uint64 `json:"first_offset"`
	End       uint64 `json:"end_offset"`
	// Redriven: every dead letter below it was redriven (live only).
	Redriven uint64 `json:"redriven_up_to"`
}

type deadLettersOutput struct {
	Schema    string          `json:"schema"`
	Directory string          `json:"directory"`
	Queues    []deadLetterRow `json:"queues"`
}

func newDeadLetterCmd(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq ls|peek|redrive",
		Short: "Show and redrive the dead-letter queues",
		Long: `A record delivered more than max-deliver times (5), rejected by a consumer, or
too large to deliver moves to its stream's dead-letter queue, with headers
naming the group, the source offset, the attempts and the reason. The queue
of stream S is the log S in <data-dir>/deadletters, a data directory of its
own; consumers read it live as the stream .dlq.S, and the offline tools read
it with --data-dir <data-dir>/deadletters (peek, dump, verify).

dlq ls lists the queues: through the running broker at --addr, or with
--data-dir read-only from a stopped broker's directory. dlq peek shows dead
letters with where they came from and why (offline). dlq redrive republishes
a queue's dead letters to their stream through the broker, idempotently.`,
		Example: `  ironbus dlq ls
  ironbus dlq ls --data-dir /var/lib/ironbus
  ironbus dlq peek --data-dir /var/lib/ironbus --stream orders
  ironbus dlq redrive --stream orders
  ironbus sub --stream .dlq.orders --group triage --max 0     # live`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newDeadLetterListCmd(opts), newDeadLetterPeekCmd(opts), newRedriveCmd(opts))
	return cmd
}

func newDeadLetterListCmd(opts *globalOptions) *cobra.Command {
	var dataDir, addr string
	cmd := &cobra.Command{
		Use:   "ls [--addr A | --data-dir DIR]",
		Short: "List the dead-letter queues and how many records each holds",
		Example: `  ironbus dlq ls --json
  ironbus dlq ls --data-dir ./data --json`,
		Args: cobra.NoArgs,
	}
	addDataDirFlag(cmd, &dataDir)
	addAddrFlag(cmd, &addr)
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object (schema ironbus.cli.dlq.v1)")
	cmd.RunE = classified(func() error {
		if dataDir == "" {
			return runLiveDeadLetterList(cmd.Context(), opts, addr)
		}
		return runDeadLetterList(opts, dataDir)
	})
	return cmd
}

func runDeadLetterList(opts *globalOptions, dataDir string) error {
	path, _ := datadir.DeadLetters(vfs.OS{}, dataDir)
	queues, err := datadir.DeadLetterQueues(vfs.OS{}, dataDir, opts.logger())
	if err != nil {
		return openDirError(dataDir, err)
	}
	out := deadLettersOutput{Schema: "ironbus.cli.dlq.v1", Directory: path, Queues: []deadLetterRow{}}
	for _, q := range queues {
		out.Queues = append(out.Queues, deadLetterRow{Stream: q.Stream, WireName: ".dlq." + q.Stream,
			Records: q.End - min(q.First, q.End), FirstHeld: q.First, End: q.End})
	}
	return printDeadLetterQueues(opts, out)
}

func printDeadLetterQueues(opts *globalOptions, out deadLettersOutput) error {
	if opts.json {
		return writeJSON(opts.stdout, out)
	}
	if len(out.Queues) == 0 {
		fmt.Fprintln(opts.stdout, "no dead letters")
	}
	for _, queue := range out.Queues {
		fmt.Fprintf(opts.stdout, "%s: %d records (offsets %d..%d), read live as %s",
			queue.Stream, queue.Records, queue.FirstHeld, queue.End, queue.WireName)
		if queue.Redriven > 0 {
			fmt.Fprintf(opts.stdout, ", redriven up to %d", queue.Redriven)
		}
		fmt.Fprintln(opts.stdout)
	}
	return nil
}

func runLiveDeadLetterList(ctx context.Context, opts *globalOptions, addr string) error {
	c, err := dialBroker(ctx, opts, addr, 1)
	if err != nil {
		return err
	}
	defer c.Close()
	queues, err := c.DeadLetters(ctx, "")
	if err != nil {
		return adminError(err, "")
	}
	out := deadLettersOutput{Schema: "ironbus.cli.dlq.v1", Directory: addr, Queues: []deadLetterRow{}}
	for _, q := range queues {
		out.Queues = append(out.Queues, queueRow(q))
	}
	return printDeadLetterQueues(opts, out)
}

func queueRow(q client.DeadLetterQueue) deadLetterRow {
	return deadLetterRow{Stream: q.Stream, WireName: ".dlq." + q.Stream, Records: q.End - min(q.First, q.End),
		FirstHeld: q.First, End: q.End, Redriven: q.Redriven}
}

// redriveOutput is the --json output of dlq redrive.
type redriveOutput struct {
	Schema      string        `json:"schema"`
	Stream      string        `json:"stream"`
	Republished uint64        `json:"republished"`
	Skipped     uint64        `json:"skipped"`
	Queue       deadLetterRow `json:"queue"`
}

func newRedriveCmd(opts *globalOptions) *cobra.Command {
	var addr, stream, dataDir string
	var maxLetters int
	cmd := &cobra.Command{
		Use:   "redrive --stream S [--max N] [--addr A | --data-dir DIR]",
		Short: "Republish a stream's dead letters to it, idempotently",
		Long: `Republish the dead letters of stream S back to S through the broker, oldest
first: each with its original key, subject, headers and payload, without the
ironbus-dlq-* headers, and with ironbus-redriven-from=<offset in the queue>.

The queue remembers how far it was redriven ("redriven up to", shown by dlq
ls), so running redrive twice republishes each dead letter once; a redrive
cut short by a crash republishes on its next run only what did not land.
Consumers that failed on a record will see it again as a new record.

With --data-dir it works on a stopped broker's directory instead, taking the
directory lock exclusively (a running broker makes it exit 5).`,
		Example: `  ironbus dlq redrive --stream orders
  ironbus dlq redrive --stream orders --max 100 --json`,
		Args: cobra.NoArgs,
	}
	addAddrFlag(cmd, &addr)
	cmd.Flags().StringVar(&stream, "stream", "", "the stream whose dead letters to republish (required)")
	cmd.Flags().IntVar(&maxLetters, "max", 0, "republish at most this many dead letters (0 = all)")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object (schema ironbus.cli.redrive.v1)")
	addDataDirFlag(cmd, &dataDir)
	cmd.RunE = classified(func() error {
		if dataDir != "" {
			return runOfflineRedrive(cmd.Context(), opts, dataDir, stream, maxLetters)
		}
		return runRedrive(cmd.Context(), opts, addr, stream, maxLetters)
	})
	return cmd
}

// runOfflineRedrive redrives through the data directories themselves,
// under their exclusive locks: the same crash-safe rounds the broker runs.
func runOfflineRedrive(ctx context.Context, opts *globalOptions, dataDir, stream string, maxLetters int) error {
	if err := checkRedriveFlags(stream, maxLetters); err != nil {
		return err
	}
	result, queue, err := datadir.Redrive(ctx, vfs.OS{}, dataDir, stream, maxLetters, opts.logger())
	if errors.Is(err, datadir.ErrNoSuchLog) {
		return exitErrorf(exitNotFound, "%s holds no dead-letter queues", dataDir)
	}
	if err != nil {
		return openDirError(dataDir, err)
	}
	out := redriveOutput{Schema: "ironbus.cli.redrive.v1", Stream: stream, Republished: result.Republished,
		Skipped: result.Skipped, Queue: deadLetterRow{Stream: stream, WireName: ".dlq." + stream,
			Records: queue.End - min(queue.First, queue.End), FirstHeld: queue.First, End: queue.End, Redriven: result.Mark}}
	if opts.json {
		return writeJSON(opts.stdout, out)
	}
	fmt.Fprintf(opts.stdout, "%s: republished %d dead letters (%d skipped); redriven up to %d of %d\n",
		stream, out.Republished, out.Skipped, out.Queue.Redriven, out.Queue.End)
	return nil
}

func checkRedriveFlags(stream string, maxLetters int) error {
	if stream == "" {
		return exitErrorf(exitUsage, "--stream is required: name the stream whose dead letters to republish")
	}
	if err := validateStream(stream); err != nil {
		return err
	}
	if maxLetters < 0 {
		return exitErrorf(exitUsage, "--max must be 0 (all) or more")
	}
	return nil
}

func runRedrive(ctx context.Context, opts *globalOptions, addr, stream string, maxLetters int) error {
	if err := checkRedriveFlags(stream, maxLetters); err != nil {
		return err
	}
	c, err := dialBroker(ctx, opts, addr, 1)
	if err != nil {
		return err
	}
	defer c.Close()
	result, err := c.Redrive(ctx, stream, maxLetters)
	if err != nil {
		return adminError(err, stream)
	}
	out := redriveOutput{Schema: "ironbus.cli.redrive.v1", Stream: stream, Republished: result.Republished,
		Skipped: result.Skipped, Queue: queueRow(result.Queue)}
	if opts.json {
		return writeJSON(opts.stdout, out)
	}
	fmt.Fprintf(opts.stdout, "%s: republished %d dead letters (%d skipped); redriven up to %d of %d\n",
		stream, out.Republished, out.Skipped, out.Queue.Redriven, out.Queue.End)
	return nil
}

// deadLetterEntry is one dead letter in the --json output of dlq peek.
// deadLetterSchema names one line of dlq peek --json.
const deadLetterSchema = "ironbus.cli.dead-letter.v1"

type deadLetterEntry struct {
	Schema          string `json:"schema"`
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
	cmd.Flags().BoolVar(&opts.json, "json", false, "print NDJSON: one object per dead letter (schema "+deadLetterSchema+") or gap ("+gapSchema+")")
	cmd.RunE = classified(func() error { return runDeadLetterPeek(opts, read) })
	return cmd
}

func runDeadLetterPeek(opts *globalOptions, read *readOptions) error {
	if err := read.validate(); err != nil {
		return err
	}
	path, exists := datadir.DeadLetters(vfs.OS{}, read.dataDir)
	if !exists {
		return exitErrorf(exitNotFound, "%s holds no dead-letter queues", read.dataDir)
	}
	queue := *read
	queue.dataDir = path
	decompressor := newReadDecompressor()
	summary, err := readEntries(opts, &queue, func(entry segment.Entry) error {
		if entry.Gap != nil && opts.json {
			return writeJSON(opts.stdout, newGapOutput(entry.Gap.From, entry.Gap.To, entry.Gap.Reason))
		}
		if entry.Gap != nil {
			fmt.Fprintf(opts.stdout, "gap %d..%d (%s)\n", entry.Gap.From, entry.Gap.To-1, entry.Gap.Reason)
			return nil
		}
		letter, err := consumer.DecodeDeadLetter(entry.Body)
		if err != nil {
			return exitErrorf(exitDamage, "record %d of the queue: %w", entry.Offset, err)
		}
		payload := ""
		if view, err := record.Parse(entry.Body); err == nil {
			// A dead letter keeps the codec its producer chose.
			if raw, err := rawPayload(decompressor, view); err == nil {
				payload = humanPayload(raw)
			} else {
				payload = humanPayloadAs(view.Payload, false)
			}
		}
		if opts.json {
			return writeJSON(opts.stdout, deadLetterEntry{Schema: deadLetterSchema, Offset: entry.Offset, Group: letter.Group, SourceStream: letter.Stream,
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
	if summary.Records == 0 && !opts.json {
		fmt.Fprintln(opts.stdout, "no dead letters from there")
	}
	return nil
}
