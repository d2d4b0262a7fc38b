package raftmeta

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// StreamLayer carries the metadata group's connections: a listener for
// the connections peers open, and Dial for the ones this node opens. A
// TCP listener of its own (ListenTCP) serves today; the shared peer link
// can carry it later by implementing this interface.
type StreamLayer interface {
	net.Listener
	// Dial opens a connection to the node listening at address.
	Dial(address string, timeout time.Duration) (net.Conn, error)
}

type tcpLayer struct {
	net.Listener
}

// ListenTCP returns a StreamLayer on a TCP listener at address.
func ListenTCP(address string) (StreamLayer, error) {
	listener, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("raftmeta: listening on %s: %w", address, err)
	}
	return tcpLayer{listener}, nil
}

func (tcpLayer) Dial(address string, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", address, timeout)
}

// Identity is who is at one end of a metadata connection.
type Identity struct {
	Node        uint32
	Incarnation uint32
	// ClusterID is 0 while the node has not learned it.
	ClusterID   uint64
	ClusterAddr string
	ClientAddr  string
}

// Every connection opens with a handshake: the dialer sends its Identity,
// the acceptor answers with its own and a verdict, and either end closes
// the connection when the other is not who the metadata says it is (a
// node id registered under another incarnation, another cluster). Every
// Raft request goes out on a connection its sender dialed and only the
// reply counts (a vote, an acknowledged append), so the dialer's check is
// the one that matters: a node back with a new data directory cannot vote
// or be counted as its old self until its new incarnation is registered,
// which only the leader does, through the log (Meta.admit).
const (
	handshakeMagic   = "IBMG"
	handshakeVersion = 1
	verdictOK        = 0
	verdictRefused   = 1
	maxHandshake     = 4 + 1 + 1 + 4 + 4 + 8 + 1 + maxAddressBytes + 1 + maxAddressBytes
)

func encodeHandshake(id Identity, verdict byte) []byte {
	b := make([]byte, 0, maxHandshake)
	b = append(b, handshakeMagic...)
	b = append(b, handshakeVersion, verdict)
	b = binary.LittleEndian.AppendUint32(b, id.Node)
	b = binary.LittleEndian.AppendUint32(b, id.Incarnation)
	b = binary.LittleEndian.AppendUint64(b, id.ClusterID)
	for _, s := range []string{id.ClusterAddr, id.ClientAddr} {
		if len(s) > maxAddressBytes {
			s = ""
		}
		b = append(b, byte(len(s)))
		b = append(b, s...)
	}
	return b
}

func readHandshake(r io.Reader) (Identity, byte, error) {
	var fixed [4 + 1 + 1 + 4 + 4 + 8]byte
	if _, err := io.ReadFull(r, fixed[:]); err != nil {
		return Identity{}, 0, err
	}
	if string(fixed[:4]) != handshakeMagic || fixed[4] != handshakeVersion {
		return Identity{}, 0, fmt.Errorf("%w: not a metadata handshake (version %d)", ErrRefused, fixed[4])
	}
	id := Identity{
		Node:        binary.LittleEndian.Uint32(fixed[6:]),
		Incarnation: binary.LittleEndian.Uint32(fixed[10:]),
		ClusterID:   binary.LittleEndian.Uint64(fixed[14:]),
	}
	for _, field := range []*string{&id.ClusterAddr, &id.ClientAddr} {
		var n [1]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return Identity{}, 0, err
		}
		s := make([]byte, n[0])
		if _, err := io.ReadFull(r, s); err != nil {
			return Identity{}, 0, err
		}
		*field = string(s)
	}
	return id, fixed[5], nil
}

// identityLayer is the raft.StreamLayer the transport uses: the inner
// StreamLayer with the handshake on every connection.
type identityLayer struct {
	inner StreamLayer
	// advertise is the address peers dial this node at, which the
	// transport puts in its requests.
	advertise string
	self      func() Identity
	// admit judges the peer; dialed says this end opened the connection.
	admit   func(peer Identity, dialed bool) error
	timeout time.Duration

	mu struct {
		sync.Mutex
		conns   map[net.Conn]struct{}
		severed bool
		closed  bool
	}
}

