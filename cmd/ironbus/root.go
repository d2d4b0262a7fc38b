package main

import (
	"io"
	"log/slog"

	"github.com/spf13/cobra"
)

// globalOptions is what every command shares: where output goes and the
// flags that mean the same everywhere. run builds one per invocation and
// hands it to each newXCmd, so there is no package-level flag state.
type globalOptions struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// verbose sends the storage engine's structured log to stderr.
	verbose bool
	// json is bound to the running command's --json flag, so a failure is
	// reported as JSON on stdout too and a script parses one format.
	json bool
	// connect holds the TLS and credential flags every client verb shares
	// (connect.go).
	connect connectOptions
}

// logger returns the logger handed to the storage engine: its recovery
// and damage lines are noise next to a command's own report unless asked.
func (opts *globalOptions) logger() *slog.Logger {
	if !opts.verbose {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(opts.stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func newRootCmd(opts *globalOptions) *cobra.Command {
	root := &cobra.Command{
		Use:   "ironbus",
		Short: "IronBus: a durable, crash-safe message broker",
		Long: `ironbus is the command line of IronBus, a durable, crash-safe message broker.

The offline commands take the data directory's lock, so they never race a
running broker; all but repair --apply open it read-only. scrub and backup
take no lock and only read it, so they run beside a live broker.

  version   what this binary is and which on-disk formats it understands
  verify    check every log for damage and report it, with exit codes for scripts
  peek      show a few records of a log, for a human
  dump      print records of a log as NDJSON, for programs
  repair    quarantine damage above the recovery caps and make logs writable again
  scrub     check every byte of a data directory, live (no lock), read-only
  backup    copy a data directory, live or stopped, into a checked backup
  restore   check a backup whole, then write it as a data directory

A running broker is observed through its health endpoints (serve --health-addr):

  report    its groups, streams, storage, recovery or connections, as tables or --json
  server    info about it, or check it for monitoring (Nagios exit codes)
  top       a live screen of it: throughput, lag, fsync, RAM and disk, recovery

Installing this binary:

  upgrade   install a new ironbus binary by a crash-safe swap; rollback undoes it

Exit codes: 0 clean, 1 usage, 2 not found, 3 damage found or refused,
4 unreadable, 5 locked by a running broker or unreachable, 6 not authorized,
70 internal error (a bug in ironbus). See docs/CLI.md.`,
		Example: `  ironbus verify --data-dir /var/lib/ironbus
  ironbus peek --data-dir /var/lib/ironbus --stream orders --from 1000
  ironbus dump --data-dir /var/lib/ironbus | jq .payload`,
		SilenceErrors: true, // main prints errors once, in the ironbus: form
		SilenceUsage:  true, // a failed check is not a usage mistake
		// The current context fills --addr and --data-dir not given.
		PersistentPreRunE: applyCurrentContext,
		// Our own completion command, with help that teaches.
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetOut(opts.stdout)
	root.SetErr(opts.stderr)
	root.PersistentFlags().BoolVar(&opts.verbose, "verbose", false,
		"also write the storage engine's structured log (recovery, damage found) to stderr")
	root.AddCommand(
		newVersionCmd(opts),
		newVerifyCmd(opts),
		newPeekCmd(opts),
		newDumpCmd(opts),
		newRepairCmd(opts),
		newScrubCmd(opts),
		newBackupCmd(opts),
		newRestoreCmd(opts),
		newServeCmd(opts),
		newConfigCmd(opts),
		newDevCmd(opts),
		newPubCmd(opts),
		newSubCmd(opts),
		newCumulativeAckCmd(opts),
		newGroupCmd(opts),
		newStreamCmd(opts),
		newClusterCmd(opts),
		newDeadLetterCmd(opts),
		newBenchCmd(opts),
		newContextCmd(opts),
		newCompletionCmd(opts),
		newCheatCmd(opts),
		newReportCmd(opts),
		newServerCmd(opts),
		newTopCmd(opts),
		newUpgradeCmd(opts),
		newRollbackCmd(opts),
		newTxnCmd(opts),
	)
	root.AddCommand(newTokenCmd(opts), newPasswdCmd(opts), newAuthCmd(opts), newKeyCmd(opts))
	addConnectFlags(root, &opts.connect)
	return root
}
