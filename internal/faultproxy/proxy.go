package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Direction names the halves of a proxied connection.
type Direction uint8

const (
	// Forward is client to target: the way the connection was dialed.
	Forward Direction = 1 << iota
	// Backward is target to client.
	Backward
	// Both directions.
	Both = Forward | Backward
)

// Faults is the proxy's current fault set; the zero value passes traffic.
type Faults struct {
	Blackhole Direction     // directions that forward nothing
	Reset     bool          // every connection is reset, new ones too
	Delay     time.Duration // added to every chunk
	Throttle  int           // bytes per second per direction of each connection; 0 is unlimited
}

// ErrClosed: the proxy was closed.
var ErrClosed = errors.New("faultproxy: closed")

const (
	chunkBytes     = 32 << 10
	heldChunks     = 64 // per direction: what a blackhole holds before the sender blocks
	targetDialTime = 5 * time.Second
)

// Proxy forwards connections from its listener to a target address.
type Proxy struct {
	listener net.Listener
	target   string
	ctx      context.Context // canceled by Close
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu struct {
		sync.Mutex
		faults  Faults
		changed chan struct{} // closed and replaced on every change
		pairs   map[*pair]struct{}
		closed  bool
	}
}

// Listen starts a proxy on listenAddress ("127.0.0.1:0" picks a port)
// that forwards to target.
func Listen(listenAddress, target string) (*Proxy, error) {
	listener, err := net.Listen("tcp", listenAddress)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	p := &Proxy{listener: listener, target: target}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.mu.changed = make(chan struct{})
	p.mu.pairs = map[*pair]struct{}{}
	p.wg.Go(p.acceptLoop)
	return p, nil
}

// Addr is the address clients dial.
func (p *Proxy) Addr() string { return p.listener.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Faults returns the current fault set.
func (p *Proxy) Faults() Faults {
	faults, _ := p.state()
	return faults
}

// Pass clears every fault.
func (p *Proxy) Pass() { p.update(func(f *Faults) { *f = Faults{} }) }

// Blackhole stops forwarding in the directions given (0 forwards both).
func (p *Proxy) Blackhole(directions Direction) {
	p.update(func(f *Faults) { f.Blackhole = directions & Both })
}

// Delay makes every chunk leave d after it arrived (0 removes the delay).
func (p *Proxy) Delay(d time.Duration) { p.update(func(f *Faults) { f.Delay = max(d, 0) }) }

// Throttle paces each direction of each connection to bytesPerSecond (0
// removes the limit).
func (p *Proxy) Throttle(bytesPerSecond int) {
	p.update(func(f *Faults) { f.Throttle = max(bytesPerSecond, 0) })
}

// Reset closes every connection with an RST and resets new ones until Pass.
func (p *Proxy) Reset() {
	p.update(func(f *Faults) { f.Reset = true })
	p.mu.Lock()
	pairs := make([]*pair, 0, len(p.mu.pairs))
	for pr := range p.mu.pairs {
		pairs = append(pairs, pr)
	}
	p.mu.Unlock()
	for _, pr := range pairs {
		pr.close(true)
	}
}

func (p *Proxy) update(change func(*Faults)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	change(&p.mu.faults)
	close(p.mu.changed)
	p.mu.changed = make(chan struct{})
}

// state returns the faults and a channel closed at their next change.
func (p *Proxy) state() (Faults, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.faults, p.mu.changed
}

// Close stops accepting, closes every connection and returns when every
// goroutine of the proxy has ended.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return nil
	}
	p.mu.closed = true
	pairs := make([]*pair, 0, len(p.mu.pairs))
	for pr := range p.mu.pairs {
		pairs = append(pairs, pr)
	}
	p.mu.Unlock()
	p.cancel()
	err := p.listener.Close()
	for _, pr := range pairs {
		pr.close(false)
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) acceptLoop() {
	for {
		client, err := p.listener.Accept()
		if err != nil {
			if p.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			select { // e.g. out of file descriptors: do not spin
			case <-time.After(10 * time.Millisecond):
			case <-p.ctx.Done():
				return
			}
			continue
		}
		if faults, _ := p.state(); faults.Reset {
			reset(client)
			continue
		}
		if !p.spawn(func() { p.connect(client.(*net.TCPConn)) }) {
			client.Close()
			return
		}
	}
}

// spawn runs f on a goroutine Close waits for; false once closed.
func (p *Proxy) spawn(f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		return false
	}
	p.wg.Go(f)
	return true
}

// connect dials the target for a new client and starts both directions.
// A target that cannot be reached resets the client, as close to a
// refused connection as a proxy that already accepted can get.
func (p *Proxy) connect(client *net.TCPConn) {
	dialer := net.Dialer{Timeout: targetDialTime}
	conn, err := dialer.DialContext(p.ctx, "tcp", p.target)
	if err != nil {
		reset(client)
		return
	}
	pr := &pair{client: client, server: conn.(*net.TCPConn), done: make(chan struct{})}
	p.mu.Lock()
	faults := p.mu.faults
	registered := !p.mu.closed && !faults.Reset
	if registered {
		p.mu.pairs[pr] = struct{}{}
		p.wg.Go(func() { p.forward(pr, Forward, pr.client, pr.server) })
		p.wg.Go(func() { p.forward(pr, Backward, pr.server, pr.client) })
		p.wg.Go(func() { p.unregister(pr) })
	}
	p.mu.Unlock()
	if !registered {
		pr.close(true)
	}
}

