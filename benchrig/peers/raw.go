package main

import (
	"time"

	"github.com/ironbus/ironbus/benchrig/floor"
	"github.com/ironbus/ironbus/segment/vfs"
)

// The raw rows measure the disk with no broker in the way, in the same
// run as the brokers: the small-write loop and the TCP floor are package
// benchrig/floor's (shared with ironbus bench --floor); the bandwidth
// row is here. logbench measures the same paths on 1 GiB zero-filled
// files.
const (
	rawLargeFileBytes = 1 << 30 // fallocated: fresh blocks, as a log appends into
	rawLargeWrite     = 1 << 20
)

// rawBandwidth is durable sequential bandwidth: 1 MiB writes, each
// followed by an fdatasync, into a fallocated file, buffered or with
// O_DIRECT (the two ways an IronBus log writes), in MB/s. It stops at
// duration or at the end of the 1 GiB file.
func rawBandwidth(dir string, duration time.Duration, direct bool) (float64, error) {
	file, remove, err := floor.ScratchFile(dir, rawLargeFileBytes, false, direct)
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
