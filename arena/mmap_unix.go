//go:build unix

package arena

import "golang.org/x/sys/unix"

// offHeapSupported: unix systems have anonymous private mappings, memory
// the Go runtime neither scans, moves nor counts against GOMEMLIMIT.
const offHeapSupported = true

// mapAnonymous maps size bytes of zeroed, private, anonymous memory. Pages
// become resident only when first touched.
func mapAnonymous(size int) ([]byte, error) {
	return unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
}

// unmapAnonymous returns a mapping from mapAnonymous to the kernel.
func unmapAnonymous(memory []byte) error {
	return unix.Munmap(memory)
}
