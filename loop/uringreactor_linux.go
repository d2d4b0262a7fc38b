package loop

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ironbus/ironbus/loop/uring"
	"golang.org/x/sys/unix"

	"github.com/ironbus/ironbus/ring"
)

// Ring sizes. Each pass may queue a RECV, a SEND and a cancel per
// connection; a full SQ is submitted early (sqe), so the SQ size only
// bounds the work per enter. Multishot operations post many CQEs per SQE,
// hence the larger CQ.
const (
	uringSQEntries = 512
	uringCQEntries = 4096
	// uringBufferGroup is the provided-buffer group of every reactor's
	// ring; each ring has its own, so one id serves all of them.
	uringBufferGroup = 1
	// uringBufferBudget bounds a reactor's provided buffers. They are
	// off-heap (outside GOMEMLIMIT) and a buffer is handed back as soon as
	// its bytes were copied out, so a few dozen cover a pass.
	uringBufferBudget = 1 << 20
	// uringSpillKeep bounds the spill chunks a reactor keeps for reuse
	// (heap memory): a session that pauses often then costs no allocation.
	uringSpillKeep = 512 << 10
	// uringHaltWait bounds how long a stopping reactor waits for cancelled
	// operations to post their final completions.
	uringHaltWait = 2 * time.Second
	// uringMaxIovecs bounds one WRITEV's iovecs (the kernel's IOV_MAX).
	uringMaxIovecs = 1024
)

// uringTask is what another goroutine asks an io_uring reactor to do.
type uringTask struct {
	conn *uringConn
	kind taskKind
	err  error
	fd   int // taskListen: the listening socket
}

// uringReactor is one io_uring event loop. Its goroutine is the only one
// to submit to its ring (not locked to a thread: see newURingServer for
// why the ring is set up without SINGLE_ISSUER). Everything below busy is
// that goroutine's alone; other goroutines reach it through queue, whose
// eventfd is read by a READ the loop keeps posted on the ring.
type uringReactor struct {
	server *URingServer
	index  int
	queue  taskQueue[uringTask]
	halted atomic.Bool
	busy   atomic.Int64 // nanoseconds spent handling completions and tasks

	// submitReady is submitted, bound once for the park; enterErr is a
	// failed submit it saw.
	submitReady func() bool
	enterErr    error
	// dispatching is set while reap dispatches completions[current].
	dispatching bool
	current     int

	ring       *uring.Ring
	buffers    *uring.BufferRing
	wakeTarget []byte // off-heap: the eventfd READ writes its 8 bytes here
	// completionSignal is an eventfd the kernel signals when completion
	// work is queued for this ring; the reactor sleeps on it in the Go
	// netpoller (see parker) instead of inside io_uring_enter.
	completionSignal int
	parker           *parker
	slots            slotTable
	spillPool        spillPool   // chunks for bytes that arrived while a session was paused
	completions      []uring.CQE // reaped this pass, dispatched in order
	collect          func(uring.CQE) bool
	now              time.Time // when this pass began
	lastCheck        time.Time
	haltBegan        time.Time

	wakeArmed       bool
	listenFD        int
	accepting       bool // the multishot ACCEPT is armed
	acceptCancelled bool
	acceptReported  bool
	acceptRetry     bool      // rearm the ACCEPT at the next timeout check
	tearingDown     bool      // the ring is closing: nothing more is submitted
	stale           int       // completions for a slot's previous owner, ignored
	broken          error     // the ring refused every submit: the loop stops
	scratch         uring.SQE // handed out instead of a real SQE once broken
}

func newURingReactor(s *URingServer, index int) *uringReactor {
	r := &uringReactor{server: s, index: index, listenFD: -1, completionSignal: -1,
		queue: taskQueue[uringTask]{wakefd: -1, ring: ring.NewMPSC[uringTask](taskRingCapacity)}}
	r.collect = func(cqe uring.CQE) bool {
		r.completions = append(r.completions, cqe)
		return true
	}
	r.submitReady = r.submitted
	return r
}

