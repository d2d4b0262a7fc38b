package main

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/internal/upgrade"
)

const rollbackSchema = "ironbus.cli.rollback.v1"

type rollbackOptions struct {
	dest    string
	dataDir string
}

func newRollbackCmd(opts *globalOptions) *cobra.Command {
	options := &rollbackOptions{}
	cmd := &cobra.Command{
		Use:   "rollback --dest PATH [--data-dir DIR]",
		Short: "Put back the binary ironbus upgrade replaced, by the same crash-safe renames",
		Long: `Swap PATH.previous (kept by ironbus upgrade) back in as PATH, and keep the
binary it replaces as PATH.previous, so a second rollback undoes the first.

Before swapping, rollback runs 'PATH.previous version --json'; with
--data-dir it refuses when the previous binary does not understand the data
directory's format (a newer binary may have moved it on: that older binary
would refuse to start, never corrupt it, but the broker would stay down).

Three steps, each a link or rename followed by an fsync of the directory:

  hold     hard-link PATH to PATH.rollback
  restore  rename PATH.previous to PATH
  keep     rename PATH.rollback to PATH.previous

After a crash, run rollback again: it starts over after hold, and only
finishes the last rename after restore.

Exit codes: 0 rolled back, 1 usage, 2 no PATH.previous (or data directory
not found), 4 the previous binary does not run or is too old for the data
directory, or a step failed.`,
		Example: `  ironbus rollback --dest /usr/local/bin/ironbus --data-dir /var/lib/ironbus
  systemctl restart ironbus`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&options.dest, "dest", "", "where the installed binary lives, e.g. /usr/local/bin/ironbus (required)")
	cmd.Flags().StringVar(&options.dataDir, "data-dir", "", "also check that the previous binary understands this data directory")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object (schema "+rollbackSchema+")")
	cmd.RunE = classified(func() error { return runRollback(opts, options) })
	return cmd
}

func runRollback(opts *globalOptions, options *rollbackOptions) error {
	if options.dest == "" {
		return exitErrorf(exitUsage, "--dest is required: where the installed binary lives")
	}
	output := upgradeOutput{Schema: rollbackSchema}
	paths := upgrade.PathsFor(options.dest)
	// Without PATH.previous there is nothing to probe: either an
	// interrupted rollback is finished below, or Rollback says there is no
	// previous binary.
	if _, err := os.Stat(paths.Previous); err == nil {
		identity, err := upgrade.Probe(context.Background(), paths.Previous)
		if err != nil {
			return upgradeError(err)
		}
		output.Version = identity.Version
		upgradeProgress(opts, "checked %s: ironbus %s, data dir format %d", paths.Previous, identity.Version, identity.Formats.DataDir)
		if options.dataDir != "" {
			format, err := checkDataDirFormat(options.dataDir, identity, paths.Previous)
			if err != nil {
				return err
			}
			output.DataDirFormat = format
			upgradeProgress(opts, "checked %s: data dir format %d, understood", options.dataDir, format)
		}
	}
	result, err := upgrade.Rollback(options.dest, stepPrinter(opts, &output))
	if err != nil {
		return upgradeError(err)
	}
	return printInstalled(opts, output, result, "ironbus rollback --dest "+options.dest+" again undoes this")
}
