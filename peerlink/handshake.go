package peerlink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"
)

// dial connects to a higher peer and runs the dialer's side of the
// handshake. connected says whether TCP connected (a failure after it is
// a handshake failure).
func (l *Link) dial(p *peer) (c *connection, connected bool, err error) {
	address := p.address()
	if address == "" {
		return nil, false, ErrNoAddress
	}
	ctx, cancel := context.WithTimeout(p.ctx, l.config.DialTimeout)
	raw, err := l.dialer.DialContext(ctx, "tcp", address)
	cancel()
	if err != nil {
		return nil, false, fmt.Errorf("dialing node %d at %s: %w", p.id, address, err)
	}
	if !l.plaintextAllowed(raw.RemoteAddr()) {
		raw.Close()
		return nil, true, fmt.Errorf("%w: node %d at %s resolves to %s", ErrNotLoopback, p.id, address, raw.RemoteAddr())
	}
	// Closing the socket is what interrupts a handshake when the peer is
	// removed or the link closes; the deadline bounds a silent peer.
	stop := context.AfterFunc(p.ctx, func() { raw.Close() })
	stream, err := l.greetAsDialer(p, raw)
	if !stop() {
		err = ErrClosed
	}
	if err != nil {
		raw.Close()
		return nil, true, fmt.Errorf("handshake with node %d at %s: %w", p.id, address, err)
	}
	return newConnection(p, raw, stream), true, nil
}

// greetAsDialer secures the connection if TLS is on, sends this node's
// greeting and checks the answer.
func (l *Link) greetAsDialer(p *peer, raw net.Conn) (net.Conn, error) {
	raw.SetDeadline(time.Now().Add(l.config.HandshakeTimeout))
	stream := raw
	if l.clientTLS != nil {
		secured := tls.Client(raw, l.clientTLS)
		if err := secured.Handshake(); err != nil {
			return nil, tlsError(err)
		}
		if err := l.checkIdentity(secured, p.id, x509.ExtKeyUsageServerAuth); err != nil {
			return nil, err
		}
		stream = secured
	}
	greeting := hello{version: protocolVersion, sender: l.config.Node, receiver: p.id, cluster: l.config.Cluster}
	if _, err := stream.Write(greeting.encode()); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrHandshake, err)
	}
	answer, err := readHello(stream)
	switch {
	case err != nil:
		return nil, err
	case answer.refusal != refusalNone:
		return nil, fmt.Errorf("%w: %w", ErrRefused, answer.refusal.reason())
	case answer.cluster != l.config.Cluster:
		return nil, fmt.Errorf("%w: answered for cluster %q", ErrWrongCluster, answer.cluster)
	case answer.sender != p.id || answer.receiver != l.config.Node:
		return nil, fmt.Errorf("%w: node %d answered (for node %d)", ErrWrongNode, answer.sender, answer.receiver)
	}
	raw.SetDeadline(time.Time{})
	return stream, nil
}

// tlsError keeps the identity reason of a failed TLS handshake (the
// dialer's VerifyConnection) visible to errors.Is.
func tlsError(err error) error {
	if errors.Is(err, ErrIdentity) {
		return err
	}
	return fmt.Errorf("%w: TLS: %w", ErrHandshake, err)
}

// checkIdentity verifies the peer's chain against the cluster CA for
// usage and compares the node and cluster its certificate names with the
// ones expected.
func (l *Link) checkIdentity(secured *tls.Conn, expected NodeID, usage x509.ExtKeyUsage) error {
	cluster, node, err := l.config.TLS.verifyPeer(secured.ConnectionState(), usage)
	if err != nil {
		return err
	}
	if cluster != l.config.Cluster || node != expected {
		return fmt.Errorf("%w: certificate names node %d of cluster %q, expected node %d of %q",
			ErrIdentity, node, cluster, expected, l.config.Cluster)
	}
	return nil
}

// acceptLoop accepts until the listener closes; each connection is
// greeted on its own goroutine, with at most maxPendingHandshakes at once.
func (l *Link) acceptLoop() {
	for {
		raw, err := l.config.Listener.Accept()
		if err != nil {
			if l.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			l.logger.Warn("peer link: accept failed", "error", err)
			select { // e.g. out of file descriptors: do not spin
			case <-time.After(l.config.BackoffMin):
			case <-l.ctx.Done():
				return
			}
			continue
		}
		select {
		case l.handshakes <- struct{}{}:
		default:
			l.inboundRefused.Add(1)
			raw.Close()
			continue
		}
		if !l.spawn(func() { l.accept(raw); <-l.handshakes }) {
			raw.Close()
			return
		}
	}
}

