package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ironbus/ironbus/benchrig"
	"github.com/ironbus/ironbus/segment/vfs"
)

// The raw rows measure the disk with no broker in the way, in the same
// run as the brokers. logbench measures the same paths on 1 GiB
// zero-filled files; zero-filling that much in every run would cost
// seconds each time, so the small-write loop here uses a smaller file and
// wraps around in it.
const (
	rawSmallFileBytes = 64 << 20 // zero-filled: small writes overwrite written blocks
	rawLargeFileBytes = 1 << 30  // fallocated: fresh blocks, as a log appends into
	rawLargeWrite     = 1 << 20
)

// rawLoop is the write + fdatasync loop: size bytes, then one fdatasync,
// one after the other, on a preallocated zero-filled file (no size
// change, no unwritten extents): the floor under an acknowledgement that
// waits for its own sync, and the ceiling of one message per sync. It
// keeps its file open so that it can run in slices around the cells it is
// compared with (phases.go), and pools what the slices measured.
type rawLoop struct {
	file       vfs.File
	remove     func()
	buffer     []byte
	offset     int64
	backToBack rawSamples
	atRate     rawSamples
}

// rawSamples pools the latencies of a loop's slices and the time they took.
type rawSamples struct {
	latencies []time.Duration
	elapsed   time.Duration
}

func (s *rawSamples) perSecond() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(len(s.latencies)) / s.elapsed.Seconds()
}

func openRawLoop(dir string, size int) (*rawLoop, error) {
	file, remove, err := rawFile(dir, rawSmallFileBytes, true, false)
	if err != nil {
		return nil, err
	}
	return &rawLoop{file: file, remove: remove, buffer: payloadOf(size)}, nil
}

func (r *rawLoop) close() { r.remove() }

// once is one turn of the loop: its payload, written and synced.
func (r *rawLoop) once() error { return r.writeAndSync(r.buffer) }

// writeAndSync writes p at the loop's next offset, wrapping around inside
// the file (whose blocks are all written), then fdatasyncs. The TCP floor
// writes what it receives through it too. Not safe for concurrent use.
func (r *rawLoop) writeAndSync(p []byte) error {
	if r.offset+int64(len(p)) > rawSmallFileBytes {
		r.offset = 0
	}
	if _, err := r.file.WriteAt(p, r.offset); err != nil {
		return err
	}
	r.offset += int64(len(p))
	return r.file.SyncData()
}

// runBackToBack runs the loop for duration, each sync right after the last.
func (r *rawLoop) runBackToBack(duration time.Duration) error {
	start := time.Now()
	for time.Since(start) < duration {
		began := time.Now()
		if err := r.once(); err != nil {
			return err
		}
		r.backToBack.latencies = append(r.backToBack.latencies, time.Since(began))
	}
	r.backToBack.elapsed += time.Since(start)
	return nil
}

// runAtRate issues the loop rate times a second for duration, open loop:
// the disk's latency under the arrival pattern L1 uses, where the machine
// idles between syncs as it does between L1's produces.
func (r *rawLoop) runAtRate(rate int, duration time.Duration) error {
	start := time.Now()
	latencies, err := benchrig.OpenLoop(rate, duration, r.once)
	if err != nil {
		return err
	}
	r.atRate.latencies = append(r.atRate.latencies, latencies...)
	r.atRate.elapsed += time.Since(start)
	return nil
}

// rawBandwidth is durable sequential bandwidth: 1 MiB writes, each
// followed by an fdatasync, into a fallocated file, buffered or with
// O_DIRECT (the two ways an IronBus log writes), in MB/s. It stops at
// duration or at the end of the 1 GiB file.
func rawBandwidth(dir string, duration time.Duration, direct bool) (float64, error) {
	file, remove, err := rawFile(dir, rawLargeFileBytes, false, direct)
	if err != nil {
		return 0, err
	}
	defer remove()
	buffer := vfs.AlignedBuffer(rawLargeWrite)[:rawLargeWrite]
	copy(buffer, payloadOf(rawLargeWrite))
	var written int64
	start := time.Now()
	for time.Since(start) < duration && written+rawLargeWrite <= rawLargeFileBytes {
		if _, err := file.WriteAt(buffer, written); err != nil {
			return 0, err
		}
		if err := file.SyncData(); err != nil {
			return 0, err
		}
		written += rawLargeWrite
	}
	return float64(written) / 1e6 / time.Since(start).Seconds(), nil
}

// rawFile creates a scratch file of size bytes under dir, fallocated and,
// when zeroFill, written with zeros, then synced, so the loop measures
// steady-state syncs; remove closes and deletes it.
func rawFile(dir string, size int64, zeroFill, direct bool) (vfs.File, func(), error) {
	var fsys vfs.OS
	path := filepath.Join(dir, fmt.Sprintf("peers-raw-%d-%d.bin", os.Getpid(), time.Now().UnixNano()))
	file, err := fsys.OpenFile(path, vfs.ReadWrite|vfs.Create|vfs.Exclusive)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (vfs.File, func(), error) {
		_ = file.Close()
		_ = fsys.Remove(path)
		return nil, nil, err
	}
	if err := file.Allocate(0, size); err != nil && !errors.Is(err, vfs.ErrNotSupported) {
		return fail(err)
	}
	if zeroFill {
		zeros := make([]byte, 1<<20)
		for offset := int64(0); offset < size; offset += int64(len(zeros)) {
			if _, err := file.WriteAt(zeros, offset); err != nil {
				return fail(err)
			}
		}
	}
	if err := file.Sync(); err != nil {
		return fail(err)
	}
	if direct {
		_ = file.Close()
		if file, err = fsys.OpenFile(path, vfs.ReadWrite|vfs.Direct); err != nil {
			_ = fsys.Remove(path)
			return nil, nil, err
		}
	}
	return file, func() { _ = file.Close(); _ = fsys.Remove(path) }, nil
}
