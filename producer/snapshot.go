package producer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/ironbus/ironbus/segment/format"
)

// A snapshot is a table as bytes, with the log offset it covers: every
// record below covers_up_to is in it, none at or above. Little-endian:
//
//	header  magic "IBPT" @0 · version u16 (1) @4 · reserved u16 @6 ·
//	        covers_up_to u64 @8 · drop mark u64 @16 · producers u32 @24
//	state   id u64 · next u64 · idle milliseconds u64 · batches u8 ·
//	        batches × (first sequence u64 · count u32 · first offset u64)
//	trailer CRC32C of everything before it u32
//
// States are listed from the one that appended last to the one idle
// longest, batches from oldest to newest. Idle ages rather than instants
// are stored, so the clock may restart from zero with the broker.
const (
	snapshotMagic   = "IBPT"
	snapshotVersion = 1
	snapshotHeader  = 28
	snapshotState   = 8 + 8 + 8 + 1
	snapshotBatch   = 8 + 4 + 8
)

// ErrSnapshot reports a snapshot that fails its checks: its owner
// ignores it and replays more of the log.
var ErrSnapshot = errors.New("producer: snapshot is damaged or unreadable")

// Encode returns the table's snapshot, covering the log up to coversUpTo
// (exclusive). The caller chooses coversUpTo: at least Through, at most
// the log's durable end, with no record between Through and it that the
// table should have seen.
func (t *Table) Encode(coversUpTo uint64) []byte {
	now := t.opts.Clock()
	size := snapshotHeader + 4
	for s := t.head; s != nil; s = s.older {
		size += snapshotState + snapshotBatch*s.batches()
	}
	out := make([]byte, snapshotHeader, size)
	copy(out, snapshotMagic)
	binary.LittleEndian.PutUint16(out[4:], snapshotVersion)
	binary.LittleEndian.PutUint64(out[8:], coversUpTo)
	binary.LittleEndian.PutUint64(out[16:], t.dropMark)
	binary.LittleEndian.PutUint32(out[24:], uint32(len(t.states)))
	for s := t.head; s != nil; s = s.older {
		out = binary.LittleEndian.AppendUint64(out, s.id)
		out = binary.LittleEndian.AppendUint64(out, s.next)
		out = binary.LittleEndian.AppendUint64(out, uint64(max(now-s.lastActive, 0)/time.Millisecond))
		out = append(out, byte(s.batches()))
		for i := range len(s.ring) {
			b := s.ring[(s.newest+1+i)%len(s.ring)]
			if b.count == 0 {
				continue
			}
			out = binary.LittleEndian.AppendUint64(out, b.firstSeq)
			out = binary.LittleEndian.AppendUint32(out, b.count)
			out = binary.LittleEndian.AppendUint64(out, b.firstOffset)
		}
	}
	return binary.LittleEndian.AppendUint32(out, format.CRC(out))
}

func (s *state) batches() int {
	n := 0
	for i := range s.ring {
		if s.ring[i].count > 0 {
			n++
		}
	}
	return n
}

