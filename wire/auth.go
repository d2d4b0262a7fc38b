package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Auth mechanisms carried in Hello's AuthMechanism byte. The numbers are
// the protocol: never reuse one; add new ones at the end.
const (
	AuthNone     uint8 = 0 // no credentials (a verified client certificate may still name the peer)
	AuthToken    uint8 = 1 // material: the bearer token's bytes
	AuthPassword uint8 = 2 // material: u16 username length, username, password
	AuthMTLS     uint8 = 3 // material: empty; the identity is the client certificate's
)

// ErrAuthMaterial reports auth material that does not parse. A server
// answers it exactly as it answers a wrong secret (not_authorized), so a
// malformed credential teaches a prober nothing.
var ErrAuthMaterial = errors.New("wire: malformed auth material")

// Limits of auth material: a Hello is small.
const (
	MaxAuthUsername = 256
	MaxAuthPassword = 1024
	MaxAuthToken    = 1024
)

// Credentials are decoded auth material. The byte slices alias the input.
type Credentials struct {
	Mechanism uint8
	Token     []byte // AuthToken
	Username  string // AuthPassword
	Password  []byte // AuthPassword
}

// AppendPasswordMaterial encodes a username and password for Hello.
func AppendPasswordMaterial(dst []byte, username string, password []byte) []byte {
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(username)))
	dst = append(dst, username...)
	return append(dst, password...)
}

// DecodeAuth parses Hello's auth fields.
func DecodeAuth(mechanism uint8, material []byte) (Credentials, error) {
	c := Credentials{Mechanism: mechanism}
	switch mechanism {
	case AuthNone, AuthMTLS:
		if len(material) != 0 {
			return Credentials{}, fmt.Errorf("%w: mechanism %d carries no material", ErrAuthMaterial, mechanism)
		}
	case AuthToken:
		if len(material) == 0 || len(material) > MaxAuthToken {
			return Credentials{}, fmt.Errorf("%w: token of %d bytes (1..%d)", ErrAuthMaterial, len(material), MaxAuthToken)
		}
		c.Token = material
	case AuthPassword:
		if len(material) < 2 {
			return Credentials{}, fmt.Errorf("%w: password material too short", ErrAuthMaterial)
		}
		n := int(binary.LittleEndian.Uint16(material))
		rest := material[2:]
		if n == 0 || n > MaxAuthUsername || n > len(rest) {
			return Credentials{}, fmt.Errorf("%w: username length %d", ErrAuthMaterial, n)
		}
		c.Username, c.Password = string(rest[:n]), rest[n:]
		if len(c.Password) == 0 || len(c.Password) > MaxAuthPassword {
			return Credentials{}, fmt.Errorf("%w: password of %d bytes (1..%d)", ErrAuthMaterial, len(c.Password), MaxAuthPassword)
		}
	default:
		return Credentials{}, fmt.Errorf("%w: unknown mechanism %d", ErrAuthMaterial, mechanism)
	}
	return c, nil
}
