package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/segment"
)

const verifySchema = "ironbus.cli.verify.v1"

// Outcomes verify adds to the engine's own (clean, torn_tail_truncated,
// data_loss, frozen) for logs it could not check at all.
const (
	outcomeUnreadable = "unreadable"
	outcomeNotFound   = "not_found"
)

type verifyOptions struct {
	dataDir string
	stream  string
}

// verifyOutput is the --json form of `ironbus verify`.
type verifyOutput struct {
	Schema   string        `json:"schema"`
	DataDir  string        `json:"data_dir"`
	OK       bool          `json:"ok"`
	ExitCode int           `json:"exit_code"`
	Logs     []verifiedLog `json:"logs"`
	// DeadLetterLogs are the logs of <data-dir>/deadletters, the streams'
	// dead-letter queues (a data directory of their own), checked the same
	// way when verify covers the whole directory.
	DeadLetterLogs []verifiedLog `json:"dead_letter_logs,omitempty"`
	// SpecialEntries are symbolic links, FIFOs, devices and sockets in
	// the data directory, relative to it: the broker makes none, so each
	// is damage (a link leads outside the directory).
	SpecialEntries []string `json:"special_entries,omitempty"`
}

// verifiedLog is the engine's report of one log plus what stopped verify
// from checking it, if anything.
type verifiedLog struct {
	segment.LogReport
	Error    string `json:"error,omitempty"`
	exitCode int
}

func newVerifyCmd(opts *globalOptions) *cobra.Command {
	verify := &verifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify --data-dir DIR",
		Short: "Check every log of a data directory for damage, read-only",
		Long: `Check the integrity of a data directory without changing it.

verify opens the directory read-only with a shared lock (so it refuses to run
while a broker writes it), runs the same recovery the broker runs at start in
dry-run form, then reads every sealed segment in full and checks every
checksum. It creates, truncates, quarantines and repairs nothing.

It prints one line per log (outcome, segments, offsets held, bytes) and one
indented line per problem: its reason, the segment file, the byte position,
and the offsets and number of records lost. A torn tail (bytes written after
the last sync, never acknowledged to a producer) is reported but counts as
clean; anything else is damage, and so is a symbolic link, FIFO, device or
socket anywhere in the directory (the broker makes none; a link leads
outside it).

Exit codes: 0 clean (torn tails allowed), 2 not found, 3 damage found or a log
frozen, 4 unreadable (I/O error, inconsistent files, format newer than this
binary), 5 a broker holds the directory, 1 usage, 70 internal error. With
several logs the most serious outcome wins.`,
		Example: `  # check everything; exit code 0 means clean
  ironbus verify --data-dir /var/lib/ironbus

  # one stream only, machine-readable, for monitoring
  ironbus verify --data-dir /var/lib/ironbus --stream orders --json

  # in a script
  ironbus verify --data-dir /var/lib/ironbus || echo "verify failed: exit $?"`,
		Args: cobra.NoArgs,
	}
	addDataDirFlag(cmd, &verify.dataDir)
	cmd.Flags().StringVar(&verify.stream, "stream", "", "check only the logs of this stream (default: every stream)")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object (schema "+verifySchema+")")
	cmd.RunE = classified(func() error { return runVerifyAs(opts, verify, "verify") })
	return cmd
}

// runVerifyAs runs verify; repair without --apply runs it too, as its plan.
func runVerifyAs(opts *globalOptions, verify *verifyOptions, what string) error {
	if err := requireDataDir(verify.dataDir); err != nil {
		return err
	}
	if verify.stream != "" {
		if err := validateStream(verify.stream); err != nil {
			return err
		}
	}
	dir, err := openDataDir(opts, verify.dataDir)
	if err != nil {
		return err
	}
	// Closing a read-only directory only releases handles and the shared
	// lock; there is nothing to lose, so its error is not the outcome.
	defer func() { _ = dir.Close() }()
	ids, err := selectLogs(dir, verify)
	if err != nil {
		return err
	}
	output := verifyOutput{Schema: verifySchema, DataDir: verify.dataDir, Logs: make([]verifiedLog, 0, len(ids))}
	for _, id := range ids {
		result := verifyLog(dir, id)
		output.Logs = append(output.Logs, result)
		output.ExitCode = worseExitCode(output.ExitCode, result.exitCode)
	}
	if verify.stream == "" {
		if err := verifyDeadLetters(opts, verify.dataDir, &output); err != nil {
			return err
		}
	}
	if err := findSpecialEntries(verify, &output); err != nil {
		return err
	}
	output.OK = output.ExitCode == exitClean
	if opts.json {
		err = writeJSON(opts.stdout, output)
	} else {
		err = printVerifyHuman(opts.stdout, output)
	}
	if err != nil {
		return err
	}
	if output.OK {
		return nil
	}
	return &exitError{code: output.ExitCode, reported: true,
		err: fmt.Errorf("%s found problems in %s", what, verify.dataDir)}
}