// unregister forgets a pair once it has ended.
func (p *Proxy) unregister(pr *pair) {
	<-pr.done
	p.mu.Lock()
	delete(p.mu.pairs, pr)
	p.mu.Unlock()
}

// reset closes a connection with an RST instead of a FIN.
func reset(conn net.Conn) {
	if tcp, ok := conn.(*net.TCPConn); ok {
		tcp.SetLinger(0)
	}
	conn.Close()
}

// pair is one proxied connection: the client's socket and the target's.
type pair struct {
	client, server *net.TCPConn
	done           chan struct{}
	once           sync.Once
	mu             sync.Mutex
	halfClosed     int // directions that ended cleanly
}

// close ends both sockets, with an RST if withReset.
func (pr *pair) close(withReset bool) {
	pr.once.Do(func() {
		if withReset {
			reset(pr.client)
			reset(pr.server)
		} else {
			pr.client.Close()
			pr.server.Close()
		}
		close(pr.done)
	})
}

// finished records that one direction ended cleanly: its FIN is passed
// on, and when both directions have ended the pair is closed.
func (pr *pair) finished(destination *net.TCPConn) {
	destination.CloseWrite()
	pr.mu.Lock()
	pr.halfClosed++
	both := pr.halfClosed == 2
	pr.mu.Unlock()
	if both {
		pr.close(false)
	}
}

type chunk struct {
	data    []byte
	arrived time.Time
}

// forward carries one direction: a reader goroutine stamps each chunk
// with its arrival and queues it (bounded); this goroutine releases each
// chunk when the faults allow, so a delay shifts every chunk without
// serializing them.
func (p *Proxy) forward(pr *pair, direction Direction, source, destination *net.TCPConn) {
	chunks := make(chan chunk, heldChunks)
	readErr := make(chan error, 1)
	p.wg.Go(func() { readErr <- readChunks(pr, source, chunks) })
	pacer := pacer{}
	for c := range chunks {
		if !p.await(pr, direction, c.arrived) {
			return
		}
		if err := p.write(pr, &pacer, destination, c.data); err != nil {
			pr.close(true)
			return
		}
	}
	// The stream ended. Its end crosses the faults like its bytes (a
	// blackhole holds a FIN or an RST too), then a clean end is passed on
	// as a FIN and a reset as a reset.
	err := <-readErr
	if !p.await(pr, direction, time.Now()) {
		return
	}
	if err == nil {
		pr.finished(destination)
	} else {
		pr.close(true)
	}
}

// readChunks reads source until it ends; nil for a clean end (EOF).
func readChunks(pr *pair, source *net.TCPConn, chunks chan<- chunk) error {
	defer close(chunks)
	buffer := make([]byte, chunkBytes)
	for {
		n, err := source.Read(buffer)
		if n > 0 {
			select {
			case chunks <- chunk{data: bytes.Clone(buffer[:n]), arrived: time.Now()}:
			case <-pr.done:
				return ErrClosed
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// await blocks while direction is blackholed and until the chunk's delay
// has passed; false when the pair ended.
func (p *Proxy) await(pr *pair, direction Direction, arrived time.Time) bool {
	for {
		faults, changed := p.state()
		wait := time.Duration(-1) // until the faults change
		if faults.Blackhole&direction == 0 {
			wait = time.Until(arrived.Add(faults.Delay))
			if wait <= 0 {
				return true
			}
		}
		if !sleep(wait, changed, pr.done) {
			return false
		}
	}
}

// sleep waits d (forever if negative) or until changed closes; false if
// done closes first.
func sleep(d time.Duration, changed, done <-chan struct{}) bool {
	var expired <-chan time.Time
	if d >= 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case <-expired:
	case <-changed:
	case <-done:
		return false
	}
	return true
}

// pacer spaces writes to the throttle rate.
type pacer struct{ next time.Time }

// write sends data, in pieces of about 20 ms of traffic when throttled.
func (p *Proxy) write(pr *pair, pacer *pacer, destination *net.TCPConn, data []byte) error {
	for len(data) > 0 {
		faults, changed := p.state()
		if faults.Throttle == 0 {
			_, err := destination.Write(data)
			return err
		}
		if wait := time.Until(pacer.next); wait > 0 {
			if !sleep(wait, changed, pr.done) {
				return ErrClosed
			}
			continue // the rate may have changed
		}
		piece := min(len(data), max(1, faults.Throttle/50))
		if _, err := destination.Write(data[:piece]); err != nil {
			return err
		}
		pacer.next = time.Now().Add(time.Duration(piece) * time.Second / time.Duration(faults.Throttle))
		data = data[piece:]
	}
	return nil
}
