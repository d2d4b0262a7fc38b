package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// The replica's state sits beside its log's segments, in files the segment
// package writes and the replica encodes (docs/FORMAT.md):
//
//   - raft-state: two slots of RaftStateSlot bytes. A write goes to the
//     slot the last one did not use and is fdatasynced: one data sync per
//     state change, no metadata, and a torn write leaves the other slot,
//     the state before. A slot is its sequence number (u64), the payload
//     length (u32), a CRC32C of both and the payload, then the payload;
//     the valid slot with the higher sequence holds the state. The file is
//     created whole (temporary file, fsync, rename, directory fsync).
//   - raft-snapshot-<20-digit index>: a snapshot's data, then its CRC32C;
//     written to a temporary file, fsynced, renamed, the directory fsynced.
//
// A writable open deletes a leftover temporary file (its name ends in
// ".prepare", as an interrupted roll's do).
const (
	RaftStateName      = "raft-state"
	RaftStateSlot      = 4096
	raftSlotHeader     = 16
	raftSnapshotPrefix = "raft-snapshot-"
	raftTempName       = "raft-next" + prepareSuffix
)

// ErrRaftState: the replica's state is too large for a slot, or its files
// fail their checks.
var ErrRaftState = errors.New("segment: replica state damaged or too large")

// isRaftStateFile reports whether name is one of the replica's state files.
func isRaftStateFile(name string) bool {
	return name == RaftStateName || strings.HasPrefix(name, raftSnapshotPrefix)
}

func raftSnapshotName(index uint64) string {
	return fmt.Sprintf("%s%0*d", raftSnapshotPrefix, offsetDigits, index)
}

// ReadRaftState returns the state of the log's replica, as WriteState
// last wrote it, or nil when it never wrote one.
func (l *Log) ReadRaftState() ([]byte, error) {
	file, err := l.fs.OpenFile(path.Join(l.path, RaftStateName), vfs.ReadOnly)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opening the replica state of %s: %w", l.id, err)
	}
	defer closeQuietly(file)
	payload, _, err := readRaftSlots(file)
	return payload, err
}

// readRaftSlots returns the payload and sequence of the state file's
// current slot.
func readRaftSlots(file vfs.File) ([]byte, uint64, error) {
	image := make([]byte, 2*RaftStateSlot)
	if n, err := file.ReadAt(image, 0); n < len(image) && err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, fmt.Errorf("reading %s: %w", file.Name(), err)
	}
	var best []byte
	var bestSeq uint64
	for slot := range 2 {
		b := image[slot*RaftStateSlot : (slot+1)*RaftStateSlot]
		seq, length := binary.LittleEndian.Uint64(b[0:8]), binary.LittleEndian.Uint32(b[8:12])
		if seq == 0 || length > RaftStateSlot-raftSlotHeader {
			continue
		}
		payload := b[raftSlotHeader : raftSlotHeader+length]
		if format.UpdateCRC(format.CRC(b[0:12]), payload) != binary.LittleEndian.Uint32(b[12:16]) {
			continue
		}
		if seq > bestSeq {
			best, bestSeq = payload, seq
		}
	}
	if bestSeq == 0 {
		return nil, 0, fmt.Errorf("%w: %s holds no intact slot", ErrRaftState, file.Name())
	}
	return append([]byte(nil), best...), bestSeq, nil
}

// WriteState records the replica's state: durable when it returns. A
// failed write or sync freezes the log; a state larger than a slot is
// refused.
func (r *RaftLog) WriteState(payload []byte) error {
	l := r.log
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.Halted(); err != nil {
		return err
	}
	if len(payload) > RaftStateSlot-raftSlotHeader {
		return fmt.Errorf("%w: a state of %d bytes (a slot holds %d)", ErrRaftState, len(payload), RaftStateSlot-raftSlotHeader)
	}
	if err := r.writeSlot(payload); err != nil {
		return r.freeze(fmt.Errorf("writing the replica state of %s: %w", l.id, err))
	}
	return nil
}

// writeSlot writes payload into the slot after the current one and syncs
// it, creating the file on first use. REQUIRES: the write token held.
func (r *RaftLog) writeSlot(payload []byte) error {
	l := r.log
	if l.raftState == nil {
		if err := r.openStateFile(); err != nil {
			return err
		}
	}
	r.stateSeq++
	if r.slot == nil {
		r.slot = make([]byte, RaftStateSlot)
	}
	slot := r.slot
	clear(slot)
	encodeRaftSlot(slot, r.stateSeq, payload)
	if l.raftState == nil {
		return r.createStateFile(slot)
	}
	if _, err := l.raftState.WriteAt(slot, int64(r.stateSeq%2)*RaftStateSlot); err != nil {
		return err
	}
	return l.raftState.SyncData()
}

