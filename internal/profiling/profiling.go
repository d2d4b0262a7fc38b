package profiling

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
)

// ErrBusy refuses a CPU profile while another runs in the process.
var ErrBusy = errors.New("profiling: a CPU profile is already running")

// Run is a CPU profile being written.
type Run struct {
	dir string
	cpu *os.File
}

// Start creates dir if needed and starts the CPU profile into
// dir/cpu.pprof.
func Start(dir string) (*Run, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cpu, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		_ = cpu.Close()
		return nil, fmt.Errorf("%w: %w", ErrBusy, err)
	}
	return &Run{dir: dir, cpu: cpu}, nil
}

// Stop ends the CPU profile and writes dir/heap.pprof.
func (r *Run) Stop() error {
	pprof.StopCPUProfile()
	_ = r.cpu.Close() // the profile is written; a close error loses nothing of it
	heap, err := os.Create(filepath.Join(r.dir, "heap.pprof"))
	if err != nil {
		return err
	}
	return errors.Join(pprof.WriteHeapProfile(heap), heap.Close())
}
