package record_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"fmt"
	"testing"

	"github.com/ironbus/ironbus/record"
)

// testKeys opens records sealed under key id 7 with any salt (the salt
// is ignored here: keyring derives per salt).
type testKeys struct{ aead cipher.AEAD }

func (k testKeys) OpeningKey(id uint32, _ [record.SaltSize]byte) (cipher.AEAD, error) {
	if id != 7 {
		return nil, fmt.Errorf("%w: key %d", record.ErrNoKey, id)
	}
	return k.aead, nil
}

func testAEAD(t testing.TB, fill byte) cipher.AEAD {
	t.Helper()
	block, err := aes.NewCipher(bytes.Repeat([]byte{fill}, 32))
	if err != nil {
		t.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	return aead
}

func sealedFrame(t testing.TB, body []byte, aead cipher.AEAD) []byte {
	t.Helper()
	key := &record.SealingKey{ID: 7, Salt: [record.SaltSize]byte{1, 2, 3}, AEAD: aead}
	return record.AppendEncryptedFrame(nil, 42, 1_800_000_000_000, body, record.Checksum(body), key)
}

func TestEncryptedFrameRoundTrip(t *testing.T) {
	aead := testAEAD(t, 9)
	for _, size := range []int{0, 1, 100, record.BodyHashThreshold - record.EncryptionOverhead, record.BodyHashThreshold, 200_000} {
		body := bytes.Repeat([]byte("secret!"), size/7+1)[:size]
		frame := sealedFrame(t, body, aead)
		if len(frame) != record.EncryptedFrameSize(size) {
			t.Fatalf("size %d: frame of %d bytes, EncryptedFrameSize says %d", size, len(frame), record.EncryptedFrameSize(size))
		}
		if size >= 7 && bytes.Contains(frame, body[:7]) {
			t.Fatalf("size %d: the sealed frame holds plaintext", size)
		}
		h, envelope, err := record.ParseFrame(frame, record.DefaultMaxBody)
		if err != nil || !h.Encrypted() || !record.IsEncryptedFrame(frame) {
			t.Fatalf("size %d: %+v %v", size, h, err)
		}
		if id, _, err := record.EnvelopeKey(envelope); err != nil || id != 7 {
			t.Fatalf("envelope key %d, %v", id, err)
		}
		plain, err := record.AppendDecryptedFrame([]byte("prefix"), frame, h, testKeys{aead})
		if err != nil {
			t.Fatal(err)
		}
		ph, got, err := record.ParseFrame(plain[len("prefix"):], record.DefaultMaxBody)
		if err != nil || ph.Encrypted() || ph.Version != record.FrameVersion || ph.Offset != 42 ||
			ph.Timestamp != h.Timestamp || ph.BodyCRC != record.Checksum(body) || !bytes.Equal(got, body) {
			t.Fatalf("size %d: decrypted %+v %v", size, ph, err)
		}
	}
}

func TestEncryptedFrameRefusals(t *testing.T) {
	body := []byte("a body worth protecting")
	frame := sealedFrame(t, body, testAEAD(t, 9))
	h, _, err := record.ParseFrame(frame, record.DefaultMaxBody)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := record.AppendDecryptedFrame(nil, frame, h, testKeys{testAEAD(t, 8)}); !errors.Is(err, record.ErrDecrypt) {
		t.Fatalf("wrong key: %v, want ErrDecrypt", err)
	}
	if _, err := record.AppendDecryptedFrame(nil, frame, h, nil); !errors.Is(err, record.ErrNoKey) {
		t.Fatalf("no keys: %v, want ErrNoKey", err)
	}
	// A flipped ciphertext byte fails the envelope's CRC before anything
	// is decrypted (integrity before transform).
	flipped := bytes.Clone(frame)
	flipped[record.FrameHeaderSize+30] ^= 1
	if _, _, err := record.ParseFrame(flipped, record.DefaultMaxBody); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("flipped ciphertext: %v, want ErrCorrupt", err)
	}
	// The frame's offset is the nonce: a frame moved to another offset
	// (header resealed) does not open.
	moved := bytes.Clone(frame)
	moved[8]++
	littleEndian.PutUint32(moved[32:36], record.Checksum(moved[0:32]))
	mh, _, err := record.ParseFrame(moved, record.DefaultMaxBody)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := record.AppendDecryptedFrame(nil, moved, mh, testKeys{testAEAD(t, 9)}); !errors.Is(err, record.ErrDecrypt) {
		t.Fatalf("moved frame: %v, want ErrDecrypt", err)
	}
	// An encrypted frame's body limit is the producer's: the envelope may
	// exceed maxBody by the overhead, no more.
	if _, err := record.ParseFrameHeader(frame, uint32(len(body))); err != nil {
		t.Fatalf("body exactly maxBody: %v", err)
	}
	if _, err := record.ParseFrameHeader(frame, uint32(len(body)-1)); !errors.Is(err, record.ErrTooLarge) {
		t.Fatalf("body over maxBody: %v", err)
	}
}

func TestEncryptedFrameAllocatesNothingWithRoom(t *testing.T) {
	aead := testAEAD(t, 9)
	key := &record.SealingKey{ID: 7, AEAD: aead}
	body := bytes.Repeat([]byte{1}, 200)
	dst := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(100, func() {
		dst = record.AppendEncryptedFrame(dst[:0], 1, 2, body, 3, key)
	})
	if allocs != 0 {
		t.Fatalf("AppendEncryptedFrame allocated %v times per call", allocs)
	}
}

// FuzzDecryptFrame: any bytes that parse as an encrypted frame either open
// or fail with a typed error; nothing panics.
func FuzzDecryptFrame(f *testing.F) {
	aead := testAEAD(f, 9)
	f.Add(sealedFrame(f, []byte("seed body"), aead))
	f.Add(sealedFrame(f, nil, aead))
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, _, err := record.ParseFrame(frame, record.DefaultMaxBody)
		if err != nil || !h.Encrypted() {
			return
		}
		_, err = record.AppendDecryptedFrame(nil, frame, h, testKeys{aead})
		if err != nil && !errors.Is(err, record.ErrDecrypt) && !errors.Is(err, record.ErrCorrupt) && !errors.Is(err, record.ErrNoKey) {
			t.Fatalf("untyped error: %v", err)
		}
	})
}
