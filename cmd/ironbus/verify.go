package main

import (
	"errors"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/datadir"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

const verifySchema = "ironbus.cli.verify.v1"

type verifyOptions struct {
	dataDir string
	stream  string
	keyFile string
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
	// KeyIDsInUse are the key ring ids the directory's encrypted records
	// are sealed under (empty without encryption): a key not listed is no
	// longer needed to read this directory.
	KeyIDsInUse []uint32 `json:"key_ids_in_use,omitempty"`
}

// verifiedLog is the engine's report of one log plus what stopped verify
// from checking it, if anything.
type verifiedLog struct {
	segment.LogReport
	KeyIDs   []uint32 `json:"key_ids,omitempty"`
	Error    string   `json:"error,omitempty"`
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
	addKeyFileFlag(cmd, &verify.keyFile)
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
	ring, err := loadKeyRing(verify.keyFile)
	if err != nil {
		return err
	}
	check, err := datadir.Verify(vfs.OS{}, verify.dataDir, datadir.CheckOptions{Stream: verify.stream, Logger: opts.logger(), Encryption: ring})
	if err != nil {
		return checkError(verify, err)
	}
	output := verifyOutput{Schema: verifySchema, DataDir: verify.dataDir, Logs: []verifiedLog{}}
	output.Logs = append(output.Logs, verifiedLogs(check.Logs, &output.ExitCode)...)
	output.DeadLetterLogs = verifiedLogs(check.DeadLetterLogs, &output.ExitCode)
	output.KeyIDsInUse = keyIDsInUse(output.Logs, output.DeadLetterLogs)
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

// checkError classifies a failure of datadir.Verify or Repair as a whole:
// asking for a stream that has no log is "not found", never a silent
// success.
func checkError(verify *verifyOptions, err error) error {
	if errors.Is(err, datadir.ErrNoSuchLog) {
		return exitErrorf(exitNotFound, "stream %q has no logs in %s; `ironbus verify --data-dir %s` lists every log",
			verify.stream, verify.dataDir, verify.dataDir)
	}
	return openDirError(verify.dataDir, err)
}

// verdictCodes are the exit codes of the verdicts on a log.
var verdictCodes = [...]int{datadir.Clean: exitClean, datadir.Damaged: exitDamage, datadir.Unreadable: exitUnreadable,
	datadir.Missing: exitNotFound}

// verifiedLogs turns checks into output rows, raising worst to the most
// serious exit code among them.
func verifiedLogs(checks []datadir.LogCheck, worst *int) []verifiedLog {
	var logs []verifiedLog
	for _, check := range checks {
		log := verifiedLog{LogReport: check.Report, KeyIDs: check.KeyIDs, exitCode: verdictCodes[check.Verdict]}
		if check.Err != nil {
			log.Error = check.Err.Error()
		}
		logs = append(logs, log)
		*worst = worseExitCode(*worst, log.exitCode)
	}
	return logs
}

// keyIDsInUse is the union of the logs' key ids, ascending.
func keyIDsInUse(lists ...[]verifiedLog) []uint32 {
	var ids []uint32
	for _, logs := range lists {
		for _, log := range logs {
			for _, id := range log.KeyIDs {
				if !slices.Contains(ids, id) {
					ids = append(ids, id)
				}
			}
		}
	}
	slices.Sort(ids)
	return ids
}
