package segment

import (
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// Recovery runs when a log opens, in named phases:
//
//  1. list: find segment files; drop leftovers of an interrupted roll.
//  2. validate: check every header and footer and the offset chain, without
//     reading record data (sealed segments are trusted to their footer here
//     and fully checked on first read).
//  3. scan: walk every unsealed segment (normally only the last) frame by
//     frame.
//  4. classify: turn what the scans and the chain found into events: a torn
//     tail (unacknowledged, not loss), damage inside committed data (one
//     bounded event per damaged region), unreadable or missing segments.
//  5. caps: loss above max(LossCapFraction of the log, one segment) leaves
//     the log frozen read-only and the disk untouched, for `ironbus repair`.
//  6. apply: copy damage to quarantine/ and cover it with a skip frame,
//     truncate the torn tail, replace unreadable or missing segments with
//     stubs, finish an interrupted seal; then sync, so nothing recovered
//     from the page cache is served before it is durable.
//  7. install: hand the segments to the log and resume appending.
//
// Every phase is deterministic in the bytes it reads, and every change it
// makes is itself crash-safe: recovery interrupted at any write recovers
// the same log next time.

type segmentFile struct {
	name      string
	path      string
	base      uint64
	file      vfs.File
	size      int64
	header    format.SegmentHeader
	headerErr error
	footer    *format.Footer
	scan      *scanResult
	mapping   vfs.Mapping
	next      uint64 // one past the last offset covered; known after validate or scan
	nextKnown bool
	resealAt  int64 // > 0: write a footer here (footer missing or damaged)
	cutAt     int64 // > 0: a footer was found but the file runs past it
	dropped   bool  // replaced by a stub
	trusted   bool  // scan installed from a clean-stop marker
}

type recovery struct {
	l        *Log
	files    []*segmentFile
	report   *LogReport
	frozen   error
	lossCap  int64
	planned  []plannedChange
	writable bool
	// clean is the clean-stop marker a writable open found; markers says
	// one of its names exists, to be removed before anything is written.
	clean   *cleanStop
	markers bool
	// replicated: the directory holds a replica's state file, so the log
	// is a Raft log and refuses producers' appends from the start.
	replicated bool
}

// plannedChange is one change phase 6 makes on disk.
type plannedChange struct {
	file   *segmentFile
	event  int // index in report.Events
	kind   changeKind
	start  int64
	end    int64
	first  uint64
	count  uint64
	reason Reason
}

type changeKind int

const (
	changeSkip     changeKind = iota // quarantine [start,end) and write a skip frame
	changeTruncate                   // cut the torn tail at start
	changeStub                       // replace the file (or a gap) by a stub segment
)

func (r *recovery) run() error {
	if err := r.list(); err != nil {
		return err
	}
	if err := r.validate(); err != nil {
		return err
	}
	if r.frozen == nil {
		if err := r.scanUnsealed(); err != nil {
			return err
		}
		r.classify()
		r.checkCaps()
	}
	if r.writable && r.frozen == nil {
		if err := r.removeCleanStop(); err != nil {
			return err
		}
		if err := r.apply(); err != nil {
			return err
		}
	} else {
		r.markUnapplied()
	}
	return r.install()
}

// list finds the segment files in ascending offset order and removes files
// an interrupted roll left behind.
func (r *recovery) list() error {
	l := r.l
	names, err := l.fs.List(l.path)
	if err != nil {
		return fmt.Errorf("listing %s: %w", l.path, err)
	}
	for _, name := range names {
		if name == cleanStopName || name == cleanStopTempName || isRaftStateFile(name) {
			r.replicated = r.replicated || name == RaftStateName
			continue
		}
		if base, ok := parseSegmentFileName(name); ok {
			r.files = append(r.files, &segmentFile{name: name, path: path.Join(l.path, name), base: base})
			continue
		}
		if strings.HasSuffix(name, prepareSuffix) && r.writable {
			if err := l.fs.Remove(path.Join(l.path, name)); err != nil {
				return fmt.Errorf("removing leftover %s: %w", name, err)
			}
			continue
		}
		if !strings.HasSuffix(name, prepareSuffix) && name != checkpointDirName && name != KeyIndexDirName && !r.isDir(name) {
			l.opts.Logger.Warn("unknown file in log directory, left alone", "log", l.id.String(), "file", name)
		}
	}
	markers := 0
	for _, name := range []string{cleanStopName, cleanStopTempName} {
		if slices.Contains(names, name) {
			markers++
		}
	}
	// A repair (AcceptLoss) checks the whole log: it never trusts one.
	if r.writable && markers > 0 {
		r.markers = true
		if !l.opts.AcceptLoss {
			r.clean = r.readCleanStop()
		}
	}
	if r.writable && len(names)-markers > len(r.files) {
		return l.fs.SyncDir(l.path)
	}
	return nil
}

// isDir reports whether name in the log directory is a directory: those
// belong to the log's other owners (checkpoints, a message-id window).
func (r *recovery) isDir(name string) bool {
	info, err := r.l.fs.Stat(path.Join(r.l.path, name))
	return err == nil && info.IsDir
}

// validate reads each header and footer and checks the offset chain.
func (r *recovery) validate() error {
	for i, sf := range r.files {
		if err := r.readHeaderAndFooter(sf); err != nil {
			return err
		}
		if r.frozen != nil {
			return nil
		}
		if i > 0 {
			r.checkLink(r.files[i-1], sf)
		}
	}
	return nil
}

func (r *recovery) readHeaderAndFooter(sf *segmentFile) error {
	l := r.l
	flag := vfs.ReadOnly
	if r.writable {
		flag = vfs.ReadWrite
	}
	file, err := l.fs.OpenFile(sf.path, flag)
	if err != nil {
		return fmt.Errorf("opening %s: %w", sf.path, err)
	}
	sf.file = file
	if sf.size, err = file.Size(); err != nil {
		return fmt.Errorf("sizing %s: %w", sf.path, err)
	}
	head := make([]byte, format.SegmentHeaderSize)
	if _, err := file.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading the header of %s: %w", sf.path, err)
	}
	sf.header, sf.headerErr = format.DecodeSegmentHeader(head)
	switch {
	case errors.Is(sf.headerErr, format.ErrTooNew):
		r.freeze(fmt.Errorf("%w: %s: %w", ErrTooNew, sf.name, sf.headerErr))
		return nil
	case sf.headerErr != nil:
		return nil
	case sf.header.StreamHash != l.streamHash || sf.header.Partition != l.id.Partition:
		r.freeze(fmt.Errorf("%w: %s belongs to another log (stream hash %016x partition %d)", ErrInconsistent, sf.name, sf.header.StreamHash, sf.header.Partition))
		return nil
	case sf.header.BaseOffset != sf.base:
		r.freeze(fmt.Errorf("%w: %s says its base offset is %d", ErrInconsistent, sf.name, sf.header.BaseOffset))
		return nil
	}
	return r.readFooter(sf)
}