// run is the reactor goroutine: it sets the ring up on its locked thread,
// reports the outcome on ready, loops until stopped, then releases
// everything.
func (r *uringReactor) run(options uring.Options, ready chan<- error) {
	defer r.server.running.Done()
	if err := r.open(options); err != nil {
		r.teardown()
		ready <- err
		return
	}
	ready <- nil
	r.loop()
	r.teardown()
}

// open creates the ring, the provided buffers and the wake-up eventfd.
// The eventfd is blocking on purpose: a READ on a non-blocking descriptor
// would complete with EAGAIN instead of waiting for a post.
func (r *uringReactor) open(options uring.Options) error {
	var err error
	if r.ring, err = uring.New(uringSQEntries, options); err != nil {
		return err
	}
	size, count := uringBufferShape(r.server.cfg.ReadBufferSize)
	if r.buffers, err = uring.NewBufferRing(r.ring, uringBufferGroup, count, size); err != nil {
		return fmt.Errorf("loop: io_uring buffer ring: %w", err)
	}
	r.spillPool = spillPool{size: size, keep: uringSpillKeep / size}
	if r.wakeTarget, err = unix.Mmap(-1, 0, 8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE); err != nil {
		return fmt.Errorf("loop: io_uring wake-up buffer: %w", err)
	}
	if r.queue.wakefd, err = unix.Eventfd(0, unix.EFD_CLOEXEC); err != nil {
		return fmt.Errorf("loop: eventfd: %w", err)
	}
	if err := r.openCompletionSignal(); err != nil {
		return err
	}
	r.armWake()
	return nil
}

// openCompletionSignal registers an eventfd for the kernel to signal as
// completions arrive (on a DEFER_TASKRUN ring, as their work is queued) and
// hands it to a parker.
func (r *uringReactor) openCompletionSignal() error {
	var err error
	if r.completionSignal, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		return fmt.Errorf("loop: completion eventfd: %w", err)
	}
	if err := r.ring.RegisterEventfd(r.completionSignal); err != nil {
		return fmt.Errorf("loop: io_uring completion eventfd: %w", err)
	}
	if r.parker, err = newParker(r.completionSignal); err != nil {
		return err
	}
	return nil
}

// enter submits what this pass queued and posts ready completions; when
// none are ready it sleeps in the netpoller until the kernel signals one,
// a post wakes the loop (its eventfd READ completes), or timeout passes.
// A thread asleep in io_uring_enter would keep its P (see parker).
func (r *uringReactor) enter(timeout time.Duration) error {
	r.enterErr = nil
	if r.submitted() {
		return r.enterErr
	}
	if err := r.parker.park(timeout, r.submitReady); err != nil {
		return err
	}
	return r.enterErr
}

// submitted re-arms the completion signal, submits, and reports whether a
// completion is ready or the submit failed (in enterErr). It is also the
// park's check, bound once into submitReady.
func (r *uringReactor) submitted() bool {
	var count [8]byte
	_, _ = unix.Read(r.completionSignal, count[:]) // re-arm; EAGAIN when nothing was signalled
	if _, err := r.ring.Submit(); err != nil && !errors.Is(err, uring.ErrBusy) {
		r.enterErr = err
		return true
	}
	return r.ring.CQReady() > 0
}

// uringBufferShape sizes the provided buffers: ReadBufferSize each, so
// bytes a session leaves unconsumed from one always fit the connection's
// base input buffer, and as many as uringBufferBudget allows (a power of
// two, at least 8).
func uringBufferShape(readBufferSize int) (size int, count uint16) {
	count = 8
	for int(count)*2*readBufferSize <= uringBufferBudget && count < 1<<12 {
		count *= 2
	}
	return readBufferSize, count
}

// stop ends the loop; the run goroutine drains and releases everything.
func (r *uringReactor) stop() {
	r.halted.Store(true)
	r.queue.rearm()
	r.queue.wake()
}

