package keyring

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/security"
)

// Sentinel errors.
var (
	// ErrMalformed means a ring file does not parse or breaks a rule.
	ErrMalformed = errors.New("keyring: malformed key ring file")
	// ErrExists means key create was asked to overwrite a file.
	ErrExists = errors.New("keyring: file already exists")
	// ErrUnknownKey means a record names a key id the ring does not hold.
	ErrUnknownKey = errors.New("keyring: no such key id in the ring")
)

const (
	fileFormat  = "ironbus-keyring"
	fileVersion = 1
	keySize     = 32
	// maxOpeningKeys bounds the cache of derived opening keys: one per
	// (key id, salt) a reader meets, and a log changes salt only when a
	// writer reopens it.
	maxOpeningKeys = 256
	deriveLabel    = "ironbus record key v1"
	checkLabel     = "ironbus key check v1"
)

// Key is one master key of a ring.
type Key struct {
	ID      uint32
	Created time.Time
	secret  [keySize]byte
}

// Check returns the key's check value: it identifies the key and says
// nothing about it.
func (k Key) Check() string {
	mac := hmac.New(sha256.New, k.secret[:])
	mac.Write([]byte(checkLabel))
	return hex.EncodeToString(mac.Sum(nil)[:16])
}

// Ring is a loaded key ring. It is safe for concurrent use.
type Ring struct {
	keys   []Key // by id, ascending; the last is active
	opened struct {
		sync.Mutex
		aeads map[openingID]cipher.AEAD
	}
}

type openingID struct {
	id   uint32
	salt [record.SaltSize]byte
}

type fileKey struct {
	ID      uint32    `json:"id"`
	Created time.Time `json:"created"`
	Key     string    `json:"key"`
}

type ringFile struct {
	Format  string    `json:"format"`
	Version int       `json:"version"`
	Active  uint32    `json:"active"`
	Keys    []fileKey `json:"keys"`
}

// Create writes a new ring with one key (id 1) to path, mode 0600. It
// refuses to overwrite an existing file: that would lose the keys of the
// data written under it.
func Create(path string, now time.Time) (*Ring, error) {
	if _, err := os.Lstat(path); err == nil {
		return nil, fmt.Errorf("%w: %s; rotate it with `ironbus key rotate %s` instead", ErrExists, path, path)
	}
	ring := newRing(nil)
	if err := ring.add(now); err != nil {
		return nil, err
	}
	return ring, ring.write(path)
}

// New returns a ring of one new key (id 1) held only in memory: tests and
// tools that write the file themselves use it.
func New(now time.Time) (*Ring, error) {
	ring := newRing(nil)
	if err := ring.add(now); err != nil {
		return nil, err
	}
	return ring, nil
}

// Load reads the ring at path, refusing a file group or others may read.
func Load(path string) (*Ring, error) {
	data, err := security.ReadSecretFile(path)
	if err != nil {
		return nil, err
	}
	var file ringFile
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrMalformed, path, err)
	}
	if file.Format != fileFormat || file.Version < 1 || file.Version > fileVersion {
		return nil, fmt.Errorf("%w: %s: format %q version %d (this binary reads %q version %d)",
			ErrMalformed, path, file.Format, file.Version, fileFormat, fileVersion)
	}
	keys := make([]Key, 0, len(file.Keys))
	for i, fk := range file.Keys {
		secret, err := base64.StdEncoding.DecodeString(fk.Key)
		if err != nil || len(secret) != keySize {
			return nil, fmt.Errorf("%w: %s: key %d is not %d base64 bytes", ErrMalformed, path, fk.ID, keySize)
		}
		if fk.ID != uint32(i+1) {
			return nil, fmt.Errorf("%w: %s: key ids must run 1, 2, 3, … (found %d at position %d)", ErrMalformed, path, fk.ID, i+1)
		}
		keys = append(keys, Key{ID: fk.ID, Created: fk.Created, secret: [keySize]byte(secret)})
	}
	if len(keys) == 0 || file.Active != keys[len(keys)-1].ID {
		return nil, fmt.Errorf("%w: %s: the active key must be the newest", ErrMalformed, path)
	}
	return newRing(keys), nil
}