// readFooter trusts a footer only if it sits exactly at the end of the
// file, carries this segment's token and base, and checks out.
func (r *recovery) readFooter(sf *segmentFile) error {
	if sf.size < format.SegmentDataStart+format.FooterFrameSize {
		return nil
	}
	buf := make([]byte, format.FooterFrameSize)
	if _, err := sf.file.ReadAt(buf, sf.size-format.FooterFrameSize); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading the footer of %s: %w", sf.path, err)
	}
	footer, err := format.DecodeFooter(buf)
	if errors.Is(err, format.ErrTooNew) {
		r.freeze(fmt.Errorf("%w: %s: %w", ErrTooNew, sf.name, err))
		return nil
	}
	if err != nil || footer.Token != sf.header.Token || footer.BaseOffset != sf.base ||
		int64(footer.DataEnd) != sf.size-format.FooterFrameSize {
		return nil
	}
	sf.footer = &footer
	sf.next, sf.nextKnown = footer.NextOffset, true
	return nil
}

// checkLink checks that cur continues prev. Overlaps mean mixed-up files:
// the log freezes for an operator. A gap after a sealed segment means a
// segment file is missing: a loss, reported and stubbed.
func (r *recovery) checkLink(prev, cur *segmentFile) {
	if !prev.nextKnown || cur.base >= prev.next {
		return
	}
	r.freeze(fmt.Errorf("%w: %s starts at offset %d but %s already covers offsets up to %d", ErrInconsistent, cur.name, cur.base, prev.name, prev.next-1))
}

// scanUnsealed scans every segment whose footer is missing or damaged:
// normally only the last one.
func (r *recovery) scanUnsealed() error {
	for i, sf := range r.files {
		if sf.footer != nil || sf.headerErr != nil {
			continue
		}
		if i == len(r.files)-1 && r.clean != nil {
			trusted, err := r.trustCleanStop(sf, r.clean)
			if err != nil {
				return err
			}
			if trusted {
				sf.trusted = true
				continue
			}
		}
		if err := r.scanFile(sf, i == len(r.files)-1); err != nil {
			return err
		}
		if r.frozen != nil {
			return nil
		}
	}
	for i := 1; i < len(r.files); i++ {
		r.checkLink(r.files[i-1], r.files[i])
	}
	return nil
}

func (r *recovery) scanFile(sf *segmentFile, last bool) error {
	data, err := r.mapFile(sf)
	if err != nil {
		return err
	}
	result := scanSegment(data, sf.header.Token, sf.base, r.l.opts.MaxRecordBytes,
		scanLimits{End: sf.size, TornAllowed: last})
	if result.TooNew != nil {
		r.freeze(fmt.Errorf("%w: %s: %w", ErrTooNew, sf.name, result.TooNew))
		return nil
	}
	sf.scan = &result
	r.report.ScannedBytes += sf.size
	r.report.Records += result.Records
	switch {
	case result.Footer != nil:
		// Sealed, but the crash came before the cut to size finished.
		sf.footer = result.Footer
		sf.next, sf.nextKnown = result.Footer.NextOffset, true
		sf.cutAt = result.End + format.FooterFrameSize
	case !last:
		// A successor exists, so this segment's data was synced before it
		// was created: whatever follows the intact frames is damage, and
		// the footer must be rewritten.
		sf.resealAt = result.End
		sf.next, sf.nextKnown = result.NextOffset, true
	default:
		sf.next, sf.nextKnown = result.NextOffset, true
	}
	return nil
}

func (r *recovery) mapFile(sf *segmentFile) ([]byte, error) {
	var mapping vfs.Mapping
	var err error
	if mapper, ok := sf.file.(vfs.Mapper); ok {
		mapping, err = mapper.Map(sf.size)
	} else {
		err = vfs.ErrNotSupported
	}
	if errors.Is(err, vfs.ErrNotSupported) {
		mapping, err = readMapping(sf.file, sf.size)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", sf.path, err)
	}
	sf.mapping = mapping
	return mapping.Bytes(), nil
}

func (r *recovery) freeze(err error) {
	if r.frozen == nil {
		r.frozen = err
	}
}

func (r *recovery) unmapAll() {
	for _, sf := range r.files {
		if sf.mapping != nil {
			_ = sf.mapping.Close()
			sf.mapping = nil
		}
	}
}
