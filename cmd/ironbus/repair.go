package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/datadir"
	"github.com/ironbus/ironbus/segment/vfs"
)

const repairSchema = "ironbus.cli.repair.v1"

type repairOptions struct {
	verifyOptions
	apply bool
	force bool
}

// repairOutput is the --json form of `ironbus repair`.
type repairOutput struct {
	Schema   string        `json:"schema"`
	DataDir  string        `json:"data_dir"`
	Applied  bool          `json:"applied"`
	OK       bool          `json:"ok"`
	ExitCode int           `json:"exit_code"`
	Logs     []verifiedLog `json:"logs"`
}

func newRepairCmd(opts *globalOptions) *cobra.Command {
	repair := &repairOptions{}
	cmd := &cobra.Command{
		Use:   "repair --data-dir DIR [--apply [--force]]",
		Short: "Quarantine damage the broker refused to drop on its own, and make logs writable again",
		Long: `Accept the loss recovery found and make every log writable again.

At start the broker drops damaged bytes itself as long as the loss stays under
its caps (max(1 % of a log, one segment) per recovery). Above the caps it opens
that log frozen read-only and changes nothing, so that a person decides. This
is that decision.

Without --apply, repair only prints the plan: what verify would report. With
--apply it takes the directory's exclusive lock (the broker must be stopped),
runs recovery with the caps lifted and reads every sealed segment in full.
Every damaged byte is first copied under quarantine/ in the data directory and
synced, then covered with a skip frame so readers see a gap naming the reason;
torn tails (never acknowledged) are truncated. Nothing intact is rewritten.

Damaged checkpoints (consumer group cursors): like the broker, --apply
quarantines a damaged checkpoint and removes it when its previous copy is
intact, so that copy becomes the checkpoint; that group redelivers what it
settled since. --apply --force also writes the copy back as the current
checkpoint, crash-safely, so both copies exist again. A checkpoint with no
intact copy is quarantined and left for the broker, which restarts that
group from the oldest record it holds.

Logs frozen because their files do not form one log (a foreign, misnamed or
overlapping segment) or come from a newer IronBus are not repaired: move the
stray file away, or upgrade the binary.

Exit codes: 0 repaired (or nothing to do), 3 damage found (plan only), 4 a log
could not be repaired, 2 not found, 5 a broker holds the directory, 1 usage.`,
		Example: `  # what would change?
  ironbus repair --data-dir /var/lib/ironbus

  # do it, with the broker stopped
  ironbus repair --data-dir /var/lib/ironbus --apply

  # and rewrite damaged group checkpoints from their previous copies
  ironbus repair --data-dir /var/lib/ironbus --apply --force`,
		Args: cobra.NoArgs,
	}
	addDataDirFlag(cmd, &repair.dataDir)
	cmd.Flags().StringVar(&repair.stream, "stream", "", "repair only the logs of this stream (default: every stream)")
	addKeyFileFlag(cmd, &repair.keyFile)
	cmd.Flags().BoolVar(&repair.apply, "apply", false, "make the changes (default: print the plan only)")
	cmd.Flags().BoolVar(&repair.force, "force", false, "with --apply, also rewrite damaged checkpoints from their previous copies (groups redeliver)")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object (schema "+repairSchema+")")
	cmd.RunE = classified(func() error { return runRepair(opts, repair) })
	return cmd
}

func runRepair(opts *globalOptions, repair *repairOptions) error {
	if repair.force && !repair.apply {
		return exitErrorf(exitUsage, "--force only adds to --apply: run `ironbus repair --data-dir DIR` for the plan, then add --apply --force")
	}
	if !repair.apply {
		return runVerifyAs(opts, &repair.verifyOptions, "repair plan")
	}
	if err := requireDataDir(repair.dataDir); err != nil {
		return err
	}
	ring, err := loadKeyRing(repair.keyFile)
	if err != nil {
		return err
	}
	check, err := datadir.Repair(vfs.OS{}, repair.dataDir, datadir.CheckOptions{Stream: repair.stream, Checkpoints: repair.force,
		Logger: opts.logger(), Encryption: ring})
	if err != nil {
		return checkError(&repair.verifyOptions, err)
	}
	output := repairOutput{Schema: repairSchema, DataDir: repair.dataDir, Applied: true}
	output.Logs = verifiedLogs(check.Logs, &output.ExitCode)
	output.OK = output.ExitCode == exitClean
	if opts.json {
		err = writeJSON(opts.stdout, output)
	} else {
		err = printRepairHuman(opts.stdout, output)
	}
	if err != nil || output.OK {
		return err
	}
	return &exitError{code: output.ExitCode, reported: true, err: fmt.Errorf("repair could not fix every log in %s", repair.dataDir)}
}

func printRepairHuman(w io.Writer, output repairOutput) error {
	var text strings.Builder
	var records uint64
	var bytes int64
	for _, result := range output.Logs {
		writeLogLine(&text, result)
		records += result.LossRecords
		bytes += result.LossBytes
	}
	fmt.Fprintf(&text, "repaired %s in %s: %s (%d bytes) quarantined and skipped; copies under %s/quarantine/\n",
		plural(uint64(len(output.Logs)), "log"), output.DataDir, plural(records, "record"), bytes, output.DataDir)
	if !output.OK {
		text.WriteString("hint: logs still frozen hold files that do not form one log or come from a newer IronBus; see the lines above\n")
	}
	_, err := io.WriteString(w, text.String())
	return err
}
