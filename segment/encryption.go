package segment

import (
	"crypto/cipher"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// Encryption at rest. A log of a directory opened with Options.Encryption
// seals each record body it stages (record.AppendEncryptedFrame) under a
// sealing key drawn when it starts writing: the frame walkers (recovery,
// the reader's header checks, the commit frame's batch CRC) see an
// ordinary frame whose body is the envelope. Readers open encrypted frames
// into plain ones on the way out, so consumers, filters and tools see what
// an unencrypted log holds; a log without Encryption hands out stored
// frames untouched (zero copy).
//
// The directory's FORMAT file names the keys its records may be sealed
// under (id and check value) and carries version EncryptedDataFormatVersion,
// so a binary that predates encryption refuses the directory as too new
// instead of reading envelopes as bodies.

// Encryption is the key ring a data directory is sealed with (package
// keyring's Ring implements it).
type Encryption interface {
	record.OpeningKeys
	// SealingKey derives a sealing key under the active key with a new
	// random salt.
	SealingKey() (*record.SealingKey, error)
	// KeyIDs lists the ring's key ids; KeyCheck returns one's check value.
	KeyIDs() []uint32
	KeyCheck(id uint32) (string, bool)
}

// EncryptedDataFormatVersion is the FORMAT version of a directory that
// holds (or may hold) encrypted records.
const EncryptedDataFormatVersion = 2

var (
	// ErrKeyRequired means the directory is encrypted and no key ring was
	// given.
	ErrKeyRequired = errors.New("segment: the data directory is encrypted and no key ring was given")
	// ErrWrongKey means the key ring given lacks a key the directory was
	// written with, or holds a different key under its id.
	ErrWrongKey = errors.New("segment: the key ring does not hold the keys this data directory was written with")
)

// formatEncryption is FORMAT's "encryption" section: the check value of
// every key id records may be sealed under.
type formatEncryption struct {
	Keys map[string]string `json:"keys"`
}

// checkEncryption compares the directory's key checks with the options'
// ring: a ring must hold every key the directory names, unchanged. A
// read-only open without a ring is allowed (its frames check as stored;
// an encrypted record read fails with record.ErrNoKey); a writer needs
// the ring.
func (d *Dir) checkEncryption(f formatFile) error {
	dir, enc := d.path, d.opts.Encryption
	if f.Encryption != nil {
		d.keyIDs = formatKeyIDs(f.Encryption)
	}
	if enc == nil && d.opts.ReadOnly {
		return nil
	}
	return checkKeys(dir, f, enc)
}

func checkKeys(dir string, f formatFile, enc Encryption) error {
	if f.Encryption == nil {
		if f.Version >= EncryptedDataFormatVersion {
			return fmt.Errorf("%w: %s/%s is version %d without an encryption section", ErrInconsistent, dir, formatFileName, f.Version)
		}
		return nil
	}
	if enc == nil {
		return fmt.Errorf("%w: %s holds records sealed under key ids %v", ErrKeyRequired, dir, formatKeyIDs(f.Encryption))
	}
	for id, want := range f.Encryption.Keys {
		number, err := strconv.ParseUint(id, 10, 32)
		if err != nil {
			return fmt.Errorf("%w: %s/%s names key %q", ErrInconsistent, dir, formatFileName, id)
		}
		got, ok := enc.KeyCheck(uint32(number))
		if !ok {
			return fmt.Errorf("%w: the ring has no key %d", ErrWrongKey, number)
		}
		if got != want {
			return fmt.Errorf("%w: the ring's key %d is not the key %s was written with", ErrWrongKey, number, dir)
		}
	}
	return nil
}

// CheckKeyRing tells whether enc is the key ring the data directory at dir
// was written with (ErrWrongKey if not), without opening or locking
// anything: what backup, restore and scrub check before copying bytes
// they do not decrypt. A directory without encryption passes.
func CheckKeyRing(fsys vfs.FS, dir string, enc Encryption) error {
	data, err := vfs.ReadFile(fsys, path.Join(dir, formatFileName))
	if err != nil {
		return err
	}
	var f formatFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("%w: %s/%s is unreadable", ErrInconsistent, dir, formatFileName)
	}
	if f.Encryption == nil {
		return nil
	}
	return checkKeys(dir, f, enc)
}

// EncryptionKeyIDs returns the ids of the keys the directory's FORMAT
// says its records may be sealed under; none for a directory without
// encryption.
func (d *Dir) EncryptionKeyIDs() []uint32 { return slices.Clone(d.keyIDs) }

