package uring

import (
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// detected runs the real detection once for every test that needs a ring.
var detected = sync.OnceValue(Detect)

// requireUring skips when this machine cannot run io_uring (CI containers
// commonly refuse it), so `go test ./...` stays green everywhere.
func requireUring(t testing.TB) {
	t.Helper()
	if capabilities := detected(); !capabilities.Available {
		t.Skip("io_uring unavailable: " + capabilities.Reason)
	}
}

func newTestRing(t testing.TB, entries uint32, options Options) *Ring {
	t.Helper()
	requireUring(t)
	r, err := New(entries, options)
	if err != nil {
		t.Fatalf("New(%d, %+v): %v", entries, options, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// offHeap is memory the kernel may write asynchronously.
func offHeap(t testing.TB, size int) []byte {
	t.Helper()
	memory, err := mapAnonymous(size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(memory) })
	return memory
}

func addressOf(memory []byte) uintptr {
	return uintptr(unsafe.Pointer(&memory[0]))
}

// getSQE fails the test instead of returning nil.
func getSQE(t testing.TB, r *Ring) *SQE {
	t.Helper()
	sqe := r.GetSQE()
	if sqe == nil {
		t.Fatal("GetSQE: submission queue full")
	}
	return sqe
}

// await reaps until the CQE carrying token arrives.
func await(t testing.TB, r *Ring, token uint64) CQE {
	t.Helper()
	cqe, err := r.awaitCQE(token, 5*time.Second)
	if err != nil {
		t.Fatalf("waiting for CQE %#x: %v", token, err)
	}
	return cqe
}

// collect reaps until count CQEs arrived and returns them by token.
func collect(t testing.TB, r *Ring, count int) map[uint64]CQE {
	t.Helper()
	found := make(map[uint64]CQE)
	deadline := time.Now().Add(5 * time.Second)
	for len(found) < count {
		if _, err := r.SubmitAndWaitTimeout(1, time.Until(deadline)); err != nil {
			t.Fatalf("after %d of %d CQEs: %v", len(found), count, err)
		}
		r.ForEachCQE(func(cqe CQE) bool {
			found[cqe.UserData] = cqe
			return true
		})
	}
	return found
}

// listen opens a loopback TCP listener closed at cleanup.
func listen(t testing.TB) (int, unix.Sockaddr) {
	t.Helper()
	listener, address, err := listenLoopback()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(listener) })
	return listener, address
}

// dial connects a blocking client socket closed at cleanup.
func dial(t testing.TB, address unix.Sockaddr) int {
	t.Helper()
	client, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(client) })
	if err := unix.Connect(client, address); err != nil {
		t.Fatal(err)
	}
	return client
}

func write(t testing.TB, fd int, data string) {
	t.Helper()
	if n, err := unix.Write(fd, []byte(data)); err != nil || n != len(data) {
		t.Fatalf("write %q: %d, %v", data, n, err)
	}
}

// lockThread keeps the test goroutine on its OS thread until cleanup, as a
// single-issuer ring requires.
func lockThread(t testing.TB) {
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
}
