package loop

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ironbus/ironbus/ring"
)

type task struct {
	conn *epollConn
	kind taskKind
	err  error
}

// timeoutCheck is how often a reactor looks for idle connections.
const timeoutCheck = 100 * time.Millisecond

// errReadTimeout is the cause a session sees when a connection was silent
// too long; it says Timeout() like a net error.
var errReadTimeout = &timeoutError{}

type timeoutError struct{}

func (*timeoutError) Error() string { return "loop: read timeout" }
func (*timeoutError) Timeout() bool { return true }

// reactor is one event loop: an epoll instance and the goroutine that
// waits on it. Everything below queue is touched by that goroutine only;
// other goroutines reach it through post, which queues a task and wakes the
// loop through an eventfd (at most one wake pending, by the woken flag).
type reactor struct {
	server *EpollServer
	index  int
	epfd   int
	parker *parker
	halted atomic.Bool
	queue  taskQueue[task]

	conns     map[int]*epollConn
	iovecs    [][]byte // scratch for one writev: IOV_MAX is 1,024; 64 is plenty per pass
	readBuf   []byte
	events    []unix.EpollEvent
	lastEvent bool // the event being dispatched is the pass's last
	// polled and pollErr are what the park's check (pollReady, that is
	// pollAgain, bound once) found.
	polled    int
	pollErr   error
	pollReady func() bool
	lastCheck time.Time
	busy      atomic.Int64 // nanoseconds spent handling events
}

func newReactor(s *EpollServer, index int) (*reactor, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	wakefd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		_ = unix.Close(epfd)
		return nil, err
	}
	event := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wakefd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wakefd, &event); err != nil {
		_ = unix.Close(epfd)
		_ = unix.Close(wakefd)
		return nil, err
	}
	parker, err := newParker(epfd)
	if err != nil {
		_ = unix.Close(epfd)
		_ = unix.Close(wakefd)
		return nil, err
	}
	r := &reactor{server: s, index: index, epfd: epfd, parker: parker, queue: taskQueue[task]{wakefd: wakefd, ring: ring.NewMPSC[task](taskRingCapacity)}, conns: map[int]*epollConn{},
		readBuf: make([]byte, s.cfg.ReadBufferSize), events: make([]unix.EpollEvent, 256),
		iovecs: make([][]byte, 0, 64)}
	r.pollReady = r.pollAgain
	return r, nil
}

// post queues a task for the loop and wakes it. Safe from any goroutine.
func (r *reactor) post(c *epollConn, kind taskKind) { r.postTask(task{conn: c, kind: kind}) }

func (r *reactor) postTask(t task) { r.queue.post(t) }

// stop ends the loop; the run goroutine closes the descriptors.
func (r *reactor) stop() {
	r.halted.Store(true)
	r.queue.rearm()
	r.queue.wake()
}

func (r *reactor) run() {
	defer r.closeDescriptors()
	var spare []task
	for !r.halted.Load() {
		n, err := r.wait()
		if err != nil {
			r.server.cfg.Logger.Error("epoll_wait failed; the reactor stops", "reactor", r.index, "error", err.Error())
			return
		}
		began := time.Now()
		// Tasks posted while the events are dispatched, above all the
		// replies sessions queue from inside Data, are taken by runTasks
		// in this same pass, so their posts need not write the eventfd:
		// the flag says a wake-up is pending until the rearm, which comes
		// before the take (see taskQueue.consumeWake for why that order).
		suppressed := r.queue.woken.CompareAndSwap(false, true)
		for i, event := range r.events[:max(n, 0)] {
			r.lastEvent = i == n-1
			r.dispatch(event)
		}
		r.lastEvent = false
		if suppressed {
			r.queue.rearm()
		}
		spare = r.runTasks(spare)
		r.checkTimeouts(began)
		r.busy.Add(int64(time.Since(began)))
	}
}

// wait returns the ready events: at once when there are some, otherwise
// after sleeping in the netpoller (holding no P) until there are, or until
// the timeout sweep is due. The park polls again before it sleeps: the
// netpoller forgets readiness seen before the park began, so an event
// arriving after the first poll would otherwise wait for the sweep.
func (r *reactor) wait() (int, error) {
	n, err := r.poll()
	if n > 0 || err != nil {
		return n, err
	}
	r.polled, r.pollErr = 0, nil
	if parkErr := r.parker.park(timeoutCheck, r.pollReady); r.pollErr == nil {
		r.pollErr = parkErr
	}
	return r.polled, r.pollErr
}

// pollAgain is the park's readiness check: it polls and keeps what it
// found in polled and pollErr. Made into r.pollReady once.
func (r *reactor) pollAgain() bool {
	r.polled, r.pollErr = r.poll()
	return r.polled > 0 || r.pollErr != nil
}

// poll takes the ready events without blocking.
func (r *reactor) poll() (int, error) {
	n, err := unix.EpollWait(r.epfd, r.events, 0)
	if err == unix.EINTR {
		return 0, nil
	}
	return max(n, 0), err
}

func (r *reactor) dispatch(event unix.EpollEvent) {
	fd := int(event.Fd)
	if fd == r.queue.wakefd {
		r.queue.consumeWake()
		return
	}
	c := r.conns[fd]
	if c == nil {
		return
	}
	if event.Events&(unix.EPOLLIN|unix.EPOLLHUP|unix.EPOLLERR|unix.EPOLLRDHUP) != 0 {
		r.readable(c)
	}
	if event.Events&unix.EPOLLOUT != 0 && !c.closed {
		r.flush(c)
	}
}

// runTasks handles everything posted since the last pass.
func (r *reactor) runTasks(spare []task) []task {
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
		}
	}
	return tasks
}

