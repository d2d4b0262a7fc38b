package uring

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// Trials for Detect: each sets up a scratch ring, tries one capability on
// a socket pair or a loopback listener, then cancels and drains before the
// memory involved is released.

// Tokens of the trial operations.
const (
	trialOperation = 1
	trialCancel    = 2
)

// tryMultishotRecv registers a one-buffer ring and arms a multishot RECV
// on a socket pair with a byte already waiting. The RECV must complete into
// the buffer and stay armed.
func tryMultishotRecv(setup SetupFunc) (bufferRing, multishotRecv bool) {
	r, err := newRing(8, Options{}, setup)
	if err != nil {
		return false, false
	}
	defer r.Close()
	buffers, err := NewBufferRing(r, 1, 1, 64)
	if err != nil {
		return false, false
	}
	defer buffers.Close()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return true, false
	}
	defer unix.Close(pair[0])
	defer unix.Close(pair[1])
	if _, err := unix.Write(pair[1], []byte{1}); err != nil {
		return true, false
	}
	sqe := r.GetSQE()
	sqe.PrepMultishotRecv(pair[0], buffers.Group(), 0)
	sqe.SetUserData(trialOperation)
	cqe, err := r.awaitCQE(trialOperation, detectWait)
	_, hasBuffer := cqe.BufferID()
	multishotRecv = err == nil && cqe.Result == 1 && hasBuffer && cqe.More()
	if err == nil && cqe.More() {
		r.cancelAndDrain(trialOperation)
	}
	return true, multishotRecv
}

// tryMultishotAccept arms a multishot ACCEPT on a loopback listener and
// connects once. The ACCEPT must post the connection and stay armed.
func tryMultishotAccept(setup SetupFunc) bool {
	r, err := newRing(8, Options{}, setup)
	if err != nil {
		return false
	}
	defer r.Close()
	listener, address, err := listenLoopback()
	if err != nil {
		return false
	}
	defer unix.Close(listener)
	sqe := r.GetSQE()
	sqe.PrepMultishotAccept(listener, unix.SOCK_CLOEXEC)
	sqe.SetUserData(trialOperation)
	if _, err := r.Submit(); err != nil {
		return false
	}
	client, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(client)
	if err := unix.Connect(client, address); err != nil {
		return false
	}
	cqe, err := r.awaitCQE(trialOperation, detectWait)
	if err == nil && cqe.Result >= 0 {
		unix.Close(int(cqe.Result))
	}
	if err == nil && cqe.More() {
		r.cancelAndDrain(trialOperation)
	}
	return err == nil && cqe.Result >= 0 && cqe.More()
}

// listenLoopback opens a TCP listener on 127.0.0.1 with a kernel-chosen
// port and returns it with its address.
func listenLoopback() (int, unix.Sockaddr, error) {
	listener, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, nil, err
	}
	err = unix.Bind(listener, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
	if err == nil {
		err = unix.Listen(listener, 16)
	}
	var address unix.Sockaddr
	if err == nil {
		address, err = unix.Getsockname(listener)
	}
	if err != nil {
		unix.Close(listener)
		return -1, nil, err
	}
	return listener, address, nil
}

// awaitCQE submits what is queued and reaps until the CQE carrying token
// arrives or timeout passes; CQEs reaped on the way are discarded.
func (r *Ring) awaitCQE(token uint64, timeout time.Duration) (CQE, error) {
	deadline := time.Now().Add(timeout)
	for {
		var found CQE
		seen := false
		r.ForEachCQE(func(cqe CQE) bool {
			found, seen = cqe, cqe.UserData == token
			return !seen
		})
		if seen {
			return found, nil
		}
		_, err := r.SubmitAndWaitTimeout(1, time.Until(deadline))
		if err != nil && (!errors.Is(err, ErrTimeout) || r.CQReady() == 0) {
			return CQE{}, err
		}
	}
}

// cancelAndDrain cancels the operation carrying token and reaps until its
// final CQE (one without CQEFlagMore), so nothing still writes into memory
// the caller is about to release.
func (r *Ring) cancelAndDrain(token uint64) error {
	sqe := r.GetSQE()
	if sqe == nil {
		return ErrBusy
	}
	sqe.PrepCancel(token, 0)
	sqe.SetUserData(trialCancel)
	for {
		cqe, err := r.awaitCQE(token, detectWait)
		if err != nil || !cqe.More() {
			return err
		}
	}
}
