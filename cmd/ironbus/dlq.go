package main

import (
	"fmt"

	"github.com/spf13/cobra"
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
		Use:   "dlq ls",
		Short: "Show the dead-letter queues (offline)",
		Long: `A record delivered more than max-deliver times (5), rejected by a consumer, or
too large to deliver moves to its stream's dead-letter queue, with headers
naming the group, the source offset, the attempts and the reason. The queue
of stream S is the log S in <data-dir>/deadletters, a data directory of its
own; consumers read it live as the stream .dlq.S, and the offline tools read
it with --data-dir <data-dir>/deadletters (peek, dump, verify).

dlq ls lists the queues read-only, so the broker must be stopped. dlq peek
and the idempotent redrive arrive with the broker's admin verbs.`,
		Example: `  ironbus dlq ls --data-dir /var/lib/ironbus
  ironbus peek --data-dir /var/lib/ironbus/deadletters --stream orders
  ironbus sub --stream .dlq.orders --group triage --max 0     # live`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newDeadLetterListCmd(opts))
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
