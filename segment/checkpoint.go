package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// Checkpoints are small named blobs kept beside a log (consumer group
// cursors, later producer sequences). Each is one file, replaced
// crash-safely (write a temporary file, sync, rename, sync the directory),
// so a reader sees the previous version or the new one, never a mix; each
// carries a version and a CRC32C, so a damaged one is detected, never
// half-trusted. Sizes are variable: no fixed slot caps what fits.
//
// The version a write replaces is kept as <name>.ckpt.prev, so a damaged
// checkpoint (bit rot, a zeroed block) falls back to the one before it:
// the reader loses the progress of one checkpoint interval, never the
// whole cursor. See docs/RECOVERY.md.
//
//	[0,4)  magic "IBCK"
//	[4,6)  checkpoint format version (1)
//	[6,10) payload length
//	[10,n) payload
//	[n,+4) CRC32C of everything before it
const (
	checkpointDirName   = "checkpoints"
	checkpointSuffix    = ".ckpt"
	checkpointVersion   = 1
	checkpointHeader    = 10
	maxCheckpointLength = 64 << 20
)

var checkpointMagic = [4]byte{'I', 'B', 'C', 'K'}

// ErrCorruptCheckpoint reports a checkpoint file that fails its checks.
var ErrCorruptCheckpoint = errors.New("segment: checkpoint is corrupt")

// WriteCheckpoint stores data under name (a stream-name-like identifier),
// replacing any previous version crash-safely.
func (l *Log) WriteCheckpoint(name string, data []byte) error {
	if err := ValidateStreamName(name); err != nil {
		return err
	}
	if l.opts.ReadOnly {
		return ErrReadOnly
	}
	if len(data) > maxCheckpointLength {
		return fmt.Errorf("segment: checkpoint %s of %d bytes exceeds %d", name, len(data), maxCheckpointLength)
	}
	dir := path.Join(l.path, checkpointDirName)
	if err := vfs.MkdirAllDurable(l.fs, dir); err != nil {
		return err
	}
	image := make([]byte, 0, checkpointHeader+len(data)+4)
	image = append(image, checkpointMagic[:]...)
	image = binary.LittleEndian.AppendUint16(image, checkpointVersion)
	image = binary.LittleEndian.AppendUint32(image, uint32(len(data)))
	image = append(image, data...)
	image = binary.LittleEndian.AppendUint32(image, format.CRC(image))
	file := path.Join(dir, name+checkpointSuffix)
	// Keep the version being replaced. Between the two renames only the
	// previous copy exists, and ReadCheckpoint reads it then.
	if err := l.fs.Rename(file, file+previousSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("segment: checkpoint %s: keeping the previous version: %w", name, err)
	}
	return vfs.WriteFileAtomic(l.fs, file, image)
}

// previousSuffix names the copy of a checkpoint that the last write
// replaced.
const previousSuffix = ".prev"

// ReadCheckpoint returns the data stored under name, ErrNotFound when there
// is none, or ErrCorruptCheckpoint (or ErrTooNew) when the file fails its
// checks.
func (l *Log) ReadCheckpoint(name string) ([]byte, error) {
	if err := ValidateStreamName(name); err != nil {
		return nil, err
	}
	file := path.Join(l.path, checkpointDirName, name+checkpointSuffix)
	image, err := vfs.ReadFile(l.fs, file)
	if errors.Is(err, fs.ErrNotExist) {
		// A crash between the two renames of WriteCheckpoint, or a damaged
		// checkpoint removed after a fallback, leaves only the previous
		// copy: it is the checkpoint.
		previous, prevErr := vfs.ReadFile(l.fs, file+previousSuffix)
		if prevErr != nil {
			return nil, fmt.Errorf("%w: checkpoint %s", ErrNotFound, name)
		}
		data, err := decodeCheckpoint(previous, file+previousSuffix)
		if errors.Is(err, ErrCorruptCheckpoint) {
			l.reportCheckpointDamage(name, previousSuffix, previous, err, "no intact copy: its owner decides where to resume")
		}
		return data, err
	}
	if err != nil {
		return nil, err
	}
	data, err := decodeCheckpoint(image, file)
	if !errors.Is(err, ErrCorruptCheckpoint) {
		return data, err
	}
	return l.checkpointFallback(name, file, image, err)
}

// checkpointFallback answers for a damaged checkpoint with the copy the
// last write replaced, and reports the damage like any other loss. Its
// reader redelivers at most one checkpoint interval of work. When the
// directory is writable the damaged file is removed after its quarantine
// copy is synced, so the previous copy becomes the checkpoint and the next
// write keeps it as its previous copy instead of the damaged file. With no
// intact previous copy the damage is returned.
func (l *Log) checkpointFallback(name, file string, image []byte, damage error) ([]byte, error) {
	previous, prevErr := vfs.ReadFile(l.fs, file+previousSuffix)
	var data []byte
	if prevErr == nil {
		data, prevErr = decodeCheckpoint(previous, file+previousSuffix)
	}
	if prevErr != nil {
		l.reportCheckpointDamage(name, "", image, damage, "no intact previous copy: its owner decides where to resume")
		return nil, damage
	}
	quarantined := l.reportCheckpointDamage(name, "", image, damage, "the previous copy was used: progress since it is redelivered")
	if quarantined {
		if err := l.fs.Remove(file); err == nil {
			_ = l.fs.SyncDir(path.Dir(file))
		}
	}
	return data, nil
}

