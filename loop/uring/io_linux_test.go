package uring

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFileWriteRead writes a page from an off-heap buffer and reads it
// back into another, as one linked chain.
func TestFileWriteRead(t *testing.T) {
	r := newTestRing(t, 8, Options{})
	fd, err := unix.Open(filepath.Join(t.TempDir(), "data"), unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	out, in := offHeap(t, 4096), offHeap(t, 4096)
	for index := range out {
		out[index] = byte(index * 7)
	}
	sqe := getSQE(t, r)
	sqe.PrepWrite(fd, addressOf(out), uint32(len(out)), 0)
	sqe.SetUserData(1)
	sqe.Flags |= SQEIOLink
	sqe = getSQE(t, r)
	sqe.PrepRead(fd, addressOf(in), uint32(len(in)), 0)
	sqe.SetUserData(2)
	cqes := collect(t, r, 2)
	if cqes[1].Result != 4096 || cqes[2].Result != 4096 {
		t.Fatalf("write %+v, read %+v", cqes[1], cqes[2])
	}
	if !bytes.Equal(in, out) {
		t.Fatal("read back different bytes")
	}
}

func TestAcceptRecvSend(t *testing.T) {
	r := newTestRing(t, 8, Options{})
	listener, address := listen(t)
	sqe := getSQE(t, r)
	sqe.PrepAccept(listener, unix.SOCK_CLOEXEC)
	sqe.SetUserData(1)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	client := dial(t, address)
	accepted := await(t, r, 1)
	if accepted.Result < 0 {
		t.Fatalf("accept: %v", accepted.Err())
	}
	server := int(accepted.Result)
	defer unix.Close(server)

	in := offHeap(t, 64)
	sqe = getSQE(t, r)
	sqe.PrepRecv(server, addressOf(in), uint32(len(in)), 0)
	sqe.SetUserData(2)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	write(t, client, "hello")
	if cqe := await(t, r, 2); cqe.Result != 5 || string(in[:5]) != "hello" {
		t.Fatalf("recv %+v %q", cqe, in[:5])
	}

	out := offHeap(t, 64)
	copy(out, "world!")
	sqe = getSQE(t, r)
	sqe.PrepSend(server, addressOf(out), 6, unix.MSG_NOSIGNAL)
	sqe.SetUserData(3)
	if cqe := await(t, r, 3); cqe.Result != 6 {
		t.Fatalf("send %+v", cqe)
	}
	reply := make([]byte, 16)
	if n, err := unix.Read(client, reply); err != nil || string(reply[:n]) != "world!" {
		t.Fatalf("client read %q, %v", reply[:n], err)
	}

	sqe = getSQE(t, r)
	sqe.PrepClose(server)
	sqe.SetUserData(4)
	if cqe := await(t, r, 4); cqe.Result != 0 {
		t.Fatalf("close %+v", cqe)
	}
}

func TestMultishotAccept(t *testing.T) {
	r := newTestRing(t, 8, Options{})
	if !detected().MultishotAccept {
		t.Skip("no multishot accept")
	}
	listener, address := listen(t)
	sqe := getSQE(t, r)
	sqe.PrepMultishotAccept(listener, unix.SOCK_CLOEXEC)
	sqe.SetUserData(1)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	for connection := range 2 {
		dial(t, address)
		cqe := await(t, r, 1)
		if cqe.Result < 0 || !cqe.More() {
			t.Fatalf("connection %d: %+v (F_MORE %v)", connection, cqe, cqe.More())
		}
		unix.Close(int(cqe.Result))
	}
	if err := r.cancelAndDrain(1); err != nil {
		t.Fatal(err)
	}
}

// TestMultishotRecvBufferRing receives three messages through one SQE and
// a two-buffer ring: the third lands in the first buffer again, which only
// works if Recycle and Advance handed it back.
func TestMultishotRecvBufferRing(t *testing.T) {
	r := newTestRing(t, 8, Options{})
	if !detected().MultishotRecv {
		t.Skip("no multishot recv")
	}
	buffers, err := NewBufferRing(r, 7, 2, 256)
	if err != nil {
		t.Fatal(err)
	}
	defer buffers.Close()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pair[0])
	defer unix.Close(pair[1])
	sqe := getSQE(t, r)
	sqe.PrepMultishotRecv(pair[0], buffers.Group(), 0)
	sqe.SetUserData(1)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	var ids []uint16
	for _, message := range []string{"one", "two", "three"} {
		write(t, pair[1], message)
		cqe := await(t, r, 1)
		id, data, ok := buffers.Received(cqe)
		if !ok || string(data) != message || !cqe.More() {
			t.Fatalf("%q: CQE %+v gave %q (buffer %v, F_MORE %v)", message, cqe, data, ok, cqe.More())
		}
		ids = append(ids, id)
		buffers.Recycle(id)
		buffers.Advance()
	}
	if ids[0] == ids[1] || ids[2] != ids[0] {
		t.Fatalf("buffer ids %v: want two distinct, then the first recycled", ids)
	}
	if err := r.cancelAndDrain(1); err != nil {
		t.Fatal(err)
	}
}

func TestCancelPendingRecv(t *testing.T) {
	r := newTestRing(t, 8, Options{})
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pair[0])
	defer unix.Close(pair[1])
	in := offHeap(t, 64)
	sqe := getSQE(t, r)
	sqe.PrepRecv(pair[0], addressOf(in), uint32(len(in)), 0)
	sqe.SetUserData(1)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	sqe = getSQE(t, r)
	sqe.PrepCancel(1, 0)
	sqe.SetUserData(2)
	cqes := collect(t, r, 2)
	if !errors.Is(cqes[1].Err(), unix.ECANCELED) || cqes[2].Result != 0 {
		t.Fatalf("recv %+v (%v), cancel %+v", cqes[1], cqes[1].Err(), cqes[2])
	}
}

// TestCancelFd cancels a pending RECV and a pending multishot RECV on one
// socket with one CancelFd|CancelAll, and each posts its final CQE.
func TestCancelFd(t *testing.T) {
	r := newTestRing(t, 8, Options{})
	buffers, err := NewBufferRing(r, 3, 4, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer buffers.Close()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pair[0])
	defer unix.Close(pair[1])
	in := offHeap(t, 64)
	sqe := getSQE(t, r)
	sqe.PrepRecv(pair[0], addressOf(in), uint32(len(in)), 0)
	sqe.SetUserData(1)
	sqe = getSQE(t, r)
	sqe.PrepMultishotRecv(pair[0], buffers.Group(), 0)
	sqe.SetUserData(2)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	sqe = getSQE(t, r)
	sqe.PrepCancelFd(pair[0], CancelAll)
	sqe.SetUserData(3)
	cqes := collect(t, r, 3)
	if cqes[3].Result != 2 {
		t.Fatalf("cancel %+v, want 2 cancelled", cqes[3])
	}
	for _, token := range []uint64{1, 2} {
		if cqe := cqes[token]; !errors.Is(cqe.Err(), unix.ECANCELED) || cqe.More() {
			t.Fatalf("operation %d ended with %+v, want a final ECANCELED", token, cqe)
		}
	}
}