func encodeRaftSlot(slot []byte, seq uint64, payload []byte) {
	binary.LittleEndian.PutUint64(slot[0:8], seq)
	binary.LittleEndian.PutUint32(slot[8:12], uint32(len(payload)))
	copy(slot[raftSlotHeader:], payload)
	binary.LittleEndian.PutUint32(slot[12:16], format.UpdateCRC(format.CRC(slot[0:12]), payload))
}

// openStateFile opens an existing state file for writing and learns its
// sequence; without one, l.raftState stays nil. REQUIRES: the write token.
func (r *RaftLog) openStateFile() error {
	l := r.log
	file, err := l.fs.OpenFile(path.Join(l.path, RaftStateName), vfs.ReadWrite)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	_, seq, err := readRaftSlots(file)
	if err != nil {
		closeQuietly(file)
		return err
	}
	l.raftState, r.stateSeq = file, seq
	return nil
}

// createStateFile creates the state file with slot as its current slot
// (the other one empty), whole or not at all. REQUIRES: the write token.
func (r *RaftLog) createStateFile(slot []byte) error {
	l := r.log
	image := make([]byte, 2*RaftStateSlot)
	at := int(r.stateSeq%2) * RaftStateSlot
	copy(image[at:at+RaftStateSlot], slot)
	if err := l.writeRenamed(RaftStateName, image); err != nil {
		return err
	}
	file, err := l.fs.OpenFile(path.Join(l.path, RaftStateName), vfs.ReadWrite)
	if err != nil {
		return err
	}
	l.raftState = file
	return nil
}

// writeRenamed replaces name in the log's directory with image: written
// to the temporary name, fsynced, renamed, the directory fsynced.
func (l *Log) writeRenamed(name string, image []byte) error {
	return vfs.WriteFileAtomicVia(l.fs, path.Join(l.path, name), path.Join(l.path, raftTempName), image)
}

// WriteSnapshotData stores the data of the snapshot at index, durably,
// beside any other snapshot's (RemoveSnapshotData removes those once the
// state names this one). A failure freezes the log.
func (r *RaftLog) WriteSnapshotData(index uint64, data []byte) error {
	l := r.log
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.Halted(); err != nil {
		return err
	}
	image := binary.LittleEndian.AppendUint32(append([]byte(nil), data...), format.CRC(data))
	if err := l.writeRenamed(raftSnapshotName(index), image); err != nil {
		return r.freeze(fmt.Errorf("writing snapshot data of %s: %w", l.id, err))
	}
	return nil
}

// ReadSnapshotData returns the data of the snapshot at index.
func (l *Log) ReadSnapshotData(index uint64) ([]byte, error) {
	file, err := l.fs.OpenFile(path.Join(l.path, raftSnapshotName(index)), vfs.ReadOnly)
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot data of %s at %d: %w", ErrRaftState, l.id, index, err)
	}
	defer closeQuietly(file)
	size, err := file.Size()
	if err != nil {
		return nil, err
	}
	image := make([]byte, size)
	if n, err := file.ReadAt(image, 0); n < len(image) {
		return nil, fmt.Errorf("reading snapshot data of %s: %w", l.id, err)
	}
	if len(image) < 4 || format.CRC(image[:len(image)-4]) != binary.LittleEndian.Uint32(image[len(image)-4:]) {
		return nil, fmt.Errorf("%w: snapshot data of %s at %d fails its checksum", ErrRaftState, l.id, index)
	}
	return image[:len(image)-4], nil
}

// RemoveSnapshotData removes the snapshot data files other than keep's
// (0: all of them), the directory synced after.
func (r *RaftLog) RemoveSnapshotData(keep uint64) error {
	l := r.log
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.Halted(); err != nil {
		return err
	}
	names, err := l.fs.List(l.path)
	if err != nil {
		return err
	}
	removed := false
	for _, name := range names {
		digits, ok := strings.CutPrefix(name, raftSnapshotPrefix)
		if !ok {
			continue
		}
		if index, err := strconv.ParseUint(digits, 10, 64); err == nil && index == keep && keep != 0 {
			continue
		}
		if err := l.fs.Remove(path.Join(l.path, name)); err != nil {
			return r.freeze(err)
		}
		removed = true
	}
	if removed {
		if err := l.fs.SyncDir(l.path); err != nil {
			return r.freeze(err)
		}
	}
	return nil
}
