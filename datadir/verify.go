package datadir

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"

	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// Outcomes a check adds to the engine's own (clean, torn_tail_truncated,
// data_loss, frozen) for a log it could not check at all.
const (
	OutcomeUnreadable = "unreadable"
	OutcomeNotFound   = "not_found"
)

// Verdict is what checking one log concluded.
type Verdict int

const (
	// Clean: no damage. A torn tail (bytes written after the last sync,
	// never acknowledged) is not damage.
	Clean Verdict = iota
	// Damaged: loss, a damaged checkpoint or a log frozen for damage,
	// which Repair accepts.
	Damaged
	// Unreadable: an I/O error, or files that come from a newer binary or
	// do not form one log, which Repair cannot fix.
	Unreadable
	// Missing: the log was not there to open.
	Missing
)

// LogCheck is the check of one log: the engine's report of it, the
// verdict and, when something stopped the check, why.
type LogCheck struct {
	Report  segment.LogReport
	Verdict Verdict
	Err     error
	// KeyIDs are the keys the log's encrypted records are sealed under.
	KeyIDs []uint32
}

// Check is the check of a data directory: its logs and, when it covered
// every stream, the dead-letter queues beside them.
type Check struct {
	Logs           []LogCheck
	DeadLetterLogs []LogCheck
}

// CheckOptions configure Verify and Repair.
type CheckOptions struct {
	// Stream limits the check to that stream's logs; "" checks every log
	// and the dead-letter queues.
	Stream string
	// Checkpoints (Repair only) also rewrites damaged checkpoints from
	// their previous copies, so both copies exist again.
	Checkpoints bool
	Logger      *slog.Logger
	// Encryption is the directory's key ring, when it is encrypted:
	// Repair needs it to write; Verify checks it is the right one.
	Encryption segment.Encryption
}

// Verify checks every log of a stopped broker's data directory without
// changing it: opened read-only (shared lock), each log runs the
// broker's recovery in dry-run form, reads each checkpoint, then reads
// every sealed segment in full (recovery trusts them to their footer).
// A stream with no log is ErrNoSuchLog.
func Verify(fsys vfs.FS, root string, opts CheckOptions) (Check, error) {
	var check Check
	dir, err := OpenReadOnly(fsys, root, opts.Logger, opts.Encryption)
	if err != nil {
		return check, err
	}
	// Closing a read-only directory only releases handles and the shared
	// lock; there is nothing to lose, so its error is not the outcome.
	defer func() { _ = dir.Close() }()
	ids, err := selectLogs(dir, opts.Stream)
	if err != nil {
		return check, err
	}
	for _, id := range ids {
		check.Logs = append(check.Logs, checkLog(dir, id))
	}
	if opts.Stream != "" {
		return check, nil
	}
	queues, exists := DeadLetters(fsys, root)
	if !exists {
		return check, nil
	}
	letters, err := OpenReadOnly(fsys, queues, opts.Logger, opts.Encryption)
	if err != nil {
		return check, err
	}
	defer func() { _ = letters.Close() }()
	ids, err = letters.Logs()
	if err != nil {
		return check, fmt.Errorf("datadir: listing the dead-letter queues in %s: %w", queues, err)
	}
	for _, id := range ids {
		check.DeadLetterLogs = append(check.DeadLetterLogs, checkLog(letters, id))
	}
	return check, nil
}

// Repair accepts the loss recovery found and makes the logs writable
// again: under the exclusive lock it runs recovery with the caps lifted
// (damaged bytes are copied under quarantine/, then covered with skip
// frames; torn tails are truncated) and checks each log as Verify does.
// A log's verdict is then whether it is writable now: Unreadable when it
// stays frozen. The directory must exist: Repair never creates one.
func Repair(fsys vfs.FS, root string, opts CheckOptions) (Check, error) {
	var check Check
	probe, err := OpenReadOnly(fsys, root, opts.Logger, opts.Encryption)
	if err != nil {
		return check, err
	}
	ids, err := selectLogs(probe, opts.Stream)
	_ = probe.Close()
	if err != nil {
		return check, err
	}
	dir, err := segment.Open(fsys, root, segment.Options{AcceptLoss: true, Logger: opts.Logger, Encryption: opts.Encryption})
	if err != nil {
		return check, err
	}
	for _, id := range ids {
		log := checkLog(dir, id)
		if opts.Checkpoints && log.Err == nil {
			log.Err = repairCheckpoints(dir, id)
		}
		switch {
		case log.Err != nil && log.Verdict != Missing:
			log.Verdict = Unreadable
		case log.Err == nil && log.Report.Frozen != "":
			log.Verdict = Unreadable
		case log.Err == nil:
			log.Verdict = Clean
		}
		check.Logs = append(check.Logs, log)
	}
	if err := dir.Close(); err != nil {
		return check, fmt.Errorf("datadir: closing %s after repair: %w", root, err)
	}
	return check, nil
}

