package peerlink

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// NodeID names a node of the cluster. Zero is not a node.
type NodeID uint32

// Defaults of Config's tunables.
const (
	// DefaultQueueBytes bounds the frames queued for one peer.
	DefaultQueueBytes = 4 << 20
	// DefaultMaxPayloadBytes bounds one message: the client protocol's
	// largest record (16 MiB) plus room for the batch and Raft envelopes.
	// It must be at least the largest message any sender produces, on
	// every node alike: a receiver closes the connection on a larger frame.
	DefaultMaxPayloadBytes   = 17 << 20
	DefaultDialTimeout       = 2 * time.Second
	DefaultHandshakeTimeout  = 2 * time.Second
	DefaultHeartbeatInterval = 500 * time.Millisecond
	DefaultIdleTimeout       = 3 * time.Second
	DefaultBackoffMin        = 50 * time.Millisecond
	DefaultBackoffMax        = time.Second

	// readBufferBytes is each connection's read buffer; frames that fit
	// are handed to the handler without a copy.
	readBufferBytes = 64 << 10
	// maxPayloadLimit bounds MaxPayloadBytes so a frame length fits its
	// u32 field and an int on 32-bit platforms.
	maxPayloadLimit = 1 << 30
	// maxPendingHandshakes bounds inbound connections that have not
	// finished their handshake; more are closed at once.
	maxPendingHandshakes = 64
)

// Config builds a Link. Cluster, Node, Listener and Handler are required.
type Config struct {
	// Cluster is the cluster id: 1 to MaxClusterIDBytes letters, digits,
	// '-', '.' or '_'. A node of another cluster is never talked to.
	Cluster string
	// Node is this node's id (not zero).
	Node NodeID
	// Listener accepts the peers' connections. The Link owns it from New
	// on and closes it in Close. Without TLS it must be on a loopback
	// address unless InsecurePlaintext is set.
	Listener net.Listener
	// Peers are the nodes known at start, with the address to dial them
	// at. Only the lower id of a pair dials, so an address is needed only
	// for peers with a higher id than Node; a lower peer may be given "".
	Peers map[NodeID]string
	// TLS turns on mutual TLS with node identities (see TLSConfig).
	TLS *TLSConfig
	// InsecurePlaintext allows plaintext on non-loopback addresses.
	InsecurePlaintext bool
	// Handler receives every message, in order per connection, on that
	// connection's reader goroutine: calls for different peers run
	// concurrently, and so, briefly, do calls for one peer while a new
	// connection replaces its old one. payload is valid only until Handler
	// returns: copy what is kept. Handler should hand messages off
	// quickly: while it blocks, nothing more is read from that peer, the
	// peer's writes block, and after IdleTimeout the peer closes the
	// connection; a Handler in progress also delays Close.
	Handler func(from NodeID, channel uint64, payload []byte)
	// Unreachable, when set, is told that a peer could not be reached: a
	// dial or handshake failed, or an established connection broke. It
	// is called from the link's goroutines, possibly concurrently, and
	// must not block or call Close.
	Unreachable func(node NodeID)
	// Logger; nil logs nothing.
	Logger *slog.Logger

	QueueBytes        int           // bytes of frames queued per peer (DefaultQueueBytes)
	MaxPayloadBytes   int           // largest message sent or accepted (DefaultMaxPayloadBytes)
	DialTimeout       time.Duration // TCP connect (DefaultDialTimeout)
	HandshakeTimeout  time.Duration // TLS and greeting (DefaultHandshakeTimeout)
	HeartbeatInterval time.Duration // an idle connection sends a heartbeat this often (DefaultHeartbeatInterval)
	IdleTimeout       time.Duration // a connection silent this long, or a write blocked this long, is closed (DefaultIdleTimeout)
	BackoffMin        time.Duration // first redial delay (DefaultBackoffMin)
	BackoffMax        time.Duration // redial delay cap (DefaultBackoffMax)
}

// Link is this node's end of the peer links: one connection per peer,
// dialed by the lower node id of the pair, carrying length-prefixed,
// checksummed frames for any number of channels. Its methods are safe for
// concurrent use.
type Link struct {
	config    Config
	logger    *slog.Logger
	serverTLS *tls.Config
	clientTLS *tls.Config
	dialer    net.Dialer

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc

	mu struct {
		sync.Mutex
		closed bool
		peers  map[NodeID]*peer
	}
	// peers is a copy of mu.peers published for Send, which must not
	// take the link's lock.
	peers atomic.Pointer[map[NodeID]*peer]
	wg    sync.WaitGroup

	handshakes     chan struct{} // semaphore of inbound handshakes
	inboundRefused atomic.Uint64
	droppedUnknown atomic.Uint64
}

