package loop

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// parker lets a reactor sleep in Go's netpoller instead of in a blocking
// system call. A goroutine blocked in epoll_wait or io_uring_enter keeps its
// P until sysmon takes it back, which is 20 µs at best and up to 10 ms once
// sysmon has backed off; on a two-core machine two sleeping reactors then
// starve every other goroutine (the sessions, the appender, the clients of
// a benchmark). Measured: 64-connection echo ran 7 to 14 times slower than
// the std backend that way. Parked here, the reactor holds no P, and the
// runtime's own poller wakes it when the watched descriptor is readable.
//
// The watched descriptor is a duplicate of one that becomes readable when
// the reactor has work: the epoll instance itself (an epoll fd polls
// readable when it has ready events) or the ring's completion eventfd.
type parker struct {
	file *os.File
	raw  syscall.RawConn
	// ready is the check of the park under way, and read the function
	// handed to the netpoller, made once: a closure made per park would
	// be an allocation per reactor pass.
	ready func() bool
	read  func(uintptr) bool
}

func newParker(fd int) (*parker, error) {
	duplicate, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("loop: duplicate descriptor for the netpoller: %w", err)
	}
	if err := unix.SetNonblock(duplicate, true); err != nil {
		_ = unix.Close(duplicate)
		return nil, fmt.Errorf("loop: non-blocking descriptor for the netpoller: %w", err)
	}
	file := os.NewFile(uintptr(duplicate), "reactor")
	raw, err := file.SyscallConn()
	if err != nil {
		_ = file.Close()
		return nil, fmt.Errorf("loop: netpoller: %w", err)
	}
	p := &parker{file: file, raw: raw}
	p.read = func(uintptr) bool { return p.ready() }
	return p, nil
}

// park calls ready until it reports true, sleeping in the netpoller while
// it reports false, for at most timeout. It returns nil when ready said
// true and when the timeout passed; an error only when the parker broke.
// ready should be made once by the caller, not per call. Called by the
// reactor goroutine only.
func (p *parker) park(timeout time.Duration, ready func() bool) error {
	if err := p.file.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	p.ready = ready
	err := p.raw.Read(p.read)
	p.ready = nil
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	return err
}

func (p *parker) close() { _ = p.file.Close() }