// reportCheckpointDamage reports a damaged checkpoint file (suffix "" for
// the current copy, ".prev" for the previous one) like any other loss: a
// log line, an event in the log's report and recovery-report.json, and a
// synced copy under quarantine/ when the directory is writable, which it
// reports back.
func (l *Log) reportCheckpointDamage(name, suffix string, image []byte, damage error, detail string) bool {
	rel := path.Join(checkpointDirName, name+checkpointSuffix+suffix)
	event := newEvent(ReasonCorruptCheckpoint, rel, 0, int64(len(image)), 0, 0, damage.Error()+"; "+detail)
	if !l.opts.ReadOnly {
		if quarantined, err := l.dir.quarantine(l.id, name+checkpointSuffix+suffix+".damaged", image); err == nil {
			event.Quarantine = quarantined
			event.Applied = true
		}
	}
	l.runtimeMu.Lock()
	l.runtimeEvents = append(l.runtimeEvents, event)
	l.runtimeMu.Unlock()
	l.opts.Logger.Error("damaged checkpoint", "log", l.id.String(), "checkpoint", name+checkpointSuffix+suffix,
		"error", damage.Error(), "fallback", detail, "quarantine", event.Quarantine)
	l.dir.reportRuntimeDamage(l)
	return event.Applied
}

func decodeCheckpoint(image []byte, file string) ([]byte, error) {
	if len(image) < checkpointHeader+4 || [4]byte(image[0:4]) != checkpointMagic {
		return nil, fmt.Errorf("%w: %s: bad magic or size %d", ErrCorruptCheckpoint, file, len(image))
	}
	body, crc := image[:len(image)-4], binary.LittleEndian.Uint32(image[len(image)-4:])
	if format.CRC(body) != crc {
		return nil, fmt.Errorf("%w: %s: checksum mismatch", ErrCorruptCheckpoint, file)
	}
	if version := binary.LittleEndian.Uint16(image[4:6]); version > checkpointVersion {
		return nil, fmt.Errorf("%w: %s: checkpoint version %d", ErrTooNew, file, version)
	}
	if length := binary.LittleEndian.Uint32(image[6:10]); int(length) != len(body)-checkpointHeader {
		return nil, fmt.Errorf("%w: %s: length %d, file holds %d", ErrCorruptCheckpoint, file, length, len(body)-checkpointHeader)
	}
	return body[checkpointHeader:], nil
}

// Checkpoints lists the names of the log's checkpoints.
func (l *Log) Checkpoints() ([]string, error) {
	names, err := l.fs.List(path.Join(l.path, checkpointDirName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, name := range names {
		if base, ok := strings.CutSuffix(name, checkpointSuffix); ok {
			out = append(out, base)
			continue
		}
		// Only the previous copy: a write was cut between its renames.
		base, ok := strings.CutSuffix(name, checkpointSuffix+previousSuffix)
		if ok && !slices.Contains(names, base+checkpointSuffix) {
			out = append(out, base)
		}
	}
	slices.Sort(out)
	return out, nil
}

// DeleteCheckpoint removes the checkpoint name, ErrNotFound when there is
// none. Removing one file is atomic, and the directory is synced before
// returning, so after a crash the checkpoint is either whole or gone,
// and gone once this returns. A temporary file a crashed WriteCheckpoint
// left behind goes too, so it cannot be mistaken for the checkpoint.
func (l *Log) DeleteCheckpoint(name string) error {
	if err := ValidateStreamName(name); err != nil {
		return err
	}
	if l.opts.ReadOnly {
		return ErrReadOnly
	}
	dir := path.Join(l.path, checkpointDirName)
	file := path.Join(dir, name+checkpointSuffix)
	// The previous copy goes first: were the checkpoint removed and the
	// copy not, a crash would bring the group back from the copy.
	prevErr := l.fs.Remove(file + previousSuffix)
	if prevErr != nil && !errors.Is(prevErr, fs.ErrNotExist) {
		return fmt.Errorf("segment: delete checkpoint %s: %w", name, prevErr)
	}
	err := l.fs.Remove(file)
	if errors.Is(err, fs.ErrNotExist) && prevErr != nil {
		return fmt.Errorf("%w: checkpoint %s", ErrNotFound, name)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("segment: delete checkpoint %s: %w", name, err)
	}
	if err := l.fs.Remove(file + ".tmp"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("segment: delete checkpoint %s: %w", name, err)
	}
	if err := l.fs.SyncDir(dir); err != nil {
		return fmt.Errorf("segment: delete checkpoint %s: %w", name, err)
	}
	return nil
}