// add opens the connection's session and starts watching it.
func (r *reactor) add(c *epollConn) {
	session, err := r.server.handler.Open(c)
	if err != nil {
		// The handler may have queued an explanation: send it, then close.
		c.closing.Store(true)
		r.conns[c.fd] = c
		r.flush(c)
		if !c.closed {
			r.closeConn(c)
		}
		return
	}
	c.session, c.reading, c.lastRead = session, true, time.Now()
	c.in.sizer, _ = session.(FrameSizer)
	r.conns[c.fd] = c
	event := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(c.fd)}
	if err := unix.EpollCtl(r.epfd, unix.EPOLL_CTL_ADD, c.fd, &event); err != nil {
		r.stopReading(c, err)
		r.closeConn(c)
		return
	}
	c.interest = event.Events
}

// readable reads once (up to 64 KiB) and hands the bytes to the session.
// One read per connection per pass keeps the loop fair.
func (r *reactor) readable(c *epollConn) {
	if !c.reading || c.closed || c.memoryWait {
		return
	}
	if c.paused.Load() {
		r.updateInterest(c)
		return
	}
	buffered := !c.in.empty()
	buf := r.readBuf
	if buffered {
		var err error
		buf, err = c.in.free()
		if err == errNeedMemory {
			r.waitForMemory(c)
			return
		}
		if len(buf) == 0 {
			r.stopReading(c, ErrBufferFull)
			return
		}
	}
	n, err := unix.Read(c.fd, buf)
	switch {
	case err == unix.EAGAIN || err == unix.EINTR:
		return
	case err != nil:
		r.stopReading(c, err)
		return
	case n == 0:
		r.stopReading(c, io.EOF)
		return
	}
	c.lastRead = time.Now()
	var derr error
	if buffered {
		c.in.filled(n)
		derr = c.in.deliver(c.session)
		if c.in.empty() {
			c.in.release() // an idle connection holds no buffer
		}
	} else {
		consumed, err := c.session.Data(buf[:n])
		c.in.keep(buf[consumed:n])
		derr = err
	}
	if derr != nil {
		r.stopReading(c, derr)
		return
	}
	r.updateInterest(c)
}

// resume hands buffered bytes back to a session that resumed reading.
func (r *reactor) resume(c *epollConn) {
	if !c.reading || c.closed || c.paused.Load() || c.memoryWait {
		return
	}
	if err := c.in.deliver(c.session); err != nil {
		r.stopReading(c, err)
		return
	}
	if c.in.empty() {
		c.in.release()
	}
	r.updateInterest(c)
}

// waitForMemory stops reading the connection while a goroutine waits for
// the large-frame pool; the input buffer belongs to that goroutine until
// it posts taskMemory.
func (r *reactor) waitForMemory(c *epollConn) {
	ctx, cancel := context.WithCancel(context.Background())
	c.memoryWait, c.memoryCancel = true, cancel
	r.updateInterest(c)
	go func() {
		err := c.in.waitForMemory(ctx)
		r.postTask(task{conn: c, kind: taskMemory, err: err})
	}()
}

// memoryArrived takes the input buffer back after a wait.
func (r *reactor) memoryArrived(c *epollConn, err error) {
	c.memoryWait = false
	c.memoryCancel()
	if c.closed {
		c.in.release()
		return
	}
	if err != nil {
		r.stopReading(c, err)
		return
	}
	r.updateInterest(c)
}

// stopReading ends reading once; the session hears it on a goroutine of
// its own, because it may block while it finishes its work.
func (r *reactor) stopReading(c *epollConn, cause error) {
	if !c.reading {
		return
	}
	c.reading = false
	if !c.closed {
		r.updateInterest(c)
	}
	if session := c.session; session != nil {
		go session.ReadStopped(cause)
	}
}

// updateInterest registers the events the connection needs now: input
// while reading and not paused, output while bytes wait to be sent.
func (r *reactor) updateInterest(c *epollConn) {
	if c.closed {
		return
	}
	var want uint32
	if c.reading && !c.paused.Load() && !c.memoryWait {
		want |= unix.EPOLLIN | unix.EPOLLRDHUP
	}
	if c.needsWritable() {
		want |= unix.EPOLLOUT
	}
	if want == c.interest {
		return
	}
	// A registered descriptor always reports hang-ups, which would spin
	// the loop over a paused connection whose peer vanished: one that
	// wants nothing is taken out of the set instead.
	op := unix.EPOLL_CTL_MOD
	switch {
	case want == 0:
		op = unix.EPOLL_CTL_DEL
	case c.interest == 0:
		op = unix.EPOLL_CTL_ADD
	}
	event := unix.EpollEvent{Events: want, Fd: int32(c.fd)}
	if err := unix.EpollCtl(r.epfd, op, c.fd, &event); err == nil {
		c.interest = want
	}
}

// checkTimeouts ends reading on connections silent past their timeout and
// closes connections whose last output could not be sent in time.
func (r *reactor) checkTimeouts(now time.Time) {
	if now.Sub(r.lastCheck) < timeoutCheck {
		return
	}
	r.lastCheck = now
	for _, c := range r.conns {
		timeout := time.Duration(c.readTimeout.Load())
		if c.reading && timeout > 0 && !c.paused.Load() && now.Sub(c.lastRead) > timeout {
			r.stopReading(c, errReadTimeout)
		}
		if c.closing.Load() && !c.closeAt.IsZero() && now.After(c.closeAt) {
			r.closeConn(c)
		}
	}
}

func (r *reactor) closeDescriptors() {
	for _, c := range r.conns {
		r.closeConn(c)
	}
	r.parker.close()
	_ = unix.Close(r.epfd)
	r.queue.close()
}

// isRetryable says whether a write error means "try later".
func isRetryable(err error) bool { return errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) }