// selectLogs lists the logs to check in stream and partition order,
// keeping only stream's when it is set.
func selectLogs(dir *segment.Dir, stream string) ([]segment.LogID, error) {
	ids, err := dir.Logs()
	if err != nil {
		return nil, fmt.Errorf("datadir: listing the logs of %s: %w", dir.Path(), err)
	}
	if stream != "" {
		ids = slices.DeleteFunc(ids, func(id segment.LogID) bool { return id.Stream != stream })
		if len(ids) == 0 {
			return nil, fmt.Errorf("%w: stream %q has no logs in %s", ErrNoSuchLog, stream, dir.Path())
		}
	}
	// sort.Slice: one sort for every element type, where slices.SortFunc
	// links a copy per struct type (docs/PACKAGING.md).
	sort.Slice(ids, func(i, j int) bool {
		return cmp.Or(cmp.Compare(ids[i].Stream, ids[j].Stream), cmp.Compare(ids[i].Partition, ids[j].Partition)) < 0
	})
	return ids, nil
}

// checkLog opens one log (which runs recovery as the directory was
// opened) and validates every sealed segment.
func checkLog(dir *segment.Dir, id segment.LogID) LogCheck {
	log, err := dir.OpenLog(id)
	if err != nil {
		report := segment.LogReport{Stream: id.Stream, Partition: id.Partition}
		if errors.Is(err, segment.ErrNotFound) {
			return failedCheck(report, Missing, fmt.Errorf("log %s does not exist in %s: %w", id.String(), dir.Path(), err))
		}
		return failedCheck(report, Unreadable, fmt.Errorf("cannot open log %s: %w", id.String(), err))
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
		return failedCheck(report, Unreadable, fmt.Errorf("validating log %s: %w", id.String(), err))
	}
	check := LogCheck{Report: report, Verdict: Judge(report, log.Err())}
	if len(dir.EncryptionKeyIDs()) > 0 {
		if check.KeyIDs, err = log.KeyIDs(); err != nil {
			return failedCheck(report, Unreadable, fmt.Errorf("listing the keys of log %s: %w", id.String(), err))
		}
		if err := log.OpenEvery(); err != nil {
			return failedCheck(report, Damaged, fmt.Errorf("opening the records of log %s: %w", id.String(), err))
		}
	}
	return check
}

func failedCheck(report segment.LogReport, verdict Verdict, err error) LogCheck {
	report.Outcome = OutcomeUnreadable
	if verdict == Missing {
		report.Outcome = OutcomeNotFound
	}
	if report.Events == nil {
		report.Events = []segment.LossEvent{}
	}
	return LogCheck{Report: report, Verdict: verdict, Err: err}
}

// Judge gives the verdict on a log from its report and the error it was
// frozen with. A log frozen because its files are from a newer binary or
// do not form one log is unreadable, not damaged: repair would be the
// wrong advice there.
func Judge(report segment.LogReport, frozen error) Verdict {
	switch {
	case errors.Is(frozen, segment.ErrTooNew), errors.Is(frozen, segment.ErrInconsistent):
		return Unreadable
	case report.Frozen != "" || report.Outcome == segment.OutcomeFrozen:
		return Damaged
	}
	for _, event := range report.Events {
		if event.Reason != segment.ReasonTornTail {
			return Damaged
		}
	}
	return Clean
}

// repairCheckpoints rewrites the log's damaged checkpoints from their
// previous copies; the events were already in the log's report.
func repairCheckpoints(dir *segment.Dir, id segment.LogID) error {
	log, err := dir.OpenLog(id)
	if err == nil {
		_, err = log.RepairCheckpoints()
	}
	if err != nil {
		return fmt.Errorf("repairing checkpoints: %w", err)
	}
	return nil
}
