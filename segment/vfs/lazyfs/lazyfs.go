package lazyfs

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironbus/ironbus/segment/vfs"
)

var (
	// ErrUnavailable reports that a FUSE mount cannot be made here (not
	// Linux, no /dev/fuse, not root); tests skip on it.
	ErrUnavailable = errors.New("lazyfs: FUSE mount unavailable")
	// ErrMounted reports a Mount on a disk that is already mounted.
	ErrMounted = errors.New("lazyfs: already mounted")
)

// Fault is what the mount does to the operations it serves.
type Fault int32

const (
	// Healthy serves every operation.
	Healthy Fault = iota
	// FailSync fails every fsync, fdatasync and directory fsync with EIO
	// and makes nothing durable; every other operation still works.
	FailSync
	// DeadDisk fails every operation with EIO.
	DeadDisk
)

func (f Fault) String() string {
	switch f {
	case Healthy:
		return "healthy"
	case FailSync:
		return "fail-sync"
	case DeadDisk:
		return "dead-disk"
	}
	return fmt.Sprintf("fault(%d)", int32(f))
}

// Disk is a crashable image served over FUSE. Its methods are safe for
// concurrent use; the FUSE server runs in the calling process.
type Disk struct {
	fault       atomic.Int32
	syncLatency atomic.Int64 // nanoseconds each sync takes before it persists

	mu      sync.Mutex // guards the fields below
	image   *vfs.MemFS
	dir     string  // where it is mounted, "" when not
	mounted mounter // the live server, nil when not mounted
}

// mounter is the platform's live mount.
type mounter interface {
	unmount() error
}

// New returns a disk serving image (a fresh empty one when nil).
func New(image *vfs.MemFS) *Disk {
	if image == nil {
		image = vfs.NewMemFS()
	}
	return &Disk{image: image}
}

// Image returns the file system currently served. After CutPower it is a
// different one: call Image again.
func (d *Disk) Image() *vfs.MemFS {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.image
}

// SetFault switches what the mount does to the operations that follow.
func (d *Disk) SetFault(fault Fault) { d.fault.Store(int32(fault)) }

// SetSyncLatency makes every fsync, fdatasync and directory fsync take
// latency before it persists anything. The image syncs in memory in
// microseconds, which leaves a kill almost nothing unsynced to cut; a real
// device's flush takes milliseconds, during which the broker keeps writing
// the next batches.
func (d *Disk) SetSyncLatency(latency time.Duration) { d.syncLatency.Store(int64(latency)) }

// Fault returns the current fault.
func (d *Disk) Fault() Fault { return Fault(d.fault.Load()) }

// Mount serves the image at dir (an existing empty directory).
func (d *Disk) Mount(dir string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mounted != nil {
		return fmt.Errorf("%w at %s", ErrMounted, d.dir)
	}
	server, err := mount(d, dir)
	if err != nil {
		return err
	}
	d.dir, d.mounted = dir, server
	return nil
}

// Unmount stops serving; a no-op when not mounted. Processes that had
// files open on the mount must have exited.
func (d *Disk) Unmount() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.unmountLocked()
}

func (d *Disk) unmountLocked() error {
	if d.mounted == nil {
		return nil
	}
	if err := d.mounted.unmount(); err != nil {
		return fmt.Errorf("lazyfs: unmounting %s: %w", d.dir, err)
	}
	d.mounted = nil
	return nil
}

// current returns the image the FUSE operations act on.
func (d *Disk) current() *vfs.MemFS {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.image
}

// CutPower is a power failure: the mount goes away, the image is replaced
// by what cut leaves of it, and, if it was mounted, the surviving image is
// mounted again at the same place. It returns what was unsynced at the cut
// (what the cut could take). The fault is left as it was. Kill every
// process using the mount first, as the power would have.
func (d *Disk) CutPower(cut Cut) (vfs.UnsyncedStats, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	dir, wasMounted := d.dir, d.mounted != nil
	if err := d.unmountLocked(); err != nil {
		return vfs.UnsyncedStats{}, err
	}
	exposed := d.image.Unsynced()
	d.image = d.image.CrashClone(cut.crashOptions())
	if !wasMounted {
		return exposed, nil
	}
	server, err := mount(d, dir)
	if err != nil {
		return exposed, err
	}
	d.mounted = server
	return exposed, nil
}

// CutMode is what a power cut does to the writes no sync covered.
type CutMode int

const (
	// DropUnsynced loses every unsynced write and directory change.
	DropUnsynced CutMode = iota
	// KeepSubset keeps a random subset of them, in issue order.
	KeepSubset
	// ReorderSubset keeps a random subset, applied in random order.
	ReorderSubset
	// TearSubset keeps a random subset in random order, with one write
	// per file torn at a 512-byte sector boundary.
	TearSubset
	cutModes
)

func (m CutMode) String() string {
	switch m {
	case DropUnsynced:
		return "drop"
	case KeepSubset:
		return "subset"
	case ReorderSubset:
		return "reorder"
	case TearSubset:
		return "tear"
	}
	return fmt.Sprintf("cutmode(%d)", int(m))
}

// Cut describes one power cut; the same Cut on the same image leaves the
// same bytes.
type Cut struct {
	Mode CutMode
	// Keep is the probability that each unsynced change survives (unused
	// by DropUnsynced).
	Keep float64
	// Seed drives every choice the cut makes.
	Seed uint64
}

// PlanCut picks a cut from a seed: each mode equally often, keeping 10 % to
// 90 % of the unsynced changes.
func PlanCut(seed uint64) Cut {
	random := rand.New(rand.NewPCG(seed, seed^0xc07))
	cut := Cut{Mode: CutMode(random.IntN(int(cutModes))), Seed: random.Uint64()}
	if cut.Mode != DropUnsynced {
		cut.Keep = 0.1 + 0.8*random.Float64()
	}
	return cut
}

func (c Cut) String() string {
	if c.Mode == DropUnsynced {
		return "drop all unsynced"
	}
	return fmt.Sprintf("%s, keep %.0f%% of unsynced", c.Mode, c.Keep*100)
}

func (c Cut) crashOptions() vfs.CrashOptions {
	options := vfs.CrashOptions{Seed: c.Seed, SectorSize: 512}
	if c.Mode == DropUnsynced {
		return options
	}
	options.KeepUnsynced = c.Keep
	options.Reorder = c.Mode == ReorderSubset || c.Mode == TearSubset
	options.Tear = c.Mode == TearSubset
	return options
}