// New validates config, starts accepting on its listener and starts
// dialing the peers with a higher id.
func New(config Config) (*Link, error) {
	config.applyDefaults()
	if err := config.validate(); err != nil {
		if config.Listener != nil {
			config.Listener.Close()
		}
		return nil, err
	}
	l := &Link{config: config, logger: config.Logger, handshakes: make(chan struct{}, maxPendingHandshakes)}
	if l.logger == nil {
		l.logger = slog.New(slog.DiscardHandler)
	}
	l.logger = l.logger.With("node", config.Node)
	if config.TLS != nil {
		l.serverTLS, l.clientTLS = config.TLS.serverConfig(), config.TLS.clientConfig()
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.mu.Lock()
	l.mu.peers = map[NodeID]*peer{}
	l.publishPeersLocked()
	for id, address := range config.Peers {
		l.addPeerLocked(id, address)
	}
	l.wg.Go(l.acceptLoop)
	l.mu.Unlock()
	return l, nil
}

func (config *Config) validate() error {
	if err := validClusterID(config.Cluster); err != nil {
		return err
	}
	switch {
	case config.Node == 0:
		return fmt.Errorf("%w: node id 0", ErrConfig)
	case config.Listener == nil:
		return fmt.Errorf("%w: no listener", ErrConfig)
	case config.Handler == nil:
		return fmt.Errorf("%w: no handler", ErrConfig)
	case config.QueueBytes < 0 || config.MaxPayloadBytes < 0 || config.MaxPayloadBytes > maxPayloadLimit:
		return fmt.Errorf("%w: queue %d and payload %d bytes", ErrConfig, config.QueueBytes, config.MaxPayloadBytes)
	case config.IdleTimeout < 2*config.HeartbeatInterval:
		// An idle connection must see at least two heartbeats before it
		// is judged silent, or a quiet link flaps.
		return fmt.Errorf("%w: idle timeout %v is less than two heartbeat intervals of %v",
			ErrConfig, config.IdleTimeout, config.HeartbeatInterval)
	}
	if config.TLS != nil {
		if err := config.validateTLS(); err != nil {
			return err
		}
	} else if !config.InsecurePlaintext && !isLoopback(config.Listener.Addr()) {
		return fmt.Errorf("%w: listening on %s without TLS (set the insecure plaintext option to allow it)", ErrNotLoopback, config.Listener.Addr())
	}
	for id, address := range config.Peers {
		if err := config.validatePeer(id, address); err != nil {
			return err
		}
	}
	return nil
}

func (config *Config) validateTLS() error {
	if config.TLS.CA == nil {
		return fmt.Errorf("%w: TLS without a cluster CA", ErrConfig)
	}
	own, err := leaf(config.TLS.Certificate)
	if err != nil {
		return err
	}
	cluster, node, err := CertificateIdentity(own)
	if err != nil {
		return fmt.Errorf("%w: this node's certificate: %w", ErrConfig, err)
	}
	if cluster != config.Cluster || node != config.Node {
		return fmt.Errorf("%w: this node's certificate names node %d of cluster %q, not node %d of %q",
			ErrConfig, node, cluster, config.Node, config.Cluster)
	}
	return nil
}

// validatePeer checks a peer entry. Host names pass here; the address
// they resolve to is checked when the connection is made.
func (config *Config) validatePeer(id NodeID, address string) error {
	if id == 0 || id == config.Node {
		return fmt.Errorf("%w: peer id %d", ErrConfig, id)
	}
	if address == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%w: peer %d address %q: %w", ErrConfig, id, address, err)
	}
	if ip, err := netip.ParseAddr(host); err == nil && !ip.IsLoopback() && config.TLS == nil && !config.InsecurePlaintext {
		return fmt.Errorf("%w: peer %d at %s without TLS", ErrNotLoopback, id, address)
	}
	return nil
}

