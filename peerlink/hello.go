package peerlink

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// Greeting layout (little-endian), sent by the dialer and answered by the
// acceptor before any frame:
//
//	[4]  magic "IBPL"
//	[u16] protocol version
//	[u8]  refusal (0 in a dialer's greeting and in an acceptance)
//	[u8]  reserved, 0
//	[u32] sender node id
//	[u32] receiver node id (the node the sender expects)
//	[u8]  cluster id length, then the cluster id
//	[u32] crc32c of everything before it
//
// The magic and version keep their place in every version: an acceptor
// that reads an unknown version answers with a greeting of its own version
// carrying refusalVersion.
const (
	protocolVersion    = 1
	helloMagic         = "IBPL"
	helloFixedBytes    = 17
	helloChecksumBytes = 4
	// MaxClusterIDBytes bounds a cluster id.
	MaxClusterIDBytes = 64
)

// refusal is why an acceptor turned a dialer away; it travels in the
// answer so that both sides log the same typed reason.
type refusal uint8

const (
	refusalNone refusal = iota
	refusalVersion
	refusalWrongCluster
	refusalWrongNode
	refusalUnknownNode
	refusalDialDirection
	refusalIdentity
	refusalNotLoopback
)

// refusalReasons maps each refusal to the error both sides report.
var refusalReasons = [...]error{
	refusalVersion:       ErrVersion,
	refusalWrongCluster:  ErrWrongCluster,
	refusalWrongNode:     ErrWrongNode,
	refusalUnknownNode:   ErrUnknownNode,
	refusalDialDirection: ErrDialDirection,
	refusalIdentity:      ErrIdentity,
	refusalNotLoopback:   ErrNotLoopback,
}

// reason is the error a dialer reports for a refusal it received.
func (r refusal) reason() error {
	if r == refusalNone || int(r) >= len(refusalReasons) {
		return fmt.Errorf("%w: unknown refusal code %d", ErrHandshake, r)
	}
	return refusalReasons[r]
}

// refusalFor is the code an acceptor sends for a reason it found.
func refusalFor(reason error) refusal {
	for code, known := range refusalReasons {
		if known != nil && errors.Is(reason, known) {
			return refusal(code)
		}
	}
	return refusalNone
}

// hello is one greeting.
type hello struct {
	version  uint16
	refusal  refusal
	sender   NodeID
	receiver NodeID
	cluster  string
}

// encode returns the greeting's bytes. The cluster id was validated
// against MaxClusterIDBytes when the link was configured.
func (h hello) encode() []byte {
	buffer := make([]byte, 0, helloFixedBytes+len(h.cluster)+helloChecksumBytes)
	buffer = append(buffer, helloMagic...)
	buffer = le.AppendUint16(buffer, h.version)
	buffer = append(buffer, byte(h.refusal), 0)
	buffer = le.AppendUint32(buffer, uint32(h.sender))
	buffer = le.AppendUint32(buffer, uint32(h.receiver))
	buffer = append(buffer, byte(len(h.cluster)))
	buffer = append(buffer, h.cluster...)
	return le.AppendUint32(buffer, crc32.Checksum(buffer, castagnoli))
}

// readHello reads one greeting. ErrBadMagic for a stream that is not a
// peer link's; ErrVersion (with the version read) for another version;
// ErrHandshake for a malformed greeting or an I/O error.
func readHello(source io.Reader) (hello, error) {
	var fixed [helloFixedBytes]byte
	if _, err := io.ReadFull(source, fixed[:]); err != nil {
		return hello{}, fmt.Errorf("%w: reading the greeting: %w", ErrHandshake, err)
	}
	if string(fixed[0:4]) != helloMagic {
		return hello{}, fmt.Errorf("%w: starts with %q", ErrBadMagic, fixed[0:4])
	}
	greeting := hello{version: le.Uint16(fixed[4:6])}
	if greeting.version != protocolVersion {
		return greeting, fmt.Errorf("%w: peer speaks version %d, this node %d", ErrVersion, greeting.version, protocolVersion)
	}
	clusterBytes := int(fixed[16])
	if clusterBytes > MaxClusterIDBytes {
		return hello{}, fmt.Errorf("%w: cluster id of %d bytes", ErrHandshake, clusterBytes)
	}
	rest := make([]byte, clusterBytes+helloChecksumBytes)
	if _, err := io.ReadFull(source, rest); err != nil {
		return hello{}, fmt.Errorf("%w: reading the greeting: %w", ErrHandshake, err)
	}
	sum := crc32.Update(crc32.Checksum(fixed[:], castagnoli), castagnoli, rest[:clusterBytes])
	if want := le.Uint32(rest[clusterBytes:]); sum != want {
		return hello{}, fmt.Errorf("%w: greeting checksum %08x, says %08x", ErrHandshake, sum, want)
	}
	greeting.refusal = refusal(fixed[6])
	greeting.sender = NodeID(le.Uint32(fixed[8:12]))
	greeting.receiver = NodeID(le.Uint32(fixed[12:16]))
	greeting.cluster = string(rest[:clusterBytes])
	return greeting, nil
}
