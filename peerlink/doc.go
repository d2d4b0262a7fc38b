// Package peerlink is the node-to-node transport of a cluster: one TCP
// connection per pair of nodes, optionally TLS, carrying messages for any
// number of channels (a channel is a uint64: a partition's Raft group,
// the metadata group, a catch-up stream). It owns the connections, the
// handshake that proves who is at the other end, a bounded queue per
// peer, batching of many channels' messages into one write, framing with
// checksums, redial with backoff, and the counters `cluster status` and
// the metrics show. It knows nothing of Raft: a message is bytes.
//
// # Identity and the handshake
//
// Every node has a NodeID and every cluster an id. Of each pair, only the
// node with the lower id dials; the higher one accepts, and a new inbound
// connection from a peer replaces the old one (the dialer gave up on it).
// So there is exactly one connection per pair without a tie-break, a
// restarted lower node is reconnected as soon as it dials, and the link
// between two nodes always crosses the same address (a fault proxy placed
// on it sees all of the pair's traffic).
//
// The dialer sends a greeting (magic "IBPL", protocol version, cluster
// id, its node id, the node id it expects) and the acceptor answers with
// its own, or with a refusal code both sides map to the same error:
// ErrWrongCluster (a node of another cluster), ErrWrongNode (the address
// now belongs to another node), ErrDialDirection, ErrUnknownNode,
// ErrVersion, ErrIdentity, ErrNotLoopback. Refusals are counted and
// logged on both sides, and a refused dialer backs off to BackoffMax.
//
// With TLSConfig, connections are TLS 1.3 with mutual authentication
// against the cluster CA, and identity comes from the certificate: each
// node's certificate carries exactly one URI SAN
// ironbus-node://<cluster>/<node> (NodeURI). A URI SAN rather than the
// common name, because SANs are the field verification is defined on and
// the URI says cluster and node without a naming convention to parse. The
// dialer checks that the acceptor's certificate names the node it dialed;
// the acceptor checks that the dialer's names the node its greeting
// claims. Host names and IP SANs play no part. Without TLS, every address
// involved (the listener, each peer as dialed, each accepted connection)
// must be loopback unless InsecurePlaintext is set: the project's rule for
// every door.
//
// # Frames
//
// After the greetings both directions carry frames:
//
//	[u32 length][u32 crc32c][u64 channel][payload]      (little-endian)
//
// length counts the channel and the payload. The CRC32C is per frame and
// covers the length, the channel and the payload: a receiver checks each
// frame before it hands it on, so it never buffers a batch to verify it,
// and a damaged frame costs only its connection. TCP's 16-bit checksum
// lets corrupted segments through often enough at scale, and Raft
// message headers (terms, indexes, commit marks) carry no checksum of
// their own; over TLS the record MAC covers the same ground and the CRC is
// four bytes more per frame. A frame longer than MaxPayloadBytes, shorter
// than its channel, or with a bad checksum closes the connection with
// ErrFrameTooLarge or ErrFrameCorrupt (I11); nothing panics. Channel
// ControlChannel carries the link's heartbeats.
//
// # Sending and receiving
//
// Send never blocks: it appends the encoded frame to the peer's queue and
// returns. A queue holds at most QueueBytes (or one frame larger than
// that, alone); when full, Send drops the message and counts it (DESIGN
// I8: memory is a function of configuration; Raft resends). The queue
// outlives connections, but when a connection breaks or a dial fails its
// contents are dropped and counted: they were meant for a path that
// failed. One writer goroutine per connection swaps the whole queue out
// and writes it with one call, so the messages of many channels share a
// syscall. Messages to one peer arrive in send order on one connection;
// nothing is ordered across connections.
//
// One reader goroutine per connection calls Handler for each frame, in
// order; calls for different peers are concurrent, and for one peer they
// may overlap briefly while a new connection replaces the old. The payload is a view of the read buffer, valid only until the
// Handler returns: copying is left to the Handler, which usually decodes
// (and so copies) anyway. A blocked Handler stops reading from that peer.
//
// # Liveness
//
// A connection with nothing to send writes a heartbeat every
// HeartbeatInterval; one that receives nothing for IdleTimeout, or whose
// write blocks that long, is closed (a paused or partitioned peer is
// noticed even when every channel is quiet). The dialer redials with
// exponential backoff from BackoffMin to BackoffMax with jitter. Every
// failed dial or handshake and every lost connection is reported to the
// Unreachable callback (Raft's ReportUnreachable).
//
// # Memory per peer
//
// Queue: max(QueueBytes, one frame) pending plus the same again in the
// writer's hands; receive: a 64 KiB read buffer plus a scratch buffer as
// large as the largest frame received (at most MaxPayloadBytes).
//
// # Invariants (each has a test that tries to break it)
//
//  1. At most one connection per pair carries messages; only the lower id
//     dials.
//  2. Nothing is exchanged before both greetings pass: same cluster, the
//     expected node, with TLS the certificate names that node.
//  3. Without TLS nothing leaves or enters through a non-loopback address
//     unless InsecurePlaintext is set.
//  4. Send never blocks and never holds more than the queue bound.
//  5. A malformed frame or greeting ends its connection with a typed error;
//     nothing panics.
//  6. Close returns promptly, drains nothing, and leaves no goroutine.
package peerlink
