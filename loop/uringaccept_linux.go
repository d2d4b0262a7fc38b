package loop

import (
	"errors"
	"fmt"

	"github.com/ironbus/ironbus/loop/uring"
	"golang.org/x/sys/unix"
)

// Accepting is reactor 0's job (see URingServer for why one reactor
// accepts for all): one multishot ACCEPT posts a completion per connection
// and stays armed while its completions carry IORING_CQE_F_MORE.

var acceptToken = uring.EncodeUserData(opAccept, 0, 0)

// armAccept posts the multishot ACCEPT on the listener, unless the server
// is already draining. Accepted sockets stay blocking, like the listener:
// the ring polls them itself.
func (r *uringReactor) armAccept() {
	if r.listenFD < 0 || r.accepting {
		return
	}
	if r.server.draining.Load() || !r.haltBegan.IsZero() {
		r.reportAcceptEnded(nil)
		return
	}
	sqe := r.sqe()
	sqe.PrepMultishotAccept(r.listenFD, unix.SOCK_CLOEXEC)
	sqe.SetUserData(acceptToken)
	r.accepting, r.acceptCancelled = true, false
}

// accepted handles one ACCEPT completion: a new connection, or an error;
// without IORING_CQE_F_MORE the ACCEPT has ended and is armed again unless
// the server drains or the error is not a passing one.
func (r *uringReactor) accepted(cqe uring.CQE) {
	if !cqe.More() {
		r.accepting = false
	}
	err := cqe.Err()
	if err == nil {
		r.server.start(int(cqe.Result), r)
	}
	if r.accepting {
		return
	}
	switch {
	case r.server.draining.Load() || !r.haltBegan.IsZero():
		r.reportAcceptEnded(nil)
	case err == nil, errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN), errors.Is(err, unix.ECONNABORTED),
		errors.Is(err, unix.ECANCELED), errors.Is(err, unix.ENOBUFS), errors.Is(err, unix.ENOMEM):
		r.armAccept()
	case errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE):
		// Rearming at once would spin while no descriptor is free: wait
		// for the next timeout check, when connections may have closed.
		r.server.cfg.Logger.Warn("accept: out of file descriptors", "error", err.Error())
		r.acceptRetry = true
	default:
		r.reportAcceptEnded(fmt.Errorf("loop: accept: %w", err))
	}
}

// checkAccept cancels the ACCEPT once the server drains. Shutdown also
// shuts the listener down, which ends the ACCEPT by itself; the cancel
// makes that certain.
func (r *uringReactor) checkAccept() {
	if r.accepting && !r.acceptCancelled && r.server.draining.Load() {
		r.cancel(acceptToken)
		r.acceptCancelled = true
	}
}

// reportAcceptEnded tells Serve, once, that accepting is over and why.
func (r *uringReactor) reportAcceptEnded(err error) {
	if r.index != 0 || r.acceptReported {
		return
	}
	r.acceptReported = true
	r.server.acceptEnded <- err
}
