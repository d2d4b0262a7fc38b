package security

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Sentinel errors of credential handling.
var (
	ErrMalformedHash = errors.New("security: malformed password hash")
	// ErrWeakHash is a password hash whose parameters are below
	// MinimumArgon2id: cheap enough to brute-force from a leaked config.
	ErrWeakHash = errors.New("security: password hash parameters below the floor")
)

// tokenBytes is the entropy of a generated token: 256 bits.
const tokenBytes = 32

// tokenPrefix marks IronBus tokens so secret scanners and humans know one.
const tokenPrefix = "ibt_"

// NewToken returns a fresh bearer token from 32 random bytes.
func NewToken() (string, error) {
	raw := make([]byte, tokenBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("security: random token: %w", err)
	}
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(raw), nil
}

// TokenDigest is what the auth config stores for a token: its SHA-256,
// hex. A leaked config does not leak usable tokens (they carry 256 bits,
// so a fast hash is enough: there is nothing to brute-force).
func TokenDigest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// tokenMatches compares a presented token with a stored digest in
// constant time.
func tokenMatches(token []byte, digest [sha256.Size]byte) bool {
	sum := sha256.Sum256(token)
	return subtle.ConstantTimeCompare(sum[:], digest[:]) == 1
}

// Argon2idParams are the cost parameters of a password hash.
type Argon2idParams struct {
	MemoryKiB   uint32
	Iterations  uint32
	Parallelism uint8
}

// DefaultArgon2id follows RFC 9106's second recommended option scaled for
// edge devices: 64 MiB, 3 passes, 2 lanes (about 100 ms on a small ARM).
var DefaultArgon2id = Argon2idParams{MemoryKiB: 64 << 10, Iterations: 3, Parallelism: 2}

// MinimumArgon2id is the floor every password hash must reach (OWASP's
// lowest Argon2id recommendation): 19 MiB of memory and 2 passes. A hash
// with fewer passes is accepted when its memory makes up for them: memory
// × passes must reach 38 MiB (46 MiB with 1 pass, say). Below the floor a
// leaked auth config gives its passwords away to a GPU in hours.
var MinimumArgon2id = Argon2idParams{MemoryKiB: 19 << 10, Iterations: 2, Parallelism: 1}

// CheckArgon2id refuses parameters below MinimumArgon2id.
func CheckArgon2id(params Argon2idParams) error {
	floor := MinimumArgon2id
	if params.MemoryKiB < floor.MemoryKiB || uint64(params.MemoryKiB)*uint64(params.Iterations) < uint64(floor.MemoryKiB)*uint64(floor.Iterations) ||
		params.Parallelism < floor.Parallelism {
		return fmt.Errorf("%w: m=%d KiB, t=%d, p=%d; the floor is m=%d KiB (19 MiB) with memory × passes at least %d KiB (2 passes at 19 MiB, 1 pass at 38 MiB): hash the password again with `ironbus passwd`",
			ErrWeakHash, params.MemoryKiB, params.Iterations, params.Parallelism, floor.MemoryKiB, uint64(floor.MemoryKiB)*uint64(floor.Iterations))
	}
	return nil
}

const (
	saltBytes = 16
	keyBytes  = 32
	// Bounds a hash string may ask for: a hostile config must not make
	// every login allocate gigabytes.
	maxMemoryKiB  = 1 << 20
	maxIterations = 64
)

// HashPassword returns a PHC-style Argon2id hash string:
// $argon2id$v=19$m=65536,t=3,p=2$<salt>$<key> (unpadded base64).
// Parameters below MinimumArgon2id are refused (ErrWeakHash).
func HashPassword(password string, params Argon2idParams) (string, error) {
	if err := CheckArgon2id(params); err != nil {
		return "", err
	}
	if params.MemoryKiB > maxMemoryKiB || params.Iterations > maxIterations {
		return "", fmt.Errorf("%w: m=%d KiB, t=%d is above the bounds (m %d, t %d)", ErrMalformedHash, params.MemoryKiB, params.Iterations, maxMemoryKiB, maxIterations)
	}
	salt := make([]byte, saltBytes)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("security: random salt: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, params.Iterations, params.MemoryKiB, params.Parallelism, keyBytes)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, params.MemoryKiB, params.Iterations,
		params.Parallelism, base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key)), nil
}

// passwordHash is a parsed Argon2id hash string.
type passwordHash struct {
	params Argon2idParams
	salt   []byte
	key    []byte
}

// parsePasswordHash parses and bounds a hash string.
func parsePasswordHash(text string) (passwordHash, error) {
	parts := strings.Split(text, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return passwordHash{}, fmt.Errorf("%w: want $argon2id$v=19$m=...,t=...,p=...$salt$key", ErrMalformedHash)
	}
	if parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return passwordHash{}, fmt.Errorf("%w: version %q, want v=%d", ErrMalformedHash, parts[2], argon2.Version)
	}
	var h passwordHash
	var parallelism uint32
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &h.params.MemoryKiB, &h.params.Iterations, &parallelism); err != nil {
		return passwordHash{}, fmt.Errorf("%w: parameters %q: %v", ErrMalformedHash, parts[3], err)
	}
	if h.params.MemoryKiB < 8 || h.params.MemoryKiB > maxMemoryKiB || h.params.Iterations < 1 ||
		h.params.Iterations > maxIterations || parallelism < 1 || parallelism > 255 {
		return passwordHash{}, fmt.Errorf("%w: parameters %q out of range (m 8..%d, t 1..%d, p 1..255)", ErrMalformedHash, parts[3], maxMemoryKiB, maxIterations)
	}
	h.params.Parallelism = uint8(parallelism)
	if err := CheckArgon2id(h.params); err != nil {
		return passwordHash{}, err
	}
	var err error
	if h.salt, err = base64.RawStdEncoding.DecodeString(parts[4]); err != nil || len(h.salt) < 8 {
		return passwordHash{}, fmt.Errorf("%w: salt must be at least 8 bytes of unpadded base64", ErrMalformedHash)
	}
	if h.key, err = base64.RawStdEncoding.DecodeString(parts[5]); err != nil || len(h.key) < 16 || len(h.key) > 64 {
		return passwordHash{}, fmt.Errorf("%w: key must be 16 to 64 bytes of unpadded base64", ErrMalformedHash)
	}
	return h, nil
}

// matches hashes password with the stored parameters and compares in
// constant time.
func (h passwordHash) matches(password []byte) bool {
	key := argon2.IDKey(password, h.salt, h.params.Iterations, h.params.MemoryKiB, h.params.Parallelism, uint32(len(h.key)))
	return subtle.ConstantTimeCompare(key, h.key) == 1
}
