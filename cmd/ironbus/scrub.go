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

const scrubSchema = "ironbus.cli.scrub.v1"

type scrubOptions struct {
	dataDir string
	keyFile string
}

// scrubOutput is the --json form of `ironbus scrub`.
type scrubOutput struct {
	Schema   string            `json:"schema"`
	DataDir  string            `json:"data_dir"`
	OK       bool              `json:"ok"`
	ExitCode int               `json:"exit_code"`
	Bytes    int64             `json:"bytes"`
	Damaged  int               `json:"damaged_logs"`
	Logs     []backup.LogScrub `json:"logs"`
}

func newScrubCmd(opts *globalOptions) *cobra.Command {
	options := &scrubOptions{}
	cmd := &cobra.Command{
		Use:   "scrub --data-dir DIR",
		Short: "Read every byte of a data directory and check it, even while the broker runs",
		Long: `Check every file of a data directory end to end, read-only, without its lock.

scrub reads every segment of every log, dead-letter queues (deadletters/)
included, and checks every record header and body checksum, every commit
frame and batch checksum, every footer, the offset chain from segment to
segment, and every checkpoint (consumer group cursors). It changes nothing
and takes no lock, so it is safe on the directory of a running broker:
sealed segments never change, checkpoints are replaced whole by rename, and
the active segment is judged up to its last intact commit frame (an image
that shows damage there is read again, since a batch being written looks
torn). Run it from cron; run verify or repair (broker stopped) to act.

Differences from verify: verify needs the broker stopped and runs the
broker's own recovery on each log; scrub works live, adds checkpoints and the
offset chain, and reports per file.

Exit codes: 0 clean (torn tails of active segments allowed), 3 damage found
(a record, batch, footer, checkpoint or missing segment), 4 a file could not
be judged (I/O error, a newer format, files of another log), 2 not found,
1 usage. It never exits 5: it takes no lock.`,
		Example: `  # weekly, beside the running broker
  ironbus scrub --data-dir /var/lib/ironbus

  # for monitoring
  ironbus scrub --data-dir /var/lib/ironbus --json | jq '.damaged_logs'`,
		Args: cobra.NoArgs,
	}
	addDataDirFlag(cmd, &options.dataDir)
	addKeyFileFlag(cmd, &options.keyFile)
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object (schema "+scrubSchema+")")
	cmd.RunE = classified(func() error { return runScrub(opts, options) })
	return cmd
}

func runScrub(opts *globalOptions, options *scrubOptions) error {
	if err := requireDataDir(options.dataDir); err != nil {
		return err
	}
	if err := checkKeyRingOf(options.dataDir, options.keyFile); err != nil {
		return err
	}
	// A FORMAT that is not ours is not a directory to vouch for.
	if err := requireExistingDataDir(options.dataDir); err != nil {
		return err
	}
	bar := newByteProgress(opts, "scrub")
	report, err := backup.Scrub(nil, options.dataDir, bar.update)
	bar.finish()
	if errors.Is(err, backup.ErrNotDataDir) {
		return exitErrorf(exitNotFound, "%w; check --data-dir: it must name the broker's data directory", err)
	}
	if err != nil {
		return exitErrorf(exitUnreadable, "scrubbing %s: %w", options.dataDir, err)
	}
	output := scrubOutput{Schema: scrubSchema, DataDir: options.dataDir, Bytes: report.Bytes, Damaged: report.Damaged, Logs: report.Logs}
	for _, log := range report.Logs {
		switch {
		case log.Error != "":
			output.ExitCode = worseExitCode(output.ExitCode, exitUnreadable)
		case log.Damaged():
			output.ExitCode = worseExitCode(output.ExitCode, exitDamage)
		}
	}
	output.OK = output.ExitCode == exitClean
	if opts.json {
		err = writeJSON(opts.stdout, output)
	} else {
		err = printScrubHuman(opts.stdout, output)
	}
	if err != nil || output.OK {
		return err
	}
	return &exitError{code: output.ExitCode, reported: true, err: fmt.Errorf("scrub found problems in %s", options.dataDir)}
}

func printScrubHuman(w io.Writer, output scrubOutput) error {
	var text strings.Builder
	for _, log := range output.Logs {
		name := log.Stream
		if log.Dir != "" {
			name = log.Dir + ":" + log.Stream
		}
		state := "clean"
		if log.Damaged() {
			state = "damaged"
		}
		fmt.Fprintf(&text, "%s/%d  %s  %d segments  %s  %d checkpoints  %s\n", name, log.Partition, state,
			log.Segments, offsetRange(log.FirstOffset, log.NextOffset), log.Checkpoints, formatBytes(log.Bytes))
		for _, event := range log.Events {
			fmt.Fprintf(&text, "  %s\n", describeScrubEvent(event))
		}
		if log.Error != "" {
			fmt.Fprintf(&text, "  error: %s\n", log.Error)
		}
	}
	fmt.Fprintf(&text, "scrubbed %s: %d logs, %s read, %d damaged\n", output.DataDir, len(output.Logs), formatBytes(output.Bytes), output.Damaged)
	if output.Damaged > 0 {
		fmt.Fprintf(&text, "hint: a running broker quarantines damage when it reads it; to do it now, stop the broker and run "+
			"`ironbus repair --data-dir %s` (plan), then with --apply --force\n", output.DataDir)
	}
	_, err := io.WriteString(w, text.String())
	return err
}

func describeScrubEvent(event segment.LossEvent) string {
	if event.Reason == segment.ReasonCorruptCheckpoint {
		return fmt.Sprintf("corrupt_checkpoint  %s: %s; the broker falls back to the previous copy (some redelivery)", event.Segment, event.Detail)
	}
	if event.Reason == segment.ReasonMissingSegment || event.Reason == segment.ReasonOffsetMismatch && event.Bytes == 0 {
		return fmt.Sprintf("%s  before %s: %s", event.Reason.String(), event.Segment, event.Detail)
	}
	return describeEvent(event)
}
