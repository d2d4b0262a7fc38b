package logbench

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/ironbus/ironbus/segment/vfs"
)

// RawResult is what the device did with no broker in the way.
type RawResult struct {
	// SmallSyncsPerSec: 256 B write + fdatasync, one after the other, on a
	// preallocated file: the ceiling of a one-record-per-sync log.
	SmallSyncsPerSec float64 `json:"small_syncs_per_sec"`
	// BandwidthMBps: 1 MiB writes each followed by fdatasync.
	BandwidthMBps float64 `json:"bandwidth_mb_per_sec"`
}

// MeasureRaw measures the raw limits of the device under dir.
func MeasureRaw(dir string, duration time.Duration) (RawResult, error) {
	small, err := rawLoop(dir, 256, duration)
	if err != nil {
		return RawResult{}, err
	}
	big, err := rawLoop(dir, 1<<20, duration)
	if err != nil {
		return RawResult{}, err
	}
	return RawResult{SmallSyncsPerSec: small, BandwidthMBps: big * float64(1<<20) / 1e6}, nil
}

// rawLoop writes size bytes then fdatasyncs, repeatedly, into a file
// preallocated with zeros (so no sync carries a size change), and returns
// the write+sync pairs per second.
func rawLoop(dir string, size int, duration time.Duration) (float64, error) {
	const fileSize = 512 << 20
	var fsys vfs.OS
	path := filepath.Join(dir, fmt.Sprintf("raw-%d.bin", size))
	file, err := fsys.OpenFile(path, vfs.ReadWrite|vfs.Create|vfs.Exclusive)
	if err != nil {
		return 0, err
	}
	defer func() { _ = fsys.Remove(path) }()
	defer file.Close()
	if err := file.Allocate(0, fileSize); err != nil && !errors.Is(err, vfs.ErrNotSupported) {
		return 0, err
	}
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < fileSize; off += int64(len(zeros)) {
		if _, err := file.WriteAt(zeros, off); err != nil {
			return 0, err
		}
	}
	if err := file.Sync(); err != nil {
		return 0, err
	}
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i)
	}
	var ops int
	var offset int64
	start := time.Now()
	for time.Since(start) < duration {
		if offset+int64(size) > fileSize {
			offset = 0
		}
		if _, err := file.WriteAt(buf, offset); err != nil {
			return 0, err
		}
		if err := file.SyncData(); err != nil {
			return 0, err
		}
		offset += int64(size)
		ops++
	}
	return float64(ops) / time.Since(start).Seconds(), nil
}