// Rotate loads the ring at path, adds a new active key and writes the
// ring back crash-safely. The older keys stay, for reading.
func Rotate(path string, now time.Time) (*Ring, error) {
	ring, err := Load(path)
	if err != nil {
		return nil, err
	}
	if err := ring.add(now); err != nil {
		return nil, err
	}
	return ring, ring.write(path)
}

func newRing(keys []Key) *Ring {
	ring := &Ring{keys: keys}
	ring.opened.aeads = map[openingID]cipher.AEAD{}
	return ring
}

func (r *Ring) add(now time.Time) error {
	key := Key{ID: uint32(len(r.keys) + 1), Created: now.UTC().Truncate(time.Second)}
	if _, err := rand.Read(key.secret[:]); err != nil {
		return fmt.Errorf("keyring: drawing a key: %w", err)
	}
	r.keys = append(r.keys, key)
	return nil
}

func (r *Ring) write(path string) error {
	file := ringFile{Format: fileFormat, Version: fileVersion, Active: r.Active().ID}
	for _, key := range r.keys {
		file.Keys = append(file.Keys, fileKey{ID: key.ID, Created: key.Created, Key: base64.StdEncoding.EncodeToString(key.secret[:])})
	}
	data, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		return fmt.Errorf("keyring: %w", err)
	}
	return security.WriteFileAtomic(path, append(data, '\n'))
}

// Keys returns the ring's keys, oldest first.
func (r *Ring) Keys() []Key { return slices.Clone(r.keys) }

// Active returns the key new records are sealed under.
func (r *Ring) Active() Key { return r.keys[len(r.keys)-1] }

// Key returns the key with id.
func (r *Ring) Key(id uint32) (Key, bool) {
	if id == 0 || int(id) > len(r.keys) {
		return Key{}, false
	}
	return r.keys[id-1], true
}

// KeyCheck returns the check value of key id (see Key.Check).
func (r *Ring) KeyCheck(id uint32) (string, bool) {
	key, ok := r.Key(id)
	if !ok {
		return "", false
	}
	return key.Check(), true
}

// KeyIDs returns the ids of the ring's keys, oldest first.
func (r *Ring) KeyIDs() []uint32 {
	ids := make([]uint32, len(r.keys))
	for i, key := range r.keys {
		ids[i] = key.ID
	}
	return ids
}

// SealingKey derives a new sealing key under the active key with a fresh
// random salt. A writer calls it each time it starts writing a log.
func (r *Ring) SealingKey() (*record.SealingKey, error) {
	active := r.Active()
	sealing := &record.SealingKey{ID: active.ID}
	if _, err := rand.Read(sealing.Salt[:]); err != nil {
		return nil, fmt.Errorf("keyring: drawing a salt: %w", err)
	}
	aead, err := derive(active, sealing.Salt)
	if err != nil {
		return nil, err
	}
	sealing.AEAD = aead
	return sealing, nil
}

// OpeningKey returns the AEAD that opens records sealed under key id with
// salt (record.OpeningKeys). Derived keys are cached.
func (r *Ring) OpeningKey(id uint32, salt [record.SaltSize]byte) (cipher.AEAD, error) {
	want := openingID{id: id, salt: salt}
	r.opened.Lock()
	defer r.opened.Unlock()
	if aead, ok := r.opened.aeads[want]; ok {
		return aead, nil
	}
	key, ok := r.Key(id)
	if !ok {
		return nil, fmt.Errorf("%w: %w: key %d (the ring holds 1 to %d)", record.ErrNoKey, ErrUnknownKey, id, len(r.keys))
	}
	aead, err := derive(key, salt)
	if err != nil {
		return nil, err
	}
	if len(r.opened.aeads) >= maxOpeningKeys {
		clear(r.opened.aeads)
	}
	r.opened.aeads[want] = aead
	return aead, nil
}

// derive returns the AES-256-GCM AEAD of key under salt.
func derive(key Key, salt [record.SaltSize]byte) (cipher.AEAD, error) {
	secret, err := hkdf.Key(sha256.New, key.secret[:], salt[:], deriveLabel, keySize)
	if err != nil {
		return nil, fmt.Errorf("keyring: deriving: %w", err)
	}
	block, err := aes.NewCipher(secret)
	if err != nil {
		return nil, fmt.Errorf("keyring: %w", err)
	}
	return cipher.NewGCM(block)
}
