package crashtest

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ironbus/ironbus/segment/vfs"
)

// ErrPowerCut is what every operation returns from the cut on.
var ErrPowerCut = fmt.Errorf("%w: power cut", vfs.ErrInjected)

// PowerCut is a file system over a MemFS that loses power at its k-th
// mutating operation (counting from 0): that operation takes the crash
// images and fails, and so does every operation after it, as if the
// process had died there. A sweep runs a workload once for each k, until
// the workload finishes before its k-th write (Cut reports false).
type PowerCut struct {
	mem     *vfs.MemFS
	at      int64
	options []vfs.CrashOptions
	fs      vfs.FS

	ops    atomic.Int64
	paused atomic.Bool
	dead   atomic.Bool

	mu     sync.Mutex // the cut may come on any goroutine of the workload
	images []*vfs.MemFS
}

// CutAtWrite returns a file system over mem that loses power at its k-th
// mutating operation, taking one crash image of mem per options (one with
// the zero CrashOptions, only what was synced, when none are given).
func CutAtWrite(mem *vfs.MemFS, k int64, options ...vfs.CrashOptions) *PowerCut {
	if len(options) == 0 {
		options = []vfs.CrashOptions{{}}
	}
	p := &PowerCut{mem: mem, at: k, options: options}
	p.fs = vfs.Inject(mem, vfs.InjectorFunc(p.inject))
	return p
}

func (p *PowerCut) inject(op vfs.Op) error {
	if p.dead.Load() {
		return ErrPowerCut
	}
	if p.paused.Load() || !op.Kind.IsMutation() || p.ops.Add(1)-1 != p.at {
		return nil
	}
	// Dead before the images: an operation of another goroutine that
	// passed its check just before finishes after them (it is not in
	// them), and nothing it leads to may pass as if the power were on.
	p.dead.Store(true)
	p.mu.Lock()
	for _, options := range p.options {
		p.images = append(p.images, p.mem.CrashClone(options))
	}
	p.mu.Unlock()
	return ErrPowerCut
}

// FS is the file system to run the workload on.
func (p *PowerCut) FS() vfs.FS { return p.fs }

// Pause stops counting writes (such as recovery's, when only the
// workload's are swept) until Count.
func (p *PowerCut) Pause() { p.paused.Store(true) }

// Count counts writes again after Pause.
func (p *PowerCut) Count() { p.paused.Store(false) }

// Cut reports whether the power went.
func (p *PowerCut) Cut() bool { return p.dead.Load() }

// Image is the first crash image taken at the cut (nil before it).
func (p *PowerCut) Image() *vfs.MemFS {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.images) == 0 {
		return nil
	}
	return p.images[0]
}

// Images are the crash images taken at the cut, one per CrashOptions in
// order (none before it).
func (p *PowerCut) Images() []*vfs.MemFS {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*vfs.MemFS(nil), p.images...)
}
