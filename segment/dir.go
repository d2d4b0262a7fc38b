package segment

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// DataFormatVersion is the layout version of a data directory without
// encryption, stored in its FORMAT file; an encrypted one is
// EncryptedDataFormatVersion, the newest this binary reads. A binary
// refuses a directory with a newer version.
const DataFormatVersion = 1

// Dir is an open data directory: the lock, the committer shared by its
// logs, and the logs themselves.
type Dir struct {
	fs     vfs.FS
	path   string
	opts   Options
	ioMode IOMode
	lock   io.Closer
	// keyIDs are the keys FORMAT says records may be sealed under.
	keyIDs []uint32

	committer *committer

	mu struct {
		sync.Mutex
		logs    map[LogID]*Log
		reports []LogReport
		closed  bool
	}
}

type formatFile struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	// Encryption names the keys of an encrypted directory (encryption.go).
	Encryption *formatEncryption `json:"encryption,omitempty"`
}

// Open opens (creating it unless opts.ReadOnly) the data directory at root
// and takes a lock on the directory: exclusive for writers, shared for
// read-only tools, so a tool never reads a directory a live broker writes.
func Open(fsys vfs.FS, root string, opts Options) (*Dir, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	d := &Dir{fs: fsys, path: path.Clean(root), opts: opts}
	d.mu.logs = map[LogID]*Log{}
	if opts.ReadOnly {
		err = d.openReadOnly()
	} else {
		err = d.openWritable()
	}
	if err != nil {
		if d.lock != nil {
			_ = d.lock.Close()
		}
		return nil, err
	}
	interval := time.Duration(0)
	if opts.Durability == DurabilityInterval {
		interval = opts.SyncInterval
	}
	linger := time.Duration(0)
	if opts.Durability == DurabilitySync {
		linger = opts.CommitLinger
	}
	d.committer = newCommitter(interval, linger, opts.SyncParallelism, opts.Observer)
	return d, nil
}

func (d *Dir) openReadOnly() error {
	info, err := d.fs.Stat(d.path)
	if err != nil || !info.IsDir {
		return fmt.Errorf("%w: data directory %s", ErrNotFound, d.path)
	}
	lock, err := d.fs.Lock(d.path, false)
	if err != nil {
		return d.lockError(err)
	}
	d.lock = lock
	return d.checkFormat()
}

func (d *Dir) openWritable() error {
	if err := vfs.MkdirAllDurable(d.fs, d.path); err != nil {
		return fmt.Errorf("creating data directory %s: %w", d.path, err)
	}
	// The lock is on the directory itself, so a writer and a read-only
	// tool always contend on the same object, whatever files exist.
	lock, err := d.fs.Lock(d.path, true)
	if err != nil {
		return d.lockError(err)
	}
	d.lock = lock
	// The format is checked before anything is written: a directory from
	// a newer IronBus (a downgrade) must be left byte for byte as it was.
	if err := d.checkFormat(); errors.Is(err, ErrNotFound) {
		data, _ := json.Marshal(formatFile{Format: "ironbus-data", Version: DataFormatVersion})
		if err := vfs.WriteFileAtomic(d.fs, path.Join(d.path, formatFileName), append(data, '\n')); err != nil {
			return fmt.Errorf("writing %s: %w", formatFileName, err)
		}
	} else if err != nil {
		return err
	}
	if err := d.recordEncryption(); err != nil {
		return err
	}
	if d.opts.Owner != "" {
		// Informational only, so a plain write: a stale file after a crash
		// is overwritten by the next holder.
		_ = vfs.WriteFileAtomic(d.fs, path.Join(d.path, ownerFileName), []byte(d.opts.Owner+"\n"))
	}
	mode, reason := d.resolveIOMode()
	d.ioMode = mode
	d.opts.Logger.Info("data directory opened", "path", d.path, "io_mode", mode.String(), "why", reason,
		"durability", d.opts.Durability.String(), "preallocation", d.opts.Preallocation.String(),
		"segment_bytes", d.opts.SegmentSize)
	if d.opts.Durability != DurabilitySync {
		d.opts.Logger.Warn("RELAXED DURABILITY: acknowledged records can be lost on power failure",
			"durability", d.opts.Durability.String())
	}
	// Every boot leaves a report, even one that found no log yet (a
	// broker killed before its first stream existed): a missing report
	// would read as "recovery never ran". Each log opened adds its entry.
	// Best effort, like those updates: a full disk must not stop a boot.
	d.mu.Lock()
	err = d.writeReportLocked()
	d.mu.Unlock()
	if err != nil {
		d.opts.Logger.Warn("could not write the recovery report", "error", err.Error())
	}
	return nil
}

