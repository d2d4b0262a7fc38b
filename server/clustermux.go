package server

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// The cluster address carries two protocols: the peer link (package
// peerlink, whose greeting starts "IBPL") and the metadata group (package
// raftmeta), whose connections this server's dialer opens with the
// preamble "IBMT". clusterMux reads the first four bytes of each accepted
// connection and hands it to the side they name; anything else is closed.
const (
	peerLinkMagic = "IBPL"
	metaPreamble  = "IBMT"
	// muxPreambleTimeout bounds how long an accepted connection may take
	// to say which protocol it speaks.
	muxPreambleTimeout = 5 * time.Second
)

type clusterMux struct {
	listener net.Listener
	peer     *muxSide
	meta     *muxSide
	logger   *slog.Logger
	routing  sync.WaitGroup
}

func newClusterMux(listener net.Listener, logger *slog.Logger) *clusterMux {
	return &clusterMux{listener: listener, logger: logger,
		peer: newMuxSide(listener.Addr()), meta: newMuxSide(listener.Addr())}
}

// serve accepts until the listener closes; it returns nil then.
func (m *clusterMux) serve() error {
	for {
		conn, err := m.listener.Accept()
		if err != nil {
			m.routing.Wait()
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		m.routing.Add(1)
		go func() {
			defer m.routing.Done()
			m.route(conn)
		}()
	}
}

func (m *clusterMux) route(conn net.Conn) {
	var preamble [4]byte
	_ = conn.SetReadDeadline(time.Now().Add(muxPreambleTimeout))
	if _, err := io.ReadFull(conn, preamble[:]); err != nil {
		conn.Close()
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	switch string(preamble[:]) {
	case peerLinkMagic:
		m.peer.hand(&replayConn{Conn: conn, prefix: preamble[:]})
	case metaPreamble:
		m.meta.hand(conn)
	default:
		m.logger.Warn("cluster address: a connection that speaks neither the peer link nor the metadata group; closed",
			"remote", conn.RemoteAddr().String())
		conn.Close()
	}
}

// close stops accepting and closes both sides.
func (m *clusterMux) close() {
	_ = m.listener.Close()
	m.peer.Close()
	m.meta.Close()
}

// muxSide is one protocol's view of the shared listener.
type muxSide struct {
	address net.Addr
	conns   chan net.Conn
	closed  chan struct{}
	once    sync.Once
}

func newMuxSide(address net.Addr) *muxSide {
	return &muxSide{address: address, conns: make(chan net.Conn), closed: make(chan struct{})}
}

// hand gives conn to the side's Accept, or closes it when the side is
// closed or does not accept in time.
func (s *muxSide) hand(conn net.Conn) {
	timer := time.NewTimer(muxPreambleTimeout)
	defer timer.Stop()
	select {
	case s.conns <- conn:
	case <-s.closed:
		conn.Close()
	case <-timer.C:
		conn.Close()
	}
}

func (s *muxSide) Accept() (net.Conn, error) {
	select {
	case conn := <-s.conns:
		return conn, nil
	case <-s.closed:
		return nil, net.ErrClosed
	}
}

func (s *muxSide) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}

func (s *muxSide) Addr() net.Addr { return s.address }

// metaLayer is the metadata group's raftmeta.StreamLayer on the shared
// cluster address: it dials with the preamble the mux routes by.
type metaLayer struct{ *muxSide }

func (metaLayer) Dial(address string, timeout time.Duration) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", address, timeout)
	if err != nil {
		return nil, err
	}
	_ = conn.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte(metaPreamble)); err != nil {
		conn.Close()
		return nil, err
	}
	_ = conn.SetWriteDeadline(time.Time{})
	return conn, nil
}

// replayConn gives back the bytes the mux read before the rest of the
// connection.
type replayConn struct {
	net.Conn
	prefix []byte
}

func (c *replayConn) Read(b []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(b, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}
