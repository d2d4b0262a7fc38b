package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path"
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
	return vfs.WriteFileAtomic(l.fs, path.Join(dir, name+checkpointSuffix), image)
}

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
		return nil, fmt.Errorf("%w: checkpoint %s", ErrNotFound, name)
	}
	if err != nil {
		return nil, err
	}
	return decodeCheckpoint(image, file)
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
		}
	}
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
	err := l.fs.Remove(file)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: checkpoint %s", ErrNotFound, name)
	}
	if err != nil {
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
