package uring

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestNopRoundTrip(t *testing.T) {
	r := newTestRing(t, 8, Options{})
	sqe := getSQE(t, r)
	sqe.PrepNop()
	sqe.SetUserData(EncodeUserData(1, 2, 3))
	if submitted, err := r.SubmitAndWait(1); err != nil || submitted != 1 {
		t.Fatalf("SubmitAndWait = %d, %v", submitted, err)
	}
	cqe, ok := r.PeekCQE()
	if !ok || cqe.UserData != EncodeUserData(1, 2, 3) || cqe.Result != 0 {
		t.Fatalf("PeekCQE = %+v, %v", cqe, ok)
	}
	r.SeenCQE()
	if _, ok := r.PeekCQE(); ok || r.CQReady() != 0 {
		t.Fatal("CQE still ready after SeenCQE")
	}
}

func TestNopBatch(t *testing.T) {
	r := newTestRing(t, 64, Options{})
	for round := range 3 {
		for index := range 32 {
			sqe := getSQE(t, r)
			sqe.PrepNop()
			sqe.SetUserData(EncodeUserData(1, uint32(index), uint32(round)))
		}
		if submitted, err := r.SubmitAndWait(32); err != nil || submitted != 32 {
			t.Fatalf("SubmitAndWait(32) = %d, %v", submitted, err)
		}
		seen := make(map[uint32]bool)
		consumed := r.ForEachCQE(func(cqe CQE) bool {
			_, slot, generation := DecodeUserData(cqe.UserData)
			if generation != uint32(round) || cqe.Result != 0 {
				t.Errorf("CQE %+v in round %d", cqe, round)
			}
			seen[slot] = true
			return true
		})
		if consumed != 32 || len(seen) != 32 {
			t.Fatalf("round %d: consumed %d, distinct %d", round, consumed, len(seen))
		}
	}
}

func TestForEachCQEStops(t *testing.T) {
	r := newTestRing(t, 8, Options{})
	for token := range uint64(3) {
		sqe := getSQE(t, r)
		sqe.PrepNop()
		sqe.SetUserData(token)
	}
	if _, err := r.SubmitAndWait(3); err != nil {
		t.Fatal(err)
	}
	consumed := r.ForEachCQE(func(cqe CQE) bool { return cqe.UserData != 1 })
	if consumed != 2 || r.CQReady() != 1 {
		t.Fatalf("consumed %d, %d left; want 2 and 1", consumed, r.CQReady())
	}
}

func TestGetSQEFullAndZeroed(t *testing.T) {
	r := newTestRing(t, 4, Options{})
	for range r.SQEntries() {
		getSQE(t, r).PrepNop()
	}
	if r.GetSQE() != nil || r.SQSpace() != 0 {
		t.Fatal("GetSQE handed out more SQEs than the ring has")
	}
	if _, err := r.SubmitAndWait(4); err != nil {
		t.Fatal(err)
	}
	r.ForEachCQE(func(CQE) bool { return true })

	// Poison one slot with 0xFF everywhere (an invalid SQE the kernel
	// fails), then walk the ring round until that slot comes back.
	poisoned := getSQE(t, r)
	raw := (*[sqeSize]byte)(unsafe.Pointer(poisoned))
	for index := range raw {
		raw[index] = 0xFF
	}
	if cqe := await(t, r, ^uint64(0)); cqe.Result >= 0 {
		t.Fatalf("all-0xFF SQE completed with %d, want an error", cqe.Result)
	}
	for range r.SQEntries() - 1 {
		getSQE(t, r).PrepNop()
	}
	if _, err := r.SubmitAndWait(r.SQEntries() - 1); err != nil {
		t.Fatal(err)
	}
	r.ForEachCQE(func(CQE) bool { return true })
	reused := getSQE(t, r)
	if reused != poisoned {
		t.Fatalf("expected slot %p back, got %p", poisoned, reused)
	}
	if *reused != (SQE{}) {
		t.Fatalf("reused SQE not zeroed: %+v", *reused)
	}
	reused.PrepNop()
}