// selectLogs lists the logs to check in a stable order, keeping only the
// requested stream; asking for a stream that has no log is "not found",
// never a silent success.
func selectLogs(dir *segment.Dir, verify *verifyOptions) ([]segment.LogID, error) {
	ids, err := dir.Logs()
	if err != nil {
		return nil, exitErrorf(exitUnreadable, "listing the logs of %s: %w", verify.dataDir, err)
	}
	if verify.stream != "" {
		ids = slices.DeleteFunc(ids, func(id segment.LogID) bool { return id.Stream != verify.stream })
		if len(ids) == 0 {
			return nil, exitErrorf(exitNotFound, "stream %q has no logs in %s; `ironbus verify --data-dir %s` lists every log",
				verify.stream, verify.dataDir, verify.dataDir)
		}
	}
	// sort.Slice: one sort for every element type, where slices.SortFunc
	// links a copy per struct type (docs/PACKAGING.md).
	sort.Slice(ids, func(i, j int) bool {
		return cmp.Or(cmp.Compare(ids[i].Stream, ids[j].Stream), cmp.Compare(ids[i].Partition, ids[j].Partition)) < 0
	})
	return ids, nil
}

// verifyLog opens one log (which runs read-only recovery) and validates
// every sealed segment, which recovery trusts to its footer.
func verifyLog(dir *segment.Dir, id segment.LogID) verifiedLog {
	log, err := dir.OpenLog(id)
	if err != nil {
		return failedLog(segment.LogReport{Stream: id.Stream, Partition: id.Partition},
			openLogError(dir.Path(), id, err))
	}
	// Reading each checkpoint checks it: a damaged one is reported in the
	// log's report (read-only: nothing is quarantined or rewritten).
	if names, err := log.Checkpoints(); err == nil {
		for _, name := range names {
			_, _ = log.ReadCheckpoint(name)
		}
	}
	report, err := log.Validate()
	if err != nil {
		return failedLog(report, exitErrorf(exitUnreadable, "validating log %s: %w", id.String(), err))
	}
	return verifiedLog{LogReport: report, exitCode: reportExitCode(report, log.Err())}
}

func failedLog(report segment.LogReport, err error) verifiedLog {
	result := verifiedLog{LogReport: report, Error: err.Error(), exitCode: exitCodeOf(err)}
	result.Outcome = outcomeUnreadable
	if result.exitCode == exitNotFound {
		result.Outcome = outcomeNotFound
	}
	if result.Events == nil {
		result.Events = []segment.LossEvent{}
	}
	return result
}

// reportExitCode judges one log. A log frozen because its files are from a
// newer binary or do not form one log is unreadable, not damaged: repair
// would be the wrong advice there.
func reportExitCode(report segment.LogReport, frozen error) int {
	switch {
	case errors.Is(frozen, segment.ErrTooNew), errors.Is(frozen, segment.ErrInconsistent):
		return exitUnreadable
	case report.Frozen != "" || report.Outcome == segment.OutcomeFrozen:
		return exitDamage
	}
	for _, event := range report.Events {
		if event.Reason != segment.ReasonTornTail {
			return exitDamage
		}
	}
	return exitClean
}

// verifyDeadLetters checks the dead-letter queues beside the streams, when
// the broker ever created them.
func verifyDeadLetters(opts *globalOptions, dataDir string, output *verifyOutput) error {
	path, exists := deadLetterDir(dataDir)
	if !exists {
		return nil
	}
	dir, err := openDataDir(opts, path)
	if err != nil {
		return err
	}
	defer func() { _ = dir.Close() }()
	ids, err := dir.Logs()
	if err != nil {
		return exitErrorf(exitUnreadable, "listing the dead-letter queues in %s: %w", path, err)
	}
	for _, id := range ids {
		result := verifyLog(dir, id)
		output.DeadLetterLogs = append(output.DeadLetterLogs, result)
		output.ExitCode = worseExitCode(output.ExitCode, result.exitCode)
	}
	return nil
}