// DecodeTable rebuilds a table from a snapshot and returns the offset it
// covers; the caller then replays the log's records from there through
// Record. A damaged or inconsistent snapshot is ErrSnapshot. A snapshot
// holding more producers than opts allows keeps the most recent ones, and
// more batches than the ring holds keeps the newest; either way nothing
// is invented, and dropped producers answer ErrExpired.
func DecodeTable(generations Generations, opts TableOptions, data []byte) (*Table, uint64, error) {
	if len(data) < snapshotHeader+4 || string(data[:4]) != snapshotMagic {
		return nil, 0, fmt.Errorf("%w: bad magic or size %d", ErrSnapshot, len(data))
	}
	body := data[:len(data)-4]
	if format.CRC(body) != binary.LittleEndian.Uint32(data[len(body):]) {
		return nil, 0, fmt.Errorf("%w: checksum mismatch", ErrSnapshot)
	}
	if version := binary.LittleEndian.Uint16(body[4:]); version != snapshotVersion {
		return nil, 0, fmt.Errorf("%w: version %d (this binary knows %d)", ErrSnapshot, version, snapshotVersion)
	}
	t := NewTable(generations, opts)
	covers := binary.LittleEndian.Uint64(body[8:])
	t.dropMark = binary.LittleEndian.Uint64(body[16:])
	count := binary.LittleEndian.Uint32(body[24:])
	now := t.opts.Clock()
	at := snapshotHeader
	for range count {
		s, next, err := decodeState(body, at, t.opts.RingBatches)
		if err != nil {
			return nil, 0, err
		}
		at = next
		if _, dup := t.states[s.id]; dup {
			return nil, 0, fmt.Errorf("%w: producer %d listed twice", ErrSnapshot, s.id)
		}
		if len(t.states) >= t.opts.MaxProducers {
			t.MarkGap()
			t.noteDrop(s.id)
			t.evicted.Add(1)
			continue
		}
		idle := s.lastActive
		s.lastActive = now - idle
		t.states[s.id] = s
		t.appendOldest(s)
		t.through = max(t.through, s.through())
	}
	if at != len(body) {
		return nil, 0, fmt.Errorf("%w: %d bytes after the last producer", ErrSnapshot, len(body)-at)
	}
	if t.through > covers {
		return nil, 0, fmt.Errorf("%w: a batch reaches offset %d, beyond covers_up_to %d", ErrSnapshot, t.through-1, covers)
	}
	t.producers.Store(int64(len(t.states)))
	return t, covers, nil
}

// decodeState reads the state at body[at:]; its lastActive holds the
// idle age until the caller converts it.
func decodeState(body []byte, at, ringBatches int) (*state, int, error) {
	if len(body)-at < snapshotState {
		return nil, 0, fmt.Errorf("%w: truncated producer at byte %d", ErrSnapshot, at)
	}
	s := &state{id: binary.LittleEndian.Uint64(body[at:]), next: binary.LittleEndian.Uint64(body[at+8:]),
		ring: make([]batch, ringBatches)}
	idle := binary.LittleEndian.Uint64(body[at+16:])
	if idle > uint64(1<<62)/uint64(time.Millisecond) {
		return nil, 0, fmt.Errorf("%w: producer %d idle for %d ms", ErrSnapshot, s.id, idle)
	}
	s.lastActive = time.Duration(idle) * time.Millisecond
	batches := int(body[at+24])
	at += snapshotState
	if len(body)-at < batches*snapshotBatch {
		return nil, 0, fmt.Errorf("%w: truncated batches of producer %d", ErrSnapshot, s.id)
	}
	var previous batch
	for i := range batches {
		b := batch{firstSeq: binary.LittleEndian.Uint64(body[at:]), count: binary.LittleEndian.Uint32(body[at+8:]),
			firstOffset: binary.LittleEndian.Uint64(body[at+12:])}
		at += snapshotBatch
		end := b.firstSeq + uint64(b.count)
		switch {
		case b.count == 0 || end < b.firstSeq || end > s.next || b.firstOffset+uint64(b.count) < b.firstOffset:
			return nil, 0, fmt.Errorf("%w: producer %d has a batch outside its sequences", ErrSnapshot, s.id)
		case i > 0 && (b.firstSeq < previous.firstSeq+uint64(previous.count) || b.firstOffset < previous.firstOffset+uint64(previous.count)):
			return nil, 0, fmt.Errorf("%w: producer %d has batches out of order", ErrSnapshot, s.id)
		}
		previous = b
		// The ring keeps the newest ringBatches: older ones are
		// overwritten, as they would have been while appending.
		if i > 0 {
			s.newest = (s.newest + 1) % ringBatches
		}
		s.ring[s.newest] = b
	}
	return s, at, nil
}

// through returns one past the highest offset in s's ring.
func (s *state) through() uint64 {
	if b := s.ring[s.newest]; b.count > 0 {
		return b.firstOffset + uint64(b.count)
	}
	return 0
}

// appendOldest links s at the idle end of the recency list.
func (t *Table) appendOldest(s *state) {
	s.newer, s.older = t.tail, nil
	if t.tail != nil {
		t.tail.older = s
	}
	t.tail = s
	if t.head == nil {
		t.head = s
	}
}