func (config *Config) applyDefaults() {
	defaults := []struct {
		value    *time.Duration
		fallback time.Duration
	}{
		{&config.DialTimeout, DefaultDialTimeout}, {&config.HandshakeTimeout, DefaultHandshakeTimeout},
		{&config.HeartbeatInterval, DefaultHeartbeatInterval}, {&config.IdleTimeout, DefaultIdleTimeout},
		{&config.BackoffMin, DefaultBackoffMin}, {&config.BackoffMax, DefaultBackoffMax},
	}
	for _, d := range defaults {
		if *d.value <= 0 {
			*d.value = d.fallback
		}
	}
	config.BackoffMax = max(config.BackoffMax, config.BackoffMin)
	if config.QueueBytes == 0 {
		config.QueueBytes = DefaultQueueBytes
	}
	if config.MaxPayloadBytes == 0 {
		config.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
}

// isLoopback reports whether a TCP address is a loopback IP.
func isLoopback(address net.Addr) bool {
	tcp, ok := address.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// plaintextAllowed is the rule for every door: plaintext only on
// loopback, unless TLS is on or the insecure option is set.
func (l *Link) plaintextAllowed(remote net.Addr) bool {
	return l.config.TLS != nil || l.config.InsecurePlaintext || isLoopback(remote)
}

// Addr is the address the link accepts on.
func (l *Link) Addr() net.Addr { return l.config.Listener.Addr() }

// Send queues one message for node on channel and returns at once. It
// copies payload. It returns false, counting the message as dropped, when
// the node is unknown, the channel is ControlChannel, the payload exceeds
// MaxPayloadBytes, or the node's queue is full; a queued message may still
// be lost with a connection (Raft retries). Messages to one node on one
// connection arrive in the order they were sent.
func (l *Link) Send(to NodeID, channel uint64, payload []byte) bool {
	p := (*l.peers.Load())[to]
	if p == nil {
		l.droppedUnknown.Add(1)
		return false
	}
	if channel == ControlChannel || len(payload) > l.config.MaxPayloadBytes {
		p.countDropped(1, frameBytes(len(payload)))
		return false
	}
	return p.enqueue(channel, payload)
}

// SetPeer adds a peer or changes its address. A live connection to a
// peer whose address changes is closed, so the next one goes to the new
// address.
func (l *Link) SetPeer(id NodeID, address string) error {
	if err := l.config.validatePeer(id, address); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return ErrClosed
	}
	if p := l.mu.peers[id]; p != nil {
		p.setAddress(address)
		return nil
	}
	l.addPeerLocked(id, address)
	return nil
}

// addPeerLocked creates a peer and, if this node dials it, its dial loop.
// REQUIRES: l.mu held and the link open.
func (l *Link) addPeerLocked(id NodeID, address string) {
	p := newPeer(l, id, address)
	l.mu.peers[id] = p
	l.publishPeersLocked()
	if p.dials {
		l.wg.Go(p.dialLoop)
	}
}

// RemovePeer forgets a peer: its connection is closed and its queue
// dropped. Messages from it are refused from then on.
func (l *Link) RemovePeer(id NodeID) {
	l.mu.Lock()
	p := l.mu.peers[id]
	if p != nil {
		delete(l.mu.peers, id)
		l.publishPeersLocked()
	}
	l.mu.Unlock()
	if p != nil {
		p.shutdown(ErrPeerRemoved)
	}
}

// publishPeersLocked publishes a copy of the peer map for Send.
// REQUIRES: l.mu held.
func (l *Link) publishPeersLocked() {
	snapshot := maps.Clone(l.mu.peers)
	l.peers.Store(&snapshot)
}

// peer returns a known peer, or nil.
func (l *Link) peer(id NodeID) *peer { return (*l.peers.Load())[id] }

// spawn runs f on a goroutine the link waits for in Close; false once
// the link is closed.
func (l *Link) spawn(f func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return false
	}
	l.wg.Go(f)
	return true
}

// start makes c the peer's connection and starts its reader and writer;
// false when the link or the peer is gone (c is then closed).
func (l *Link) start(c *connection) bool {
	l.mu.Lock()
	started := false
	if !l.mu.closed {
		var replaced *connection
		replaced, started = c.peer.install(c)
		if replaced != nil {
			// Before the new writer starts, so the old one stops taking
			// from the queue. No callback runs: it is no longer active.
			replaced.close(ErrReplaced)
		}
		if started {
			l.wg.Go(c.readLoop)
			l.wg.Go(c.writeLoop)
		}
	}
	l.mu.Unlock()
	if !started {
		c.close(ErrClosed)
	}
	return started
}

// Close stops the link: the listener, every connection and every dial
// stop; queued messages are dropped. It returns once every goroutine of
// the link has ended (after a Handler call in progress returns).
func (l *Link) Close() error {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return nil
	}
	l.mu.closed = true
	peers := slices.Collect(maps.Values(l.mu.peers))
	l.mu.Unlock()
	l.cancel()
	err := l.config.Listener.Close()
	for _, p := range peers {
		p.shutdown(ErrClosed)
	}
	l.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