func newIdentityLayer(inner StreamLayer, advertise string, self func() Identity, admit func(Identity, bool) error, timeout time.Duration) *identityLayer {
	l := &identityLayer{inner: inner, advertise: advertise, self: self, admit: admit, timeout: timeout}
	l.mu.conns = map[net.Conn]struct{}{}
	return l
}

// track remembers an open connection, or closes it at once when the
// layer is severed.
func (l *identityLayer) track(conn net.Conn) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.severed {
		_ = conn.Close()
		return ErrLatched
	}
	l.mu.conns[conn] = struct{}{}
	return nil
}

func (l *identityLayer) forget(conn net.Conn) {
	l.mu.Lock()
	delete(l.mu.conns, conn)
	l.mu.Unlock()
}

// sever cuts the member off: every connection closes, the listener too,
// and nothing is dialed or accepted again.
func (l *identityLayer) sever() {
	l.mu.Lock()
	l.mu.severed = true
	conns := l.mu.conns
	l.mu.conns = map[net.Conn]struct{}{}
	l.mu.Unlock()
	for conn := range conns {
		_ = conn.Close()
	}
	_ = l.Close()
}

func (l *identityLayer) Accept() (net.Conn, error) {
	conn, err := l.inner.Accept()
	if err != nil {
		return nil, err
	}
	if err := l.track(conn); err != nil {
		return nil, err
	}
	return &acceptedConn{trackedConn: trackedConn{Conn: conn, layer: l}}, nil
}

// Close closes the listener once (the transport and a sever may both).
func (l *identityLayer) Close() error {
	l.mu.Lock()
	closed := l.mu.closed
	l.mu.closed = true
	l.mu.Unlock()
	if closed {
		return nil
	}
	return l.inner.Close()
}

func (l *identityLayer) Addr() net.Addr { return advertisedAddr(l.advertise) }

type advertisedAddr string

func (advertisedAddr) Network() string  { return "tcp" }
func (a advertisedAddr) String() string { return string(a) }

func (l *identityLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	inner, err := l.inner.Dial(string(address), timeout)
	if err != nil {
		return nil, err
	}
	if err := l.track(inner); err != nil {
		return nil, err
	}
	conn := &trackedConn{Conn: inner, layer: l}
	if err := l.dialHandshake(conn, timeout); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("raftmeta: handshake with %s: %w", address, err)
	}
	return conn, nil
}

// trackedConn leaves the layer's set when closed.
type trackedConn struct {
	net.Conn
	layer *identityLayer
}

func (c *trackedConn) Close() error {
	c.layer.forget(c.Conn)
	return c.Conn.Close()
}

func (l *identityLayer) dialHandshake(conn net.Conn, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = l.timeout
	}
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write(encodeHandshake(l.self(), verdictOK)); err != nil {
		return err
	}
	peer, verdict, err := readHandshake(conn)
	if err != nil {
		return err
	}
	if verdict != verdictOK {
		return fmt.Errorf("%w: node %d refused us", ErrRefused, peer.Node)
	}
	if err := l.admit(peer, true); err != nil {
		return err
	}
	return conn.SetDeadline(time.Time{})
}

// acceptedConn runs the acceptor's side of the handshake on its first
// read or write, on the transport's goroutine for the connection, so a
// slow dialer holds up nobody else.
type acceptedConn struct {
	trackedConn
	once sync.Once
	err  error
}

func (c *acceptedConn) handshake() error {
	c.once.Do(func() {
		c.err = c.acceptHandshake()
		if c.err != nil {
			_ = c.Close()
		}
	})
	return c.err
}

func (c *acceptedConn) acceptHandshake() error {
	_ = c.Conn.SetDeadline(time.Now().Add(c.layer.timeout))
	peer, _, err := readHandshake(c.Conn)
	if err != nil {
		return err
	}
	verdict := byte(verdictOK)
	refusal := c.layer.admit(peer, false)
	if refusal != nil {
		verdict = verdictRefused
	}
	if _, err := c.Conn.Write(encodeHandshake(c.layer.self(), verdict)); err != nil {
		return err
	}
	if refusal != nil {
		return refusal
	}
	return c.Conn.SetDeadline(time.Time{})
}

func (c *acceptedConn) Read(p []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *acceptedConn) Write(p []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}
