package replica

import (
	"encoding/binary"
	"fmt"

	"github.com/ironbus/ironbus/segment/format"
)

// The journal state (the payload of segment.RaftLog.WriteState's slots)
// holds the durable State and the point the log starts after; the data of
// the last snapshot installed sits in a file of its own, which the state
// names by its index. Little-endian:
//
//	[0:4]   magic "IBRJ"
//	[4:6]   version (1)
//	[6:8]   flags (zero; unknown bits are refused)
//	[8:40]  term, vote, commit, configuration index (u64 each)
//	        configuration (membership, below)
//	        start: index, term, next offset (u64 each)
//	        start configuration (membership)
//	        snapshot data: the index of the snapshot whose data file holds
//	        it (u64; 0 for none)
//	[n-4:n] CRC32C of every byte before it
//
// A membership is an auto-leave byte (0 or 1) followed by four lists
// (voters, learners, outgoing voters, learners next), each a u32 count and
// that many u64 replica ids.
const (
	stateMagic   = "IBRJ"
	stateVersion = 1
	// stateMaxList bounds a membership list: far more replicas than any
	// group has, small enough that a forged count allocates little.
	stateMaxList = 1 << 10
)

// journalState is what the state holds.
type journalState struct {
	state State
	start Snapshot // Index, Term, Config, NextOffset; its Data is in a file of its own
	// dataIndex names the snapshot data file holding start.Data (0: none).
	dataIndex uint64
}

func appendJournalState(dst []byte, js journalState) []byte {
	start := len(dst)
	dst = append(dst, stateMagic...)
	dst = binary.LittleEndian.AppendUint16(dst, stateVersion)
	dst = binary.LittleEndian.AppendUint16(dst, 0)
	s := js.state
	for _, v := range []uint64{s.Term, uint64(s.Vote), s.Commit, s.ConfigIndex} {
		dst = binary.LittleEndian.AppendUint64(dst, v)
	}
	dst = appendMembership(dst, s.Config)
	for _, v := range []uint64{js.start.Index, js.start.Term, js.start.NextOffset} {
		dst = binary.LittleEndian.AppendUint64(dst, v)
	}
	dst = appendMembership(dst, js.start.Config)
	dst = binary.LittleEndian.AppendUint64(dst, js.dataIndex)
	return binary.LittleEndian.AppendUint32(dst, format.CRC(dst[start:]))
}

func appendMembership(dst []byte, m Membership) []byte {
	leave := byte(0)
	if m.AutoLeave {
		leave = 1
	}
	dst = append(dst, leave)
	for _, list := range [][]ReplicaID{m.Voters, m.Learners, m.VotersOutgoing, m.LearnersNext} {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(list)))
		for _, id := range list {
			dst = binary.LittleEndian.AppendUint64(dst, uint64(id))
		}
	}
	return dst
}

// stateDecoder reads a state file's fields in order, remembering the first
// error.
type stateDecoder struct {
	b   []byte
	err error
}

func (d *stateDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: journal state: "+format, append([]any{ErrDamaged}, args...)...)
	}
}

func (d *stateDecoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.fail("%d bytes wanted, %d left", n, len(d.b))
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *stateDecoder) u64() uint64 {
	if b := d.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (d *stateDecoder) u32() uint32 {
	if b := d.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (d *stateDecoder) membership() Membership {
	var m Membership
	if b := d.take(1); b != nil {
		if b[0] > 1 {
			d.fail("auto-leave byte %d", b[0])
		}
		m.AutoLeave = b[0] == 1
	}
	for _, list := range []*[]ReplicaID{&m.Voters, &m.Learners, &m.VotersOutgoing, &m.LearnersNext} {
		n := d.u32()
		if n > stateMaxList {
			d.fail("membership list of %d", n)
			return m
		}
		for range n {
			id := d.u64()
			if d.err != nil {
				return m
			}
			*list = append(*list, ReplicaID(id))
		}
	}
	return m
}

// decodeJournalState checks and decodes a state file. Every failure wraps
// ErrDamaged: a replica whose vote cannot be read must not vote.
func decodeJournalState(b []byte) (journalState, error) {
	d := &stateDecoder{b: b}
	if len(b) < 12 {
		d.fail("%d bytes", len(b))
		return journalState{}, d.err
	}
	if got, want := binary.LittleEndian.Uint32(b[len(b)-4:]), format.CRC(b[:len(b)-4]); got != want {
		d.fail("checksum %08x, computed %08x", got, want)
		return journalState{}, d.err
	}
	d.b = b[:len(b)-4]
	if string(d.take(4)) != stateMagic {
		d.fail("magic %q", b[:4])
		return journalState{}, d.err
	}
	if version := binary.LittleEndian.Uint16(d.take(2)); version != stateVersion {
		d.fail("version %d (this binary knows %d)", version, stateVersion)
		return journalState{}, d.err
	}
	if flags := binary.LittleEndian.Uint16(d.take(2)); flags != 0 {
		d.fail("unknown flags %#x", flags)
		return journalState{}, d.err
	}
	var js journalState
	js.state.Term, js.state.Vote, js.state.Commit, js.state.ConfigIndex = d.u64(), ReplicaID(d.u64()), d.u64(), d.u64()
	js.state.Config = d.membership()
	js.start.Index, js.start.Term, js.start.NextOffset = d.u64(), d.u64(), d.u64()
	js.start.Config = d.membership()
	js.dataIndex = d.u64()
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d bytes after the fields", len(d.b))
	}
	return js, d.err
}
