package record

import (
	"crypto/cipher"
	"fmt"
	"slices"

	"github.com/zeebo/xxh3"
)

// Encrypted record frames (docs/FORMAT.md, "Encrypted record frame"). A
// broker with a key ring stores each body sealed with AES-256-GCM in a
// frame of version EncryptedFrameVersion with the encrypted flag set. The
// frame header keeps its meaning for everything that walks frames
// (recovery, the reader, the commit-frame batch CRC): BodyLength and
// BodyCRC describe the stored envelope, so its CRC32C is checked before a
// byte is decrypted. The envelope is
//
//	key id u32 · salt [16] · AES-GCM( producer CRC32C u32 · body ) · tag [16]
//
// The AEAD is the one the key ring derives for (key id, salt); the nonce
// is the frame's bytes [8,20): the record's offset and the low half of its
// timestamp, so a derived key never seals two records at one offset. The
// additional data is the envelope's key id and salt.
const (
	// EncryptedFrameVersion is the version of an encrypted record frame;
	// a binary that knows only FrameVersion refuses it as too new.
	EncryptedFrameVersion = 2
	// SaltSize is the random salt a sealing key was derived with.
	SaltSize = 16
	// EncryptionOverhead is what an encrypted body adds to the producer's
	// body: key id, salt, the sealed producer CRC and the GCM tag.
	EncryptionOverhead = envelopeHeadSize + 4 + gcmTagSize

	envelopeHeadSize   = 4 + SaltSize
	gcmTagSize         = 16
	gcmNonceSize       = 12
	frameFlagEncrypted = 1 << 1
)

// SealingKey seals the records of one writer: the key ring's key ID, the
// salt the AEAD was derived with, and the AEAD itself (AES-256-GCM with
// 12-byte nonces). A writer draws a new one, with a new random salt,
// every time it starts writing a log, so a (key, nonce) pair is never
// used twice even when a torn tail's offsets are written again.
type SealingKey struct {
	ID   uint32
	Salt [SaltSize]byte
	AEAD cipher.AEAD
}

// OpeningKeys finds the AEAD that opens records sealed under key id with
// salt. It returns an error wrapping ErrNoKey for an id it does not hold.
type OpeningKeys interface {
	OpeningKey(id uint32, salt [SaltSize]byte) (cipher.AEAD, error)
}

// Encrypted reports whether the frame's body is an encrypted envelope.
// The flag means encryption only in a frame of EncryptedFrameVersion: in a
// version 1 frame it is an unknown bit, ignored.
func (h FrameHeader) Encrypted() bool {
	return h.Version == EncryptedFrameVersion && h.Flags&frameFlagEncrypted != 0
}

// EncryptedFrameSize returns the bytes an encrypted frame around a
// producer body of bodyLength bytes occupies.
func EncryptedFrameSize(bodyLength int) int { return FrameSize(bodyLength + EncryptionOverhead) }

// AppendEncryptedFrame appends an encrypted record frame holding body to
// dst, sealed under key. bodyCRC is the producer's CRC32C of body, sealed
// with it and checked again after decryption. The frame's own BodyCRC is
// the CRC32C of the envelope. It allocates nothing when dst has room.
func AppendEncryptedFrame(dst []byte, offset uint64, timestamp int64, body []byte, bodyCRC uint32, key *SealingKey) []byte {
	stored := len(body) + EncryptionOverhead
	size := FrameSize(stored)
	start := len(dst)
	dst = slices.Grow(dst, size)[:len(dst)+size]
	b := dst[start : start+size]
	var flags uint8 = frameFlagEncrypted
	if stored >= BodyHashThreshold {
		flags |= frameFlagHash
	}
	b[0], b[1] = frameMagic[0], frameMagic[1]
	b[2] = EncryptedFrameVersion
	b[3] = flags
	le.PutUint32(b[4:8], uint32(size))
	le.PutUint64(b[8:16], offset)
	le.PutUint64(b[16:24], uint64(timestamp))
	le.PutUint32(b[24:28], uint32(stored))
	envelope := b[FrameHeaderSize : FrameHeaderSize+stored]
	le.PutUint32(envelope[0:4], key.ID)
	copy(envelope[4:envelopeHeadSize], key.Salt[:])
	plain := envelope[envelopeHeadSize : envelopeHeadSize+4+len(body)]
	le.PutUint32(plain[0:4], bodyCRC)
	copy(plain[4:], body)
	key.AEAD.Seal(plain[:0], b[8:8+gcmNonceSize], plain, envelope[:envelopeHeadSize])
	le.PutUint32(b[28:32], Checksum(envelope))
	le.PutUint32(b[32:36], Checksum(b[0:32]))
	tail := FrameHeaderSize + stored
	if flags&frameFlagHash != 0 {
		le.PutUint64(b[tail:tail+8], xxh3.Hash(envelope))
		tail += 8
	}
	le.PutUint32(b[tail:tail+4], uint32(size))
	return dst
}