func TestTimeout(t *testing.T) {
	r := newTestRing(t, 8, Options{})
	sqe := getSQE(t, r)
	sqe.PrepTimeout(r.Timespec(sqe, 20*time.Millisecond), 0, 0)
	sqe.SetUserData(9)
	start := time.Now()
	cqe := await(t, r, 9)
	if !errors.Is(cqe.Err(), unix.ETIME) {
		t.Fatalf("timeout completed with %v, want ETIME", cqe.Err())
	}
	if elapsed := time.Since(start); elapsed < 19*time.Millisecond {
		t.Fatalf("timeout fired after %v", elapsed)
	}
}

func TestSubmitAndWaitTimeoutExpires(t *testing.T) {
	r := newTestRing(t, 8, Options{})
	start := time.Now()
	_, err := r.SubmitAndWaitTimeout(1, 50*time.Millisecond)
	elapsed := time.Since(start)
	if !errors.Is(err, ErrTimeout) || r.CQReady() != 0 {
		t.Fatalf("err = %v, ready = %d; want ErrTimeout and none", err, r.CQReady())
	}
	if elapsed < 50*time.Millisecond || elapsed > 2*time.Second {
		t.Fatalf("returned after %v", elapsed)
	}
}

// TestWaitSurvivesSignals signals the waiting thread every 200µs: the wait
// must neither fail with EINTR nor end early, nor restart its timeout.
func TestWaitSurvivesSignals(t *testing.T) {
	r := newTestRing(t, 8, Options{})
	threadID := make(chan int)
	results := make(chan error, 2)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		threadID <- unix.Gettid()
		start := time.Now()
		if _, err := r.SubmitAndWaitTimeout(1, 100*time.Millisecond); !errors.Is(err, ErrTimeout) || time.Since(start) < 100*time.Millisecond {
			results <- errors.Join(errors.New("timed wait ended early or wrongly"), err)
			return
		}
		sqe := r.GetSQE()
		sqe.PrepTimeout(r.Timespec(sqe, 50*time.Millisecond), 0, 0)
		start = time.Now()
		if _, err := r.SubmitAndWait(1); err != nil || r.CQReady() != 1 || time.Since(start) < 49*time.Millisecond {
			results <- errors.Join(errors.New("untimed wait ended early"), err)
			return
		}
		results <- nil
	}()
	tid := <-threadID
	var signals atomic.Int64
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Microsecond):
				if unix.Tgkill(unix.Getpid(), tid, unix.SIGURG) == nil {
					signals.Add(1)
				}
			}
		}
	}()
	err := <-results
	close(done)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d signals during the waits", signals.Load())
}

// TestCompletionOverflowFlush posts more CQEs than the CQ holds: the kernel
// parks the rest (NODROP) and the next Submit flushes them.
func TestCompletionOverflowFlush(t *testing.T) {
	r := newTestRing(t, 4, Options{CQSize: 8})
	for token := range uint64(12) {
		sqe := r.GetSQE()
		if sqe == nil {
			if _, err := r.Submit(); err != nil {
				t.Fatal(err)
			}
			sqe = getSQE(t, r)
		}
		sqe.PrepNop()
		sqe.SetUserData(token)
	}
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	if loadAcquire(r.sq.flags)&sqCQOverflow == 0 {
		t.Fatal("12 CQEs in an 8-entry CQ did not set IORING_SQ_CQ_OVERFLOW")
	}
	seen := r.ForEachCQE(func(CQE) bool { return true })
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	seen += r.ForEachCQE(func(CQE) bool { return true })
	if seen != 12 || r.Overflow() != 0 {
		t.Fatalf("reaped %d of 12, overflow counter %d", seen, r.Overflow())
	}
}

func TestCQSizeFloor(t *testing.T) {
	requireUring(t)
	if r, err := New(8, Options{CQSize: 8}); err == nil {
		r.Close()
		t.Fatal("CQ smaller than 2×SQ accepted")
	}
	r := newTestRing(t, 8, Options{CQSize: 64})
	if r.SQEntries() != 8 || r.CQEntries() != 64 {
		t.Fatalf("sizes %d/%d, want 8/64", r.SQEntries(), r.CQEntries())
	}
}

