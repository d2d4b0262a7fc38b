package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/backup"
	"github.com/ironbus/ironbus/segment"
)

const backupSchema = "ironbus.cli.backup.v1"

type backupOptions struct {
	dataDir string
	out     string
	noLink  bool
	keyFile string
}

// backupOutput is the --json form of `ironbus backup`.
type backupOutput struct {
	Schema   string              `json:"schema"`
	DataDir  string              `json:"data_dir"`
	Out      string              `json:"out"`
	OK       bool                `json:"ok"`
	ExitCode int                 `json:"exit_code"`
	Files    int                 `json:"files"`
	Linked   int                 `json:"linked"`
	Bytes    int64               `json:"bytes"`
	Logs     []backup.Range      `json:"logs"`
	Damage   []segment.LossEvent `json:"damage"`
	Warnings []string            `json:"warnings"`
}

func newBackupCmd(opts *globalOptions) *cobra.Command {
	options := &backupOptions{}
	cmd := &cobra.Command{
		Use:   "backup --data-dir DIR --out BACKUP",
		Short: "Copy a data directory, live or stopped, into a checked backup",
		Long: `Copy a data directory into a new backup directory, while the broker runs or not.

backup takes no lock and writes nothing into the data directory, so it runs
beside a live broker. Per log it copies the checkpoints (consumer group
cursors) first, then the sealed segments (hard linked when the backup is on
the same file system, else copied), then the active segment, cut after its
last intact commit frame: exactly the records a restart would keep at that
instant. Each log's backup point is the moment its active segment was
copied: every record acknowledged before the backup started is in it, and
records written during the copy may be. Dead-letter queues (deadletters/)
are copied the same way.

Last it writes BACKUP/MANIFEST: every file with its size and CRC32C, the
format versions, and the offsets each log holds, with a checksum of its own.
A backup without a MANIFEST was interrupted and cannot be restored.

Hard links share the disk blocks with the data directory: they cost no space
but are no protection against losing that disk. Use --no-link, or a backup
directory on another file system, for that.

Exit codes: 0 backup made, 3 backup made but the data directory holds damage
(copied as it is, listed in the report; run ` + "`ironbus scrub`" + `), 2 data directory
not found, 4 unreadable (I/O error, a segment vanished mid-copy), 1 usage
(including --out naming a directory that is not empty).`,
		Example: `  # nightly, while the broker runs
  ironbus backup --data-dir /var/lib/ironbus --out /mnt/usb/ironbus-$(date +%F)

  # copies only, never hard links
  ironbus backup --data-dir /var/lib/ironbus --out /srv/backup/today --no-link --json`,
		Args: cobra.NoArgs,
	}
	addDataDirFlag(cmd, &options.dataDir)
	cmd.Flags().StringVar(&options.out, "out", "", "the backup directory to create; it must not exist or be empty (required)")
	addKeyFileFlag(cmd, &options.keyFile)
	cmd.Flags().BoolVar(&options.noLink, "no-link", false, "copy sealed segments even where a hard link would do")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object (schema "+backupSchema+")")
	cmd.RunE = classified(func() error { return runBackup(opts, options) })
	return cmd
}

func runBackup(opts *globalOptions, options *backupOptions) error {
	if err := requireDataDir(options.dataDir); err != nil {
		return err
	}
	if err := checkKeyRingOf(options.dataDir, options.keyFile); err != nil {
		return err
	}
	if options.out == "" {
		return exitErrorf(exitUsage, "--out is required: name a new directory for the backup")
	}
	// A FORMAT that is not ours makes a backup nothing could restore.
	if err := requireExistingDataDir(options.dataDir); err != nil {
		return err
	}
	bar := newByteProgress(opts, "backup")
	result, err := backup.Create(options.dataDir, options.out, backup.Options{NoLink: options.noLink, Progress: bar.update})
	bar.finish()
	if err != nil {
		return backupError(options, err)
	}
	output := backupOutput{Schema: backupSchema, DataDir: options.dataDir, Out: options.out,
		Files: len(result.Manifest.Files), Bytes: result.Manifest.Bytes, Logs: result.Manifest.Logs,
		Damage: append([]segment.LossEvent{}, result.Damage...), Warnings: append([]string{}, result.Warnings...)}
	for _, file := range result.Manifest.Files {
		if file.Linked {
			output.Linked++
		}
	}
	if len(output.Damage) > 0 {
		output.ExitCode = exitDamage
	}
	output.OK = output.ExitCode == exitClean
	if opts.json {
		err = writeJSON(opts.stdout, output)
	} else {
		err = printBackupHuman(opts.stdout, output)
	}
	if err != nil || output.OK {
		return err
	}
	return &exitError{code: output.ExitCode, reported: true,
		err: fmt.Errorf("backup made, but %s holds damage", options.dataDir)}
}

func backupError(options *backupOptions, err error) error {
	switch {
	case errors.Is(err, backup.ErrNotDataDir):
		return exitErrorf(exitNotFound, "%w; check --data-dir: it must name the broker's data directory", err)
	case errors.Is(err, backup.ErrNotEmpty):
		return exitErrorf(exitUsage, "%w; --out must name a new or empty directory", err)
	case errors.Is(err, backup.ErrUnsafePath):
		return exitErrorf(exitDamage, "%w; the broker never makes links: replace it with the file it points to, or remove it", err)
	}
	return exitErrorf(exitUnreadable, "backing up %s into %s: %w; the backup in %s is incomplete (no MANIFEST): remove it and run backup again",
		options.dataDir, options.out, err, options.out)
}

func printBackupHuman(w io.Writer, output backupOutput) error {
	var text strings.Builder
	for _, log := range output.Logs {
		name := log.Stream
		if log.Dir != "" {
			name = log.Dir + ":" + log.Stream
		}
		fmt.Fprintf(&text, "%s/%d  %d segments  %s  %d checkpoints\n", name, log.Partition, log.Segments,
			offsetRange(log.FirstOffset, log.NextOffset), log.Checkpoints)
	}
	for _, event := range output.Damage {
		fmt.Fprintf(&text, "  damage: %s\n", describeEvent(event))
	}
	for _, warning := range output.Warnings {
		fmt.Fprintf(&text, "  note: %s\n", warning)
	}
	fmt.Fprintf(&text, "backed up %s into %s: %d files (%d hard linked), %s; manifest %s/MANIFEST\n",
		output.DataDir, output.Out, output.Files, output.Linked, formatBytes(output.Bytes), output.Out)
	if len(output.Damage) > 0 {
		fmt.Fprintf(&text, "hint: the data directory holds damage, copied as it is; run `ironbus scrub --data-dir %s` for the full picture\n", output.DataDir)
	}
	_, err := io.WriteString(w, text.String())
	return err
}
