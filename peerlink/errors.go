package peerlink

import "errors"

var (
	// ErrConfig: the Config cannot be used (missing field, bad bound, a
	// certificate that does not name this node).
	ErrConfig = errors.New("peerlink: invalid configuration")
	// ErrClosed: the Link was closed.
	ErrClosed = errors.New("peerlink: closed")
	// ErrNotLoopback: a plaintext link would cross a non-loopback address
	// without the explicit insecure option.
	ErrNotLoopback = errors.New("peerlink: plaintext on a non-loopback address")
	// ErrNoAddress: the peer has no address to dial.
	ErrNoAddress = errors.New("peerlink: no address for the peer")

	// ErrHandshake: the handshake did not complete (I/O error, timeout,
	// or a malformed greeting).
	ErrHandshake = errors.New("peerlink: handshake failed")
	// ErrRefused: the other side refused the handshake; the error also
	// wraps the reason (ErrWrongCluster, ErrWrongNode, ...).
	ErrRefused = errors.New("peerlink: handshake refused by the peer")
	// ErrBadMagic: the greeting is not a peer link's (another protocol
	// reached the peer port).
	ErrBadMagic = errors.New("peerlink: not a peer link greeting")
	// ErrVersion: the peer speaks another protocol version.
	ErrVersion = errors.New("peerlink: unsupported protocol version")
	// ErrWrongCluster: the peer belongs to another cluster.
	ErrWrongCluster = errors.New("peerlink: peer belongs to another cluster")
	// ErrWrongNode: the peer is not the node expected at that address, or
	// the dialer expected another node here.
	ErrWrongNode = errors.New("peerlink: peer is not the node expected")
	// ErrUnknownNode: the dialer is not a node this link knows.
	ErrUnknownNode = errors.New("peerlink: peer is not a known node")
	// ErrDialDirection: a node dialed a lower node id; only the lower id
	// of a pair dials.
	ErrDialDirection = errors.New("peerlink: only the lower node id of a pair dials")
	// ErrIdentity: the peer's certificate does not name the node and
	// cluster it claims, or does not chain to the cluster CA.
	ErrIdentity = errors.New("peerlink: certificate does not name the peer")

	// ErrFrameTooLarge: a frame's length is beyond the configured maximum.
	ErrFrameTooLarge = errors.New("peerlink: frame too large")
	// ErrFrameCorrupt: a frame is malformed or fails its checksum.
	ErrFrameCorrupt = errors.New("peerlink: corrupt frame")
	// ErrIdle: nothing arrived from the peer within the idle timeout.
	ErrIdle = errors.New("peerlink: peer silent past the idle timeout")
	// ErrReplaced: a newer connection from the same peer took over.
	ErrReplaced = errors.New("peerlink: connection replaced by a newer one")
	// ErrPeerRemoved: the peer was removed or its address changed.
	ErrPeerRemoved = errors.New("peerlink: peer removed or moved")
)