func TestClosedRing(t *testing.T) {
	requireUring(t)
	r, err := New(4, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Submit(); !errors.Is(err, ErrClosed) {
		t.Errorf("Submit after Close: %v", err)
	}
	if r.GetSQE() != nil || r.ForEachCQE(func(CQE) bool { return true }) != 0 || r.Close() != nil {
		t.Error("closed ring still hands out SQEs or CQEs, or a second Close failed")
	}
}

// TestEnableOnLoopThread creates a disabled single-issuer ring on any
// thread and enables it from the locked thread that then uses it.
func TestEnableOnLoopThread(t *testing.T) {
	requireUring(t)
	if !detected().DeferTaskrun {
		t.Skip("no DEFER_TASKRUN")
	}
	r := newTestRing(t, 8, Options{DeferTaskrun: true, Disabled: true})
	errs := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		getSQE(t, r).PrepNop()
		if _, err := r.Submit(); !errors.Is(err, unix.EBADFD) {
			errs <- errors.Join(errors.New("submit before Enable did not fail with EBADFD"), err)
			return
		}
		r.ForEachCQE(func(CQE) bool { return true })
		if err := r.Enable(); err != nil {
			errs <- err
			return
		}
		sqe := getSQE(t, r)
		sqe.PrepNop()
		sqe.SetUserData(5)
		_, err := r.awaitCQE(5, 5*time.Second)
		errs <- err
	}()
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

func TestMsgRing(t *testing.T) {
	sender := newTestRing(t, 8, Options{})
	receiver := newTestRing(t, 8, Options{})
	sqe := getSQE(t, sender)
	sqe.PrepMsgRing(receiver.Fd(), 42, EncodeUserData(3, 4, 5), 0)
	sqe.SetUserData(1)
	if cqe := await(t, sender, 1); cqe.Result != 0 {
		t.Fatalf("MSG_RING sender CQE %+v", cqe)
	}
	if cqe := await(t, receiver, EncodeUserData(3, 4, 5)); cqe.Result != 42 {
		t.Fatalf("MSG_RING receiver CQE %+v", cqe)
	}
}

// TestEventfd reads a wake-up eventfd through the ring, the way a loop
// keeps one READ posted, and registers another for CQE notifications.
func TestEventfd(t *testing.T) {
	r := newTestRing(t, 8, Options{})
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(wake)
	counter := offHeap(t, 8)
	sqe := getSQE(t, r)
	sqe.PrepRead(wake, addressOf(counter), 8, ReadAtCurrentPosition)
	sqe.SetUserData(1)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	if _, err := unix.Write(wake, one); err != nil {
		t.Fatal(err)
	}
	if cqe := await(t, r, 1); cqe.Result != 8 || counter[0] != 1 {
		t.Fatalf("eventfd READ %+v, counter %v", cqe, counter)
	}

	notify, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(notify)
	if err := r.RegisterEventfd(notify); err != nil {
		t.Fatal(err)
	}
	getSQE(t, r).PrepNop()
	await(t, r, 0)
	value := make([]byte, 8)
	if _, err := unix.Read(notify, value); err != nil || value[0] == 0 {
		t.Fatalf("registered eventfd not signalled: %v %v", value, err)
	}
	if err := r.UnregisterEventfd(); err != nil {
		t.Fatal(err)
	}
}

func TestProbe(t *testing.T) {
	r := newTestRing(t, 4, Options{})
	ops, err := Probe(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range append(RequiredOps, OpWrite, OpMsgRing) {
		if !ops.Has(op) {
			t.Errorf("probe lacks %v on kernel %s", op, detected().Kernel)
		}
	}
}

// TestSingleIssuerIsBoundToItsThread shows why the loop must lock its OS
// thread: another thread's submit is refused with EEXIST.
func TestSingleIssuerIsBoundToItsThread(t *testing.T) {
	requireUring(t)
	if !detected().SingleIssuer {
		t.Skip("no SINGLE_ISSUER")
	}
	lockThread(t)
	r := newTestRing(t, 8, Options{SingleIssuer: true})
	other := make(chan error)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		getSQE(t, r).PrepNop()
		_, err := r.Submit()
		other <- err
	}()
	if err := <-other; !errors.Is(err, unix.EEXIST) {
		t.Fatalf("submit from another thread: %v, want EEXIST", err)
	}
	if _, err := r.awaitCQE(0, 5*time.Second); err != nil {
		t.Fatalf("owner thread: %v", err)
	}
}
