//go:build !unix

package arena

// offHeapSupported: without anonymous mappings (Windows, wasm) an off-heap
// slab falls back to a Go slice. The reactors that need off-heap memory
// (io_uring) exist only on Linux, and the std backend does synchronous
// reads, so a heap slab is correct there.
const offHeapSupported = false

// mapAnonymous is never called when offHeapSupported is false.
func mapAnonymous(size int) ([]byte, error) {
	return nil, ErrUnsupported
}

// unmapAnonymous is never called when offHeapSupported is false.
func unmapAnonymous(memory []byte) error {
	return ErrUnsupported
}
