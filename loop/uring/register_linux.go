package uring

import "unsafe"

// Probe asks the kernel which opcodes ring r supports
// (IORING_REGISTER_PROBE, 5.6). Use it, not the kernel version: distro
// kernels backport opcodes.
func Probe(r *Ring) (OpSet, error) {
	// The kernel writes the result during the call only, so heap memory is
	// fine; it must arrive zeroed, which new guarantees.
	result := new(probeResult)
	var ops OpSet
	if err := r.register(registerProbe, unsafe.Pointer(result), uintptr(len(result.Ops))); err != nil {
		return ops, err
	}
	for _, op := range result.Ops[:min(int(result.OpsLength), len(result.Ops))] {
		if op.Flags&probeOpSupported != 0 {
			ops.add(op.Op)
		}
	}
	return ops, nil
}

// RegisterEventfd makes the kernel signal eventfd fd whenever it posts a
// CQE (IORING_REGISTER_EVENTFD), so a ring can be watched by another poller.
func (r *Ring) RegisterEventfd(fd int) error {
	descriptor := int32(fd)
	return r.register(registerEventfd, unsafe.Pointer(&descriptor), 1)
}

// UnregisterEventfd undoes RegisterEventfd.
func (r *Ring) UnregisterEventfd() error {
	return r.register(unregisterEventfd, nil, 0)
}