// lockError explains a lock conflict, naming the holder when it said who
// it is.
func (d *Dir) lockError(err error) error {
	if !errors.Is(err, vfs.ErrLocked) {
		return err
	}
	if owner, readErr := vfs.ReadFile(d.fs, path.Join(d.path, ownerFileName)); readErr == nil && len(owner) > 0 {
		return fmt.Errorf("%w: held by %s: %w", ErrLocked, strings.TrimSpace(string(owner)), err)
	}
	return fmt.Errorf("%w: %w", ErrLocked, err)
}

// checkFormat reads FORMAT; a missing file is ErrNotFound, a newer version
// ErrTooNew.
func (d *Dir) checkFormat() error {
	data, err := vfs.ReadFile(d.fs, path.Join(d.path, formatFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s has no %s file; it is not an IronBus data directory", ErrNotFound, d.path, formatFileName)
	}
	if err != nil {
		return err
	}
	var f formatFile
	if err := json.Unmarshal(data, &f); err != nil || f.Format != "ironbus-data" {
		return fmt.Errorf("%w: %s/%s is unreadable", ErrInconsistent, d.path, formatFileName)
	}
	if f.Version > EncryptedDataFormatVersion {
		return fmt.Errorf("%w: data directory format %d, this binary knows %d", ErrTooNew, f.Version, EncryptedDataFormatVersion)
	}
	return d.checkEncryption(f)
}

// resolveIOMode turns IOAuto into a concrete mode by probing the directory.
func (d *Dir) resolveIOMode() (IOMode, string) {
	switch d.opts.IOMode {
	case IOBuffered:
		return IOBuffered, "configured"
	case IODirect:
		if err := d.probeDirect(); err != nil {
			d.opts.Logger.Warn("direct I/O unavailable, using buffered", "error", err.Error())
			return IOBuffered, "direct I/O not supported here: " + err.Error()
		}
		return IODirect, "configured"
	}
	if err := d.probeDirect(); err != nil {
		return IOBuffered, "auto: direct I/O not supported here (" + err.Error() + ")"
	}
	return autoModeChoice()
}

// probeDirect checks that an aligned O_DIRECT write works in the directory.
func (d *Dir) probeDirect() error {
	probe := path.Join(d.path, ".direct-probe"+prepareSuffix)
	file, err := d.fs.OpenFile(probe, vfs.ReadWrite|vfs.Create|vfs.Direct)
	if err != nil {
		return err
	}
	defer func() { _ = d.fs.Remove(probe) }()
	defer file.Close()
	_, err = file.WriteAt(vfs.AlignedBuffer(vfs.DirectAlignment), 0)
	return err
}

// IOMode returns the I/O mode in use (IOAuto resolved).
func (d *Dir) IOMode() IOMode { return d.ioMode }

// Path returns the directory's path.
func (d *Dir) Path() string { return d.path }

// OpenLog opens the log, running recovery the first time; a writable
// directory creates the log if it does not exist. Opening an open log
// returns the same *Log.
func (d *Dir) OpenLog(id LogID) (*Log, error) {
	if err := ValidateStreamName(id.Stream); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.closed {
		return nil, ErrClosed
	}
	if l, ok := d.mu.logs[id]; ok {
		return l, nil
	}
	l, err := d.openLogLocked(id)
	if err != nil {
		return nil, err
	}
	d.mu.logs[id] = l
	d.mu.reports = slices.DeleteFunc(d.mu.reports, func(r LogReport) bool {
		return r.Stream == id.Stream && r.Partition == id.Partition
	})
	d.mu.reports = append(d.mu.reports, l.report)
	if !d.opts.ReadOnly {
		if err := d.writeReportLocked(); err != nil {
			d.opts.Logger.Warn("could not write the recovery report", "error", err.Error())
		}
	}
	return l, nil
}

func (d *Dir) openLogLocked(id LogID) (*Log, error) {
	dir := logDir(d.path, id)
	if _, err := d.fs.Stat(dir); err != nil {
		if d.opts.ReadOnly {
			return nil, fmt.Errorf("%w: log %s in %s", ErrNotFound, id, d.path)
		}
		if err := vfs.MkdirAllDurable(d.fs, dir); err != nil {
			return nil, fmt.Errorf("creating %s: %w", dir, err)
		}
	}
	l := &Log{id: id, dir: d, path: dir, fs: d.fs, opts: &d.opts, streamHash: format.StreamHash(id.Stream),
		open: newOpenSealed(d.opts.MaxOpenSegments)}
	l.mu.staging = l.newBatch(nil)
	l.mu.spaceFreed = make(chan struct{})
	l.mu.newData = make(chan struct{})
	l.report = LogReport{Stream: id.Stream, Partition: id.Partition}
	started := time.Now()
	rec := &recovery{l: l, report: &l.report, writable: !d.opts.ReadOnly}
	if err := rec.run(); err != nil {
		rec.unmapAll()
		for _, sf := range rec.files {
			closeQuietly(sf.file)
		}
		return nil, err
	}
	l.report.finish(rec.frozen, started, time.Now())
	d.logRecovery(l)
	return l, nil
}

// logRecovery writes the recovery outcome as one log line per event, so
// every loss is reported as numbers where an operator looks first.
func (d *Dir) logRecovery(l *Log) {
	r := &l.report
	logger := d.opts.Logger.With("log", l.id.String())
	for _, ev := range r.Events {
		level := logger.Error
		if !ev.DataLoss {
			level = logger.Info
		}
		level("recovery event", "reason", ev.Reason.String(), "segment", ev.Segment,
			"bytes", ev.Bytes, "records", ev.Records, "first_offset", ev.FirstOffset,
			"last_offset", ev.LastOffset, "applied", ev.Applied, "quarantine", ev.Quarantine, "detail", ev.Detail)
	}
	logger.Info("log recovered", "outcome", r.Outcome, "segments", r.Segments, "next_offset", r.NextOffset,
		"scanned_bytes", r.ScannedBytes, "clean_stop", r.CleanStop, "torn_tail_bytes", r.TornTailBytes, "data_loss_bytes", r.LossBytes,
		"data_loss_records", r.LossRecords, "duration_us", r.DurationMicros)
	if r.Frozen != "" {
		logger.Error("log opened frozen read-only", "reason", r.Frozen)
	}
}

func (d *Dir) writeReportLocked() error {
	report := RecoveryReport{Schema: ReportSchema, Written: d.opts.Clock.Now().UTC(), Logs: d.mu.reports}
	data, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return err
	}
	return vfs.WriteFileAtomic(d.fs, path.Join(d.path, reportFileName), append(data, '\n'))
}