// EnvelopeKey returns the key id and salt of an encrypted body.
func EnvelopeKey(envelope []byte) (uint32, [SaltSize]byte, error) {
	var salt [SaltSize]byte
	if len(envelope) < EncryptionOverhead {
		return 0, salt, fmt.Errorf("%w: encrypted body of %d bytes, shorter than its %d-byte envelope", ErrCorrupt, len(envelope), EncryptionOverhead)
	}
	copy(salt[:], envelope[4:envelopeHeadSize])
	return le.Uint32(envelope[0:4]), salt, nil
}

// AppendDecryptedFrame decrypts the encrypted frame (header h, already
// checked by VerifyFrame: integrity before transform) and appends the
// plain record frame a broker without encryption would have stored:
// version FrameVersion, the same offset and timestamp, the producer's body
// and CRC. The producer's CRC is checked after decryption. A key the ring
// does not hold is ErrNoKey; a body that fails authentication (a wrong
// key, or bytes changed along with their CRC) is ErrDecrypt.
func AppendDecryptedFrame(dst []byte, frame []byte, h FrameHeader, keys OpeningKeys) ([]byte, error) {
	if !h.Encrypted() || len(frame) < FrameHeaderSize+int(h.BodyLength) {
		return dst, fmt.Errorf("%w: not a whole encrypted record frame", ErrCorrupt)
	}
	envelope := frame[FrameHeaderSize : FrameHeaderSize+int(h.BodyLength)]
	id, salt, err := EnvelopeKey(envelope)
	if err != nil {
		return dst, err
	}
	if keys == nil {
		return dst, fmt.Errorf("%w: record %d is encrypted under key %d and no key ring was given", ErrNoKey, h.Offset, id)
	}
	aead, err := keys.OpeningKey(id, salt)
	if err != nil {
		return dst, err
	}
	bodyLength := len(envelope) - EncryptionOverhead
	size := FrameSize(bodyLength)
	start := len(dst)
	dst = slices.Grow(dst, size)[:len(dst)+size]
	b := dst[start : start+size]
	// Open writes the producer CRC and the body contiguously at [32, 36+n):
	// the CRC lands where the header CRC goes and is moved to [28, 32).
	if _, err := aead.Open(b[32:32], frame[8:8+gcmNonceSize], envelope[envelopeHeadSize:], envelope[:envelopeHeadSize]); err != nil {
		return dst[:start], fmt.Errorf("%w: record %d under key %d: %w", ErrDecrypt, h.Offset, id, err)
	}
	bodyCRC := le.Uint32(b[32:36])
	body := b[FrameHeaderSize : FrameHeaderSize+bodyLength]
	if got := Checksum(body); got != bodyCRC {
		return dst[:start], fmt.Errorf("%w: record %d decrypted body checksum %08x, producer's %08x", ErrCorrupt, h.Offset, got, bodyCRC)
	}
	var flags uint8
	if bodyLength >= BodyHashThreshold {
		flags |= frameFlagHash
	}
	b[0], b[1] = frameMagic[0], frameMagic[1]
	b[2] = FrameVersion
	b[3] = flags
	le.PutUint32(b[4:8], uint32(size))
	copy(b[8:24], frame[8:24])
	le.PutUint32(b[24:28], uint32(bodyLength))
	le.PutUint32(b[28:32], bodyCRC)
	le.PutUint32(b[32:36], Checksum(b[0:32]))
	tail := FrameHeaderSize + bodyLength
	if flags&frameFlagHash != 0 {
		le.PutUint64(b[tail:tail+8], xxh3.Hash(body))
		tail += 8
	}
	le.PutUint32(b[tail:tail+4], uint32(size))
	return dst, nil
}

// IsEncryptedFrame reports whether b starts with a record frame whose
// flags say its body is encrypted. Like IsFrame, it checks nothing else.
func IsEncryptedFrame(b []byte) bool {
	return IsFrame(b) && len(b) > 3 && b[2] == EncryptedFrameVersion && b[3]&frameFlagEncrypted != 0
}