// loop is one io_uring_enter per pass: it submits everything the previous
// pass queued and waits for a completion or the next timeout check.
func (r *uringReactor) loop() {
	var spare []uringTask
	for {
		// ErrBusy (the kernel holds more completions than the CQ takes) is
		// absorbed in enter: reaping below makes room and the next pass
		// submits again.
		if err := r.enter(r.waitTime()); err != nil {
			r.server.cfg.Logger.Error("io_uring_enter failed; the reactor stops", "reactor", r.index, "error", err.Error())
			return
		}
		if lost := r.ring.Overflow(); lost != 0 {
			r.server.cfg.Logger.Error("io_uring lost completions; the reactor stops", "reactor", r.index, "lost", lost)
			return
		}
		if r.broken != nil {
			r.server.cfg.Logger.Error("io_uring reactor stops", "reactor", r.index, "error", r.broken.Error())
			return
		}
		r.now = time.Now()
		r.reap()
		spare = r.runTasks(spare)
		r.checkAccept()
		r.checkTimeouts()
		if r.halted.Load() && r.drained() {
			return
		}
		r.busy.Add(int64(time.Since(r.now)))
	}
}

func (r *uringReactor) waitTime() time.Duration {
	if !r.haltBegan.IsZero() {
		return 10 * time.Millisecond
	}
	return timeoutCheck
}

// reap copies out every ready completion, then dispatches them; sqe may
// append more while it makes room in the rings.
func (r *uringReactor) reap() {
	r.completions = r.completions[:0]
	r.ring.ForEachCQE(r.collect)
	r.dispatching = true
	for i := 0; i < len(r.completions); i++ {
		r.current = i
		r.dispatch(r.completions[i])
	}
	r.dispatching = false
	clear(r.completions)
}

// onlySendsAfter reports whether every completion after the one being
// dispatched is a send's. Reactor only, while dispatching.
func (r *uringReactor) onlySendsAfter() bool {
	for _, cqe := range r.completions[r.current+1:] {
		if kind, _, _ := uring.DecodeUserData(cqe.UserData); kind != opSend {
			return false
		}
	}
	return true
}

// dispatch routes one completion by the kind and slot in its token.
func (r *uringReactor) dispatch(cqe uring.CQE) {
	kind, slot, generation := uring.DecodeUserData(cqe.UserData)
	switch kind {
	case opWake:
		r.woken()
	case opAccept:
		r.accepted(cqe)
	case opRecv, opSend:
		c := r.slots.lookup(slot, generation)
		if c == nil {
			r.stale++
			r.recycle(cqe) // a buffer the kernel filled is ours to give back
			return
		}
		if kind == opRecv {
			r.received(c, cqe)
		} else {
			r.sent(c, cqe)
		}
	}
}

// sqe returns a free SQE, submitting the queued ones first when the SQ is
// full; ErrBusy means the CQ must be drained first, into completions, which
// reap dispatches after the ones it holds.
func (r *uringReactor) sqe() *uring.SQE {
	if r.broken != nil {
		return &r.scratch
	}
	for attempt := 0; ; attempt++ {
		if sqe := r.ring.GetSQE(); sqe != nil {
			return sqe
		}
		_, err := r.ring.Submit()
		switch {
		case errors.Is(err, uring.ErrBusy):
			r.ring.ForEachCQE(r.collect)
		case err != nil && attempt > 8:
			// The ring refuses every submit: this reactor can neither
			// serve nor cancel. The caller gets a scratch SQE that is never
			// submitted, and the loop stops at the end of this pass, loudly;
			// teardown closes the connections (never a panic).
			r.broken = fmt.Errorf("loop: io_uring submission queue stuck: %w", err)
			return &r.scratch
		}
	}
}

// cancel asks the kernel to cancel the operation carrying target.
func (r *uringReactor) cancel(target uint64) {
	sqe := r.sqe()
	sqe.PrepCancel(target, 0)
	sqe.SetUserData(uring.EncodeUserData(opCancel, 0, 0))
}

// armWake posts the READ that completes when another goroutine writes the
// eventfd.
func (r *uringReactor) armWake() {
	sqe := r.sqe()
	sqe.PrepRead(r.queue.wakefd, uintptr(unsafe.Pointer(&r.wakeTarget[0])), 8, uring.ReadAtCurrentPosition)
	sqe.SetUserData(uring.EncodeUserData(opWake, 0, 0))
	r.wakeArmed = true
}

