package logbench

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/ironbus/ironbus/segment/vfs"
)

// RawResult is what the device did with no broker in the way, on the three
// paths a log can take: the ratio that matters depends on which one the
// engine ran on, so all are measured in the same run.
type RawResult struct {
	// SmallSyncsPerSec: 256 B write + fdatasync, one after the other, on a
	// zero-filled file: the ceiling of a one-record-per-sync log.
	SmallSyncsPerSec float64 `json:"small_syncs_per_sec"`
	// BandwidthMBps: 1 MiB write + fdatasync into a zero-filled file whose
	// pages are still in the page cache: the most favourable path.
	BandwidthMBps float64 `json:"bandwidth_mb_per_sec"`
	// FallocateMBps: the same into a fallocated file (what a buffered log
	// writes into).
	FallocateMBps float64 `json:"fallocate_bandwidth_mb_per_sec"`
	// DirectMBps: the same with O_DIRECT into a fallocated file (what a
	// direct-mode log writes into); 0 where direct I/O is unavailable.
	DirectMBps float64 `json:"direct_bandwidth_mb_per_sec"`
}

type rawPath struct {
	zeroFill bool
	direct   bool
}

// MeasureRaw measures the raw limits of the device under dir.
func MeasureRaw(dir string, duration time.Duration) (RawResult, error) {
	var result RawResult
	var err error
	if result.SmallSyncsPerSec, err = rawLoop(dir, 256, duration, rawPath{zeroFill: true}); err != nil {
		return result, err
	}
	bandwidth := func(path rawPath) (float64, error) {
		ops, err := rawLoop(dir, 1<<20, duration, path)
		return ops * float64(1<<20) / 1e6, err
	}
	if result.BandwidthMBps, err = bandwidth(rawPath{zeroFill: true}); err != nil {
		return result, err
	}
	if result.FallocateMBps, err = bandwidth(rawPath{}); err != nil {
		return result, err
	}
	result.DirectMBps, err = bandwidth(rawPath{direct: true})
	if errors.Is(err, vfs.ErrNotSupported) {
		err = nil
	}
	return result, err
}

// SyncLatencies runs 256 B write + fdatasync on a zero-filled file for
// duration and returns every pair's latency: the floor under an
// acknowledgement that waits for one sync.
func SyncLatencies(dir string, duration time.Duration) ([]time.Duration, error) {
	var latencies []time.Duration
	_, err := rawLoopObserved(dir, 256, duration, rawPath{zeroFill: true}, func(d time.Duration) {
		latencies = append(latencies, d)
	})
	return latencies, err
}

// rawLoop writes size bytes then fdatasyncs, repeatedly, into a
// preallocated file (so no sync carries a size change), and returns the
// write+sync pairs per second.
func rawLoop(dir string, size int, duration time.Duration, how rawPath) (float64, error) {
	return rawLoopObserved(dir, size, duration, how, nil)
}

func rawLoopObserved(dir string, size int, duration time.Duration, how rawPath, observe func(time.Duration)) (float64, error) {
	const fileSize = 1 << 30
	var fsys vfs.OS
	path := filepath.Join(dir, fmt.Sprintf("raw-%d.bin", size))
	file, err := fsys.OpenFile(path, vfs.ReadWrite|vfs.Create|vfs.Exclusive)
	if err != nil {
		return 0, err
	}
	defer func() { _ = fsys.Remove(path) }()
	if err := prepareRawFile(file, fileSize, how.zeroFill); err != nil {
		_ = file.Close()
		return 0, err
	}
	if how.direct {
		_ = file.Close()
		if file, err = fsys.OpenFile(path, vfs.ReadWrite|vfs.Direct); err != nil {
			return 0, err
		}
		size = (size + vfs.DirectAlignment - 1) &^ (vfs.DirectAlignment - 1)
	}
	defer file.Close()
	buf := vfs.AlignedBuffer(size)[:size]
	for i := range buf {
		buf[i] = byte(i)
	}
	var ops int
	var offset int64
	start := time.Now()
	for time.Since(start) < duration && offset+int64(size) <= fileSize {
		began := time.Now()
		if _, err := file.WriteAt(buf, offset); err != nil {
			return 0, err
		}
		if err := file.SyncData(); err != nil {
			return 0, err
		}
		if observe != nil {
			observe(time.Since(began))
		}
		offset += int64(size)
		ops++
	}
	return float64(ops) / time.Since(start).Seconds(), nil
}

func prepareRawFile(file vfs.File, size int64, zeroFill bool) error {
	if err := file.Allocate(0, size); err != nil && !errors.Is(err, vfs.ErrNotSupported) {
		return err
	}
	if zeroFill {
		zeros := make([]byte, 1<<20)
		for off := int64(0); off < size; off += int64(len(zeros)) {
			if _, err := file.WriteAt(zeros, off); err != nil {
				return err
			}
		}
	}
	return file.Sync()
}