// Logs lists the logs that exist on disk.
func (d *Dir) Logs() ([]LogID, error) {
	root := path.Join(d.path, streamsDirName)
	streams, err := d.fs.List(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []LogID
	for _, stream := range streams {
		if ValidateStreamName(stream) != nil {
			continue
		}
		partitions, err := d.fs.List(path.Join(root, stream))
		if err != nil {
			return nil, err
		}
		for _, p := range partitions {
			if n, err := strconv.ParseUint(p, 10, 32); err == nil {
				ids = append(ids, LogID{Stream: stream, Partition: uint32(n)})
			}
		}
	}
	return ids, nil
}

// Report returns the recovery report of every log opened so far, with the
// damage reads found since.
func (d *Dir) Report() RecoveryReport {
	d.mu.Lock()
	defer d.mu.Unlock()
	report := RecoveryReport{Schema: ReportSchema, Written: d.opts.Clock.Now().UTC()}
	for _, r := range d.mu.reports {
		if l, ok := d.mu.logs[LogID{Stream: r.Stream, Partition: r.Partition}]; ok {
			r = l.Report()
		}
		report.Logs = append(report.Logs, r)
	}
	return report
}

// Stats returns the committer's counters.
func (d *Dir) Stats() CommitterStats { return d.committer.stats() }

// quarantine keeps a copy of damaged bytes under quarantine/ before
// recovery overwrites or drops them, and returns the copy's path relative
// to the data directory.
func (d *Dir) quarantine(id LogID, name string, data []byte) (string, error) {
	rel := path.Join(quarantineDirName, id.Stream, strconv.FormatUint(uint64(id.Partition), 10), name)
	full := path.Join(d.path, rel)
	if err := vfs.MkdirAllDurable(d.fs, path.Dir(full)); err != nil {
		return "", err
	}
	if err := writeSynced(d.fs, full, data); err != nil {
		return "", fmt.Errorf("quarantining %s: %w", rel, err)
	}
	if err := d.fs.SyncDir(path.Dir(full)); err != nil {
		return "", err
	}
	return rel, nil
}

func (d *Dir) forget(l *Log) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.logs[l.id] == l {
		delete(d.mu.logs, l.id)
	}
}

// Close closes every open log, stops the committer and releases the lock.
func (d *Dir) Close() error {
	d.mu.Lock()
	if d.mu.closed {
		d.mu.Unlock()
		return nil
	}
	d.mu.closed = true
	logs := make([]*Log, 0, len(d.mu.logs))
	for _, l := range d.mu.logs {
		logs = append(logs, l)
	}
	d.mu.Unlock()
	var firstErr error
	for _, l := range logs {
		if err := l.Close(); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	d.committer.close()
	if d.lock != nil {
		_ = d.lock.Close()
	}
	return firstErr
}

// autoModeChoice is the IOAuto rule once direct I/O works: see
// docs/BENCHMARKS.md for the measurements behind it.
func autoModeChoice() (IOMode, string) {
	return IODirect, "auto: direct I/O works here and measured at least as fast as buffered"
}
