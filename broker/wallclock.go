package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"time"

	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// The wall-clock high-water: the latest wall time the broker has seen,
// advanced by the monotonic clock while the wall clock lags far behind it,
// persisted so a device that boots with its clock reset to 1970 still
// knows how late it has been. Retention compares record stamps with it,
// never with the raw clock (invariant I6).
//
// File <data-dir>/wallclock, 28 bytes, little-endian:
//
//	magic "IRONWALL" @0 · version u32 (1) @8 · reserved u32 @12 ·
//	high-water unix ns i64 @16 · CRC32C of [0,24) u32 @24
const (
	wallFileName    = "wallclock"
	wallMagic       = "IRONWALL"
	wallVersion     = 1
	wallFileSize    = 28
	wallPersistStep = 10 * time.Minute // persist when the high-water moved this far
)

// ErrWallClockFile marks an unreadable wall-clock high-water file; the
// broker then starts from the current clock and rewrites it.
var ErrWallClockFile = errors.New("broker: wall-clock file")

// MonotonicClock reads time elapsed since an arbitrary origin (the
// broker's start). Timers and ages use only it, never the wall clock.
type MonotonicClock interface {
	Elapsed() time.Duration
}

// systemMonotonic reads Go's monotonic clock.
type systemMonotonic struct{ origin time.Time }

func (m systemMonotonic) Elapsed() time.Duration { return time.Since(m.origin) }

// encodeWallMark returns the file image of a high-water.
func encodeWallMark(highWater int64) []byte {
	buf := make([]byte, wallFileSize)
	copy(buf, wallMagic)
	binary.LittleEndian.PutUint32(buf[8:], wallVersion)
	binary.LittleEndian.PutUint64(buf[16:], uint64(highWater))
	binary.LittleEndian.PutUint32(buf[24:], format.CRC(buf[:24]))
	return buf
}

// decodeWallMark reads a file image, refusing anything torn, damaged or
// newer than this binary understands.
func decodeWallMark(data []byte) (int64, error) {
	switch {
	case len(data) != wallFileSize:
		return 0, fmt.Errorf("%w: %d bytes, want %d", ErrWallClockFile, len(data), wallFileSize)
	case string(data[:8]) != wallMagic:
		return 0, fmt.Errorf("%w: bad magic", ErrWallClockFile)
	case binary.LittleEndian.Uint32(data[24:]) != format.CRC(data[:24]):
		return 0, fmt.Errorf("%w: checksum mismatch", ErrWallClockFile)
	case binary.LittleEndian.Uint32(data[8:]) != wallVersion:
		return 0, fmt.Errorf("%w: version %d is newer than this binary understands", ErrWallClockFile, binary.LittleEndian.Uint32(data[8:]))
	}
	return int64(binary.LittleEndian.Uint64(data[16:])), nil
}

// wallClock tracks the high-water and notices steps. Only the retention
// pass (one at a time) touches it.
type wallClock struct {
	fs        vfs.FS
	dir       string
	clock     segment.Clock
	threshold time.Duration

	highWater int64
	persisted int64
	observed  bool
	lastWall  int64
	lastMono  time.Duration
	steps     uint64
}

// loadWallClock reads the persisted high-water; a missing or damaged file
// costs nothing but a log line, so the broker always starts.
func loadWallClock(fsys vfs.FS, dir string, clock segment.Clock, threshold time.Duration) (*wallClock, error) {
	w := &wallClock{fs: fsys, dir: dir, clock: clock, threshold: threshold}
	data, err := vfs.ReadFile(fsys, path.Join(dir, wallFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return w, nil
	}
	if err != nil {
		return w, fmt.Errorf("%w: %w", ErrWallClockFile, err)
	}
	mark, err := decodeWallMark(data)
	if err != nil {
		return w, err
	}
	w.highWater, w.persisted = mark, mark
	return w, nil
}

// wallStep describes a discontinuity the clock made.
type wallStep struct {
	By        time.Duration // signed: negative is backwards
	HighWater int64
}

// observe reads the wall clock at monotonic time mono, raises the
// high-water and reports a step: backwards below the high-water, or away
// from the monotonic clock by more than the threshold within a run. The
// first reading of a run can only be judged against the high-water (the
// time the device was off is unknown).
func (w *wallClock) observe(mono time.Duration) (int64, *wallStep) {
	wall := w.clock.Now().UnixNano()
	var step *wallStep
	threshold := int64(w.threshold)
	if w.observed {
		drift := wall - (w.lastWall + int64(mono-w.lastMono))
		if drift > threshold || drift < -threshold {
			step = &wallStep{By: time.Duration(drift)}
		}
	} else if w.highWater != 0 && wall < w.highWater-threshold {
		step = &wallStep{By: time.Duration(wall - w.highWater)}
	}
	// While the wall clock lags the high-water by more than the threshold
	// (stepped back, or reset at boot), the high-water runs with the
	// monotonic clock, so nothing is held beyond its monotonic age. Within
	// the threshold it only follows the wall clock, so ordinary drift
	// between the two clocks never accumulates into a false step.
	if w.observed && wall < w.highWater-threshold {
		w.highWater += int64(mono - w.lastMono)
	}
	w.observed, w.lastWall, w.lastMono = true, wall, mono
	w.highWater = max(w.highWater, wall)
	if step != nil {
		w.steps++
		step.HighWater = w.highWater
	}
	return w.highWater, step
}

// due reports whether the high-water moved far enough to persist.
func (w *wallClock) due() bool { return w.highWater-w.persisted >= int64(wallPersistStep) }

// persist writes the high-water crash-safely: temp file, fsync, rename,
// fsync the directory.
func (w *wallClock) persist() error {
	if w.highWater == w.persisted {
		return nil
	}
	if err := vfs.WriteFileAtomic(w.fs, path.Join(w.dir, wallFileName), encodeWallMark(w.highWater)); err != nil {
		return fmt.Errorf("%w: persisting the high-water: %w", ErrWallClockFile, err)
	}
	w.persisted = w.highWater
	return nil
}