// KeyIDs returns the ids of the keys the log's committed records are
// sealed under, read from each envelope without decrypting (so it needs
// no ring): what `verify` lists, and what tells when an old key is no
// longer used.
func (l *Log) KeyIDs() ([]uint32, error) {
	r := l.NewReader(l.FirstOffset())
	defer r.Close()
	r.raw = true
	var ids []uint32
	for {
		run, err := r.NextRun(1<<16, 4<<20)
		if errors.Is(err, io.EOF) {
			slices.Sort(ids)
			return ids, nil
		}
		if err != nil {
			return ids, err
		}
		ids = appendKeyIDs(ids, run.Frames)
		run.Release()
	}
}

// OpenEvery reads every committed record of the log through a reader,
// so each encrypted one is opened: its envelope CRC, its GCM tag under the
// ring and its producer's CRC are checked (what `verify` with a ring adds).
// Without a ring it checks nothing and returns nil.
func (l *Log) OpenEvery() error {
	if l.opts.Encryption == nil {
		return nil
	}
	r := l.NewReader(l.FirstOffset())
	defer r.Close()
	for {
		if _, err := r.Next(); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// appendKeyIDs adds to ids the key id of every encrypted record frame of
// frames it does not hold yet.
func appendKeyIDs(ids []uint32, frames []byte) []uint32 {
	for len(frames) >= format.FramePrefixSize {
		n, err := record.OtherFrameLength(frames)
		if err != nil {
			return ids
		}
		if record.IsEncryptedFrame(frames) && n >= record.FrameHeaderSize+4 {
			if id, _, err := record.EnvelopeKey(frames[record.FrameHeaderSize:n]); err == nil && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		frames = frames[n:]
	}
	return ids
}

func formatKeyIDs(e *formatEncryption) []uint32 {
	ids := make([]uint32, 0, len(e.Keys))
	for id := range e.Keys {
		if number, err := strconv.ParseUint(id, 10, 32); err == nil {
			ids = append(ids, uint32(number))
		}
	}
	slices.Sort(ids)
	return ids
}

// recordEncryption makes FORMAT name every key of the ring before a log
// opens for writing: the directory is refused to a ring that lacks one of
// them from then on. Written crash-safely; nothing when it already does.
func (d *Dir) recordEncryption() error {
	enc := d.opts.Encryption
	if enc == nil {
		return nil
	}
	data, err := vfs.ReadFile(d.fs, path.Join(d.path, formatFileName))
	if err != nil {
		return err
	}
	var f formatFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("%w: %s/%s is unreadable", ErrInconsistent, d.path, formatFileName)
	}
	section := formatEncryption{Keys: map[string]string{}}
	if f.Encryption != nil {
		for id, check := range f.Encryption.Keys {
			section.Keys[id] = check
		}
	}
	changed := f.Encryption == nil
	for _, id := range enc.KeyIDs() {
		name := strconv.FormatUint(uint64(id), 10)
		if _, ok := section.Keys[name]; !ok {
			section.Keys[name], _ = enc.KeyCheck(id)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	data, _ = json.Marshal(formatFile{Format: "ironbus-data", Version: EncryptedDataFormatVersion, Encryption: &section})
	if err := vfs.WriteFileAtomic(d.fs, path.Join(d.path, formatFileName), append(data, '\n')); err != nil {
		return fmt.Errorf("writing %s: %w", formatFileName, err)
	}
	d.keyIDs = formatKeyIDs(&section)
	return nil
}

// sealingKeyLocked returns the log's sealing key, drawing one the first
// time the log stages a record. REQUIRES: l.mu held.
func (l *Log) sealingKeyLocked() (*record.SealingKey, error) {
	if l.mu.sealing == nil {
		key, err := l.opts.Encryption.SealingKey()
		if err != nil {
			return nil, err
		}
		l.mu.sealing = key
	}
	return l.mu.sealing, nil
}

// openFrame returns the plain frame of an encrypted frame whose envelope
// verified, decrypted into the reader's buffer (valid until the next
// call).
func (r *Reader) openFrame(frame []byte, h record.FrameHeader) ([]byte, error) {
	var err error
	r.plain, err = record.AppendDecryptedFrame(r.plain[:0], frame, h, r.keys())
	if err != nil {
		return nil, fmt.Errorf("%w: %s offset %d: %w", ErrCorruptRead, r.seg.name, h.Offset, err)
	}
	return r.plain, nil
}

// openRun replaces a run holding encrypted frames by one of plain frames
// in a buffer the run owns; a run without any is returned as it is.
// Commit frames are dropped on the way (a consumer skips them anyway).
// Each envelope's CRC is checked before it is decrypted.
func (r *Reader) openRun(run Run) (Run, error) {
	if run.Count == 0 || !runHasEncrypted(run.Frames) {
		return run, nil
	}
	buffer := r.log.getRunBuffer()
	out, err := r.appendOpened((*buffer)[:0], run.Frames)
	*buffer = out
	run.Release()
	if err != nil {
		r.log.putRunBuffer(buffer)
		return Run{}, err
	}
	run.Frames, run.buffer, run.log = out, buffer, r.log
	return run, nil
}

// appendOpened appends the record frames of frames to dst, encrypted
// ones opened.
func (r *Reader) appendOpened(dst, frames []byte) ([]byte, error) {
	for len(frames) >= format.FramePrefixSize {
		if format.PeekKind(frames) != format.KindRecord {
			n, err := record.OtherFrameLength(frames)
			if err != nil {
				return dst, fmt.Errorf("%w: %s: %w", ErrCorruptRead, r.seg.name, err)
			}
			frames = frames[n:]
			continue
		}
		h, err := record.ParseFrameHeader(frames, r.log.opts.MaxRecordBytes)
		if err == nil && h.Encrypted() {
			if _, err = record.VerifyFrame(frames, h); err == nil {
				dst, err = record.AppendDecryptedFrame(dst, frames, h, r.keys())
			}
		} else if err == nil {
			dst = append(dst, frames[:h.FrameLength]...)
		}
		if err != nil {
			return dst, fmt.Errorf("%w: %s offset %d: %w", ErrCorruptRead, r.seg.name, h.Offset, err)
		}
		frames = frames[h.FrameLength:]
	}
	return dst, nil
}

// runHasEncrypted reports whether any record frame of frames is encrypted.
func runHasEncrypted(frames []byte) bool {
	for len(frames) >= format.FramePrefixSize {
		if record.IsEncryptedFrame(frames) {
			return true
		}
		n, err := record.OtherFrameLength(frames)
		if err != nil {
			return false
		}
		frames = frames[n:]
	}
	return false
}

// opening reports whether the reader opens encrypted frames on the way
// out: on a directory with encryption (a read-only one opened without a
// ring included, where opening fails with record.ErrNoKey), unless raw.
func (r *Reader) opening() bool {
	return !r.raw && (r.log.opts.Encryption != nil || len(r.log.dir.keyIDs) > 0)
}

// summarised reports whether a filtered reader may skip by the subject
// summary: not on an encrypted log, whose summary was built from
// envelopes, not subjects.
func (r *Reader) summarised() bool {
	return r.filter != nil && r.log.opts.Encryption == nil && len(r.log.dir.keyIDs) == 0
}

// nextOpenedRun is NextRun for a filtered reader of an encrypted log: the
// filter needs each record's subject, so records are opened one by one
// (Next) and each goes out as a run of one.
func (r *Reader) nextOpenedRun() (Run, error) {
	entry, err := r.Next()
	if err != nil || entry.Gap != nil {
		return Run{Gap: entry.Gap}, err
	}
	buffer := r.log.getRunBuffer()
	*buffer = append((*buffer)[:0], entry.Frame...)
	return Run{First: entry.Offset, Next: entry.Offset + 1, Count: 1, Frames: *buffer, buffer: buffer, log: r.log}, nil
}

// opener keeps the AEAD of the last (key id, salt) a reader opened: a
// log's records share one until a writer restarts, so the ring's lookup
// (a lock and a map) is paid once per writer, not per record.
type opener struct {
	ring Encryption
	id   uint32
	salt [record.SaltSize]byte
	aead cipher.AEAD
}

// OpeningKey is record.OpeningKeys.
func (o *opener) OpeningKey(id uint32, salt [record.SaltSize]byte) (cipher.AEAD, error) {
	if o.aead != nil && o.id == id && o.salt == salt {
		return o.aead, nil
	}
	aead, err := o.ring.OpeningKey(id, salt)
	if err != nil {
		return nil, err
	}
	o.id, o.salt, o.aead = id, salt, aead
	return aead, nil
}

// keys is what the reader opens records with: nil without a ring (an
// encrypted record then fails with record.ErrNoKey).
func (r *Reader) keys() record.OpeningKeys {
	if r.log.opts.Encryption == nil {
		return nil
	}
	r.opener.ring = r.log.opts.Encryption
	return &r.opener
}
