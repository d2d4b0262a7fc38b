package floor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ironbus/ironbus/benchrig"
	"github.com/ironbus/ironbus/segment/vfs"
)

// SmallFileBytes is the raw loop's file: zero-filled, so small writes
// overwrite written blocks; the loop wraps around in it rather than
// zero-filling a larger one in every run. aroundFileBytes is Around's:
// a run's floors are measured right after the file is made, and a
// device still destaging 64 MiB of zeros from its cache slows the first
// syncs; 8 MiB holds any slice's writes many times over.
const (
	SmallFileBytes  = 64 << 20
	aroundFileBytes = 8 << 20
)

// RawLoop is the write + fdatasync loop on a preallocated zero-filled
// file. It keeps its file open so that it can run in slices around the
// runs it is compared with, and pools what the slices measured.
type RawLoop struct {
	file       vfs.File
	remove     func()
	buffer     []byte
	offset     int64
	fileBytes  int64
	BackToBack Samples // RunBackToBack's slices
	AtRate     Samples // RunAtRate's slices
}

// Samples pools the latencies of a loop's slices and the time they took.
type Samples struct {
	Latencies []time.Duration
	Elapsed   time.Duration
}

// PerSecond is the pooled rate (0 before anything ran).
func (s *Samples) PerSecond() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(len(s.Latencies)) / s.Elapsed.Seconds()
}

// OpenRawLoop makes the loop's file under dir, for messages of size bytes.
func OpenRawLoop(dir string, size int) (*RawLoop, error) {
	return openRawLoop(dir, size, SmallFileBytes)
}

func openRawLoop(dir string, size int, fileBytes int64) (*RawLoop, error) {
	file, remove, err := ScratchFile(dir, fileBytes, true, false)
	if err != nil {
		return nil, err
	}
	return &RawLoop{file: file, remove: remove, buffer: Payload(size), fileBytes: fileBytes}, nil
}

// Close closes and deletes the loop's file.
func (r *RawLoop) Close() { r.remove() }

// Offset is where the loop writes next.
func (r *RawLoop) Offset() int64 { return r.offset }

// once is one turn of the loop: its payload, written and synced.
func (r *RawLoop) once() error { return r.WriteAndSync(r.buffer) }

// WriteAndSync writes p at the loop's next offset, wrapping around inside
// the file (whose blocks are all written), then fdatasyncs. The TCP floor
// writes what it receives through it. Not safe for concurrent use.
func (r *RawLoop) WriteAndSync(p []byte) error {
	if r.offset+int64(len(p)) > r.fileBytes {
		r.offset = 0
	}
	if _, err := r.file.WriteAt(p, r.offset); err != nil {
		return err
	}
	r.offset += int64(len(p))
	return r.file.SyncData()
}

// RunBackToBack runs the loop for duration, each sync right after the last.
func (r *RawLoop) RunBackToBack(duration time.Duration) error {
	start := time.Now()
	for time.Since(start) < duration {
		began := time.Now()
		if err := r.once(); err != nil {
			return err
		}
		r.BackToBack.Latencies = append(r.BackToBack.Latencies, time.Since(began))
	}
	r.BackToBack.Elapsed += time.Since(start)
	return nil
}

// RunAtRate issues the loop rate times a second for duration, open loop:
// the disk's latency when the machine idles between syncs.
func (r *RawLoop) RunAtRate(rate int, duration time.Duration) error {
	start := time.Now()
	latencies, err := benchrig.OpenLoop(rate, duration, r.once)
	if err != nil {
		return err
	}
	r.AtRate.Latencies = append(r.AtRate.Latencies, latencies...)
	r.AtRate.Elapsed += time.Since(start)
	return nil
}

// ScratchFile creates a file of size bytes under dir, fallocated and,
// when zeroFill, written with zeros, then synced, so a loop on it
// measures steady-state syncs; with direct it is reopened with O_DIRECT.
// remove closes and deletes it.
func ScratchFile(dir string, size int64, zeroFill, direct bool) (vfs.File, func(), error) {
	var fsys vfs.OS
	path := filepath.Join(dir, fmt.Sprintf("ironbus-floor-%d-%d.bin", os.Getpid(), time.Now().UnixNano()))
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

// Payload returns a message of size bytes; the content does not matter
// (nothing on the way compresses), only the length.
func Payload(size int) []byte {
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i * 31)
	}
	return payload
}