// woken consumes a wake-up: the flag is cleared before the tasks are
// taken, so a post after this point writes the eventfd again.
func (r *uringReactor) woken() {
	r.wakeArmed = false
	r.queue.rearm()
	if r.haltBegan.IsZero() {
		r.armWake()
	}
}

// runTasks handles everything posted since the last pass.
func (r *uringReactor) runTasks(spare []uringTask) []uringTask {
	tasks := r.queue.take(spare)
	for _, t := range tasks {
		c := t.conn
		switch t.kind {
		case taskAdd:
			r.add(c)
		case taskFlush:
			r.flush(c)
		case taskResume:
			r.resume(c)
		case taskStopReading:
			r.stopReading(c, nil)
		case taskClose:
			r.requestClose(c)
		case taskMemory:
			r.memoryArrived(c, t.err)
		case taskListen:
			r.listenFD = t.fd
			r.armAccept()
		}
	}
	return tasks
}

// checkTimeouts ends reading on connections silent past their timeout and
// closes connections whose last output could not be sent in time. A sweep
// every timeoutCheck, like the epoll reactor's, costs no operation per
// connection, and the loop's bounded wait guarantees the sweep runs.
func (r *uringReactor) checkTimeouts() {
	now := r.now
	if now.Sub(r.lastCheck) < timeoutCheck {
		return
	}
	r.lastCheck = now
	if r.acceptRetry {
		r.acceptRetry = false
		r.armAccept()
	}
	r.slots.each(func(c *uringConn) {
		if c.closed {
			return
		}
		timeout := time.Duration(c.readTimeout.Load())
		if c.reading && timeout > 0 && !c.paused.Load() && now.Sub(c.lastRead) > timeout {
			r.stopReading(c, errReadTimeout)
		}
		if c.closing.Load() && !c.closeAt.IsZero() && now.After(c.closeAt) {
			r.closeConn(c)
		}
	})
}

// drained runs once per pass after stop: the first time it closes every
// connection and cancels the loop's own operations; it reports true once
// nothing is in flight, or after uringHaltWait.
func (r *uringReactor) drained() bool {
	if r.haltBegan.IsZero() {
		r.haltBegan = r.now
		r.slots.each(func(c *uringConn) {
			c.closeNow.Store(true)
			r.closeConn(c)
		})
		if r.accepting && !r.acceptCancelled {
			r.cancel(acceptToken)
			r.acceptCancelled = true
		}
		if r.wakeArmed {
			r.cancel(uring.EncodeUserData(opWake, 0, 0))
		}
	}
	if !r.inFlight() {
		return true
	}
	if r.now.Sub(r.haltBegan) > uringHaltWait {
		r.server.cfg.Logger.Warn("io_uring operations still in flight after the halt wait",
			"reactor", r.index, "connections", r.slots.live, "accepting", r.accepting, "wake", r.wakeArmed)
		return true
	}
	return false
}

// inFlight reports whether any operation may still touch the reactor's
// memory or descriptors.
func (r *uringReactor) inFlight() bool {
	return r.accepting || r.wakeArmed || r.slots.live > 0
}

// teardown releases the ring and its memory. Memory an operation may still
// reference (a halt that timed out, a failed enter) is left mapped: a
// leak of a few MiB on a broken path beats the kernel writing into memory
// the Go runtime has reused.
func (r *uringReactor) teardown() {
	inFlight := r.ring != nil && r.inFlight()
	r.tearingDown = true
	if r.buffers != nil && !inFlight {
		_ = r.buffers.Close()
	}
	if r.ring != nil {
		// Closing the ring cancels whatever is left (only after a failed
		// enter or a halt that timed out).
		_ = r.ring.Close()
	}
	r.slots.each(func(c *uringConn) {
		c.closeNow.Store(true)
		r.closeConn(c)
		r.release(c)
	})
	r.reportAcceptEnded(nil)
	if r.wakeTarget != nil && !inFlight {
		_ = unix.Munmap(r.wakeTarget)
	}
	if r.queue.wakefd >= 0 {
		r.queue.close()
	}
	if r.parker != nil {
		r.parker.close()
	}
	if r.completionSignal >= 0 {
		_ = unix.Close(r.completionSignal)
	}
}
