package main

import (
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/backup"
	"github.com/ironbus/ironbus/segment/vfs"
)

const restoreSchema = "ironbus.cli.restore.v1"

type restoreOptions struct {
	from    string
	dataDir string
	force   bool
	keyFile string
}

// restoreOutput is the --json form of `ironbus restore`.
type restoreOutput struct {
	Schema     string         `json:"schema"`
	From       string         `json:"from"`
	DataDir    string         `json:"data_dir"`
	OK         bool           `json:"ok"`
	ExitCode   int            `json:"exit_code"`
	Created    string         `json:"backup_created"`
	Files      int            `json:"files"`
	Bytes      int64          `json:"bytes"`
	Logs       []backup.Range `json:"logs"`
	MovedAside string         `json:"moved_aside,omitempty"`
}

func newRestoreCmd(opts *globalOptions) *cobra.Command {
	options := &restoreOptions{}
	cmd := &cobra.Command{
		Use:   "restore --from BACKUP --data-dir DIR [--force]",
		Short: "Check a backup whole, then write it as a data directory",
		Long: `Restore a backup made by ` + "`ironbus backup`" + ` as a data directory.

restore first checks the whole backup: the MANIFEST's own checksum, then every
file it names (present, same size, same CRC32C). One flipped byte anywhere
and it stops before writing anything. Then it copies the files into
DIR.restore-tmp beside the target, checking each copy again, syncs every
file and directory, and renames it into place: a crash leaves either the old
target or the restored one, never a mix.

A target that holds files is refused unless --force; with --force it is
renamed to DIR.before-restore-<unix time> (never deleted: remove it once the
restored broker runs). A broker running on the target stops the restore.

The restored directory passes ` + "`ironbus verify`" + `, and a broker started on it serves
every record the backup holds; consumer groups resume from their cursors at
the backup point.

Exit codes: 0 restored, 2 backup not found, 4 the backup is incomplete,
corrupt, tampered or from a newer IronBus (nothing written), 5 a broker holds
the target, 1 usage (including a non-empty target without --force).`,
		Example: `  # check a backup without restoring it: restore into a scratch directory
  ironbus restore --from /mnt/usb/ironbus-2026-11-29 --data-dir /tmp/check && ironbus verify --data-dir /tmp/check

  # replace the data directory of a stopped broker
  ironbus restore --from /mnt/usb/ironbus-2026-11-29 --data-dir /var/lib/ironbus --force`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&options.from, "from", "", "the backup directory, the one holding MANIFEST (required)")
	addDataDirFlag(cmd, &options.dataDir)
	addKeyFileFlag(cmd, &options.keyFile)
	cmd.Flags().BoolVar(&options.force, "force", false, "restore over a directory that holds files, renaming it aside")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object (schema "+restoreSchema+")")
	cmd.RunE = classified(func() error { return runRestore(opts, options) })
	return cmd
}

func runRestore(opts *globalOptions, options *restoreOptions) error {
	if options.from == "" {
		return exitErrorf(exitUsage, "--from is required: name the backup directory (the one holding MANIFEST)")
	}
	if err := requireDataDir(options.dataDir); err != nil {
		return err
	}
	if err := checkKeyRingOf(path.Join(options.from, backup.DataDirName), options.keyFile); err != nil {
		return err
	}
	bar := newByteProgress(opts, "restore")
	result, err := backup.Restore(options.from, options.dataDir, backup.RestoreOptions{Force: options.force, Progress: bar.update})
	bar.finish()
	if err != nil {
		return restoreError(options, err)
	}
	m := result.Manifest
	output := restoreOutput{Schema: restoreSchema, From: options.from, DataDir: options.dataDir, OK: true,
		Created: m.Created.Format("2006-01-02T15:04:05Z07:00"), Files: len(m.Files), Bytes: m.Bytes, Logs: m.Logs,
		MovedAside: result.MovedAside}
	if opts.json {
		return writeJSON(opts.stdout, output)
	}
	return printRestoreHuman(opts.stdout, output)
}

func restoreError(options *restoreOptions, err error) error {
	switch {
	case errors.Is(err, backup.ErrIncomplete) && !exists(options.from):
		return exitErrorf(exitNotFound, "backup %s does not exist; check --from", options.from)
	case errors.Is(err, backup.ErrNotEmpty):
		return exitErrorf(exitUsage, "%w; add --force to restore over it (it is renamed aside, not deleted)", err)
	case errors.Is(err, vfs.ErrLocked):
		return exitErrorf(exitLocked, "%s: %s (%w)", options.dataDir, lockedMessage, err)
	case errors.Is(err, backup.ErrIncomplete), errors.Is(err, backup.ErrCorruptManifest), errors.Is(err, backup.ErrMismatch),
		errors.Is(err, backup.ErrTooNew), errors.Is(err, backup.ErrUnsafePath):
		return exitErrorf(exitUnreadable, "%w; nothing was written to %s: use another backup", err, options.dataDir)
	}
	return exitErrorf(exitUnreadable, "restoring %s into %s: %w", options.from, options.dataDir, err)
}

func exists(name string) bool {
	_, err := (vfs.OS{}).Stat(name)
	return err == nil
}

func printRestoreHuman(w io.Writer, output restoreOutput) error {
	var text strings.Builder
	for _, log := range output.Logs {
		name := log.Stream
		if log.Dir != "" {
			name = log.Dir + ":" + log.Stream
		}
		fmt.Fprintf(&text, "%s/%d  %d segments  %s\n", name, log.Partition, log.Segments, offsetRange(log.FirstOffset, log.NextOffset))
	}
	fmt.Fprintf(&text, "restored %s (made %s) into %s: %d files, %s, every one checked against the manifest\n",
		output.From, output.Created, output.DataDir, output.Files, formatBytes(output.Bytes))
	if output.MovedAside != "" {
		fmt.Fprintf(&text, "the previous contents of %s are in %s; remove them once the broker runs on the restored data\n",
			output.DataDir, output.MovedAside)
	}
	_, err := io.WriteString(w, text.String())
	return err
}