// accept runs the acceptor's side of the handshake and, when the dialer
// passes, makes the connection its peer's.
func (l *Link) accept(raw net.Conn) {
	stop := context.AfterFunc(l.ctx, func() { raw.Close() })
	p, stream, err := l.greetAsAcceptor(raw)
	if !stop() && err == nil {
		err = ErrClosed
	}
	if err != nil {
		raw.Close()
		if l.ctx.Err() != nil {
			return
		}
		l.inboundRefused.Add(1)
		if p != nil {
			p.counters.handshakeFailures.Add(1)
			p.noteFailure("peer link: refused a connection", fmt.Errorf("from %s: %w", raw.RemoteAddr(), err))
		} else {
			l.logger.Warn("peer link: refused a connection", "remote", raw.RemoteAddr(), "error", err)
		}
		return
	}
	l.start(newConnection(p, raw, stream))
}

// greetAsAcceptor reads the dialer's greeting, judges it and answers. It
// returns the peer when the dialer is a known node, even on refusal, so
// the failure is counted against it.
func (l *Link) greetAsAcceptor(raw net.Conn) (*peer, net.Conn, error) {
	raw.SetDeadline(time.Now().Add(l.config.HandshakeTimeout))
	stream := raw
	var secured *tls.Conn
	if l.serverTLS != nil {
		secured = tls.Server(raw, l.serverTLS)
		if err := secured.Handshake(); err != nil {
			return nil, nil, tlsError(err)
		}
		stream = secured
	}
	greeting, err := readHello(stream)
	if err != nil {
		if errors.Is(err, ErrVersion) {
			l.answer(stream, greeting.sender, refusalVersion)
		}
		return nil, nil, err
	}
	p := l.peer(greeting.sender)
	reason := l.judge(greeting, raw.RemoteAddr(), secured)
	if reason != nil {
		l.answer(stream, greeting.sender, refusalFor(reason))
		return p, nil, reason
	}
	if err := l.answer(stream, greeting.sender, refusalNone); err != nil {
		return p, nil, err
	}
	raw.SetDeadline(time.Time{})
	return p, stream, nil
}

// judge decides whether a dialer may connect: same cluster, this node
// expected, a certificate naming the node claimed, plaintext only where
// allowed, the lower id dialing, and a node this link knows.
func (l *Link) judge(greeting hello, remote net.Addr, secured *tls.Conn) error {
	switch {
	case greeting.cluster != l.config.Cluster:
		return fmt.Errorf("%w: node %d of cluster %q", ErrWrongCluster, greeting.sender, greeting.cluster)
	case greeting.receiver != l.config.Node:
		return fmt.Errorf("%w: node %d expected node %d here", ErrWrongNode, greeting.sender, greeting.receiver)
	case !l.plaintextAllowed(remote):
		return fmt.Errorf("%w: plaintext from %s", ErrNotLoopback, remote)
	}
	if secured != nil {
		if err := l.checkIdentity(secured, greeting.sender, x509.ExtKeyUsageClientAuth); err != nil {
			return err
		}
	}
	switch {
	case greeting.sender >= l.config.Node:
		return fmt.Errorf("%w: node %d dialed node %d", ErrDialDirection, greeting.sender, l.config.Node)
	case l.peer(greeting.sender) == nil:
		return fmt.Errorf("%w: node %d", ErrUnknownNode, greeting.sender)
	}
	return nil
}

// answer sends the acceptor's greeting: an acceptance or a refusal.
func (l *Link) answer(stream net.Conn, to NodeID, code refusal) error {
	greeting := hello{version: protocolVersion, refusal: code, sender: l.config.Node, receiver: to, cluster: l.config.Cluster}
	if _, err := stream.Write(greeting.encode()); err != nil {
		return fmt.Errorf("%w: %w", ErrHandshake, err)
	}
	return nil
}

// reportUnreachable tells the Unreachable callback, if any.
func (l *Link) reportUnreachable(node NodeID) {
	// The callback is not told anything once Close began.
	if l.config.Unreachable != nil && l.ctx.Err() == nil {
		l.config.Unreachable(node)
	}
}
