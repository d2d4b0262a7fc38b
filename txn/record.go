package txn

import (
	"encoding/binary"
	"fmt"
	"math"
)

var le = binary.LittleEndian

// recordVersion is the coordinator record version this binary writes and
// the newest it reads.
const recordVersion = 1

// Kinds of coordinator record. Each is the body of one record of the
// coordinator's segment log: [u8 version][u8 kind][u64 id] then the
// kind's fields, little-endian, strings as u16 length + bytes.
const (
	kindBegin     uint8 = 1 // identity, timeout ms
	kindRecord    uint8 = 2 // index, target, body CRC, body
	kindIntent    uint8 = 3 // floors per target, group commits
	kindCommitted uint8 = 4 // ranges
	kindAborted   uint8 = 5 // reason
)

// Abort reasons, kept in ABORTED records for the operator view.
const (
	ReasonRequested uint8 = 1 // the owner aborted
	ReasonTimeout   uint8 = 2 // the timeout passed
	ReasonRefused   uint8 = 3 // a record of it was refused (a limit)
	ReasonRestart   uint8 = 4 // the broker restarted before its commit began
)

// maxListEntries bounds the floors, group commits and ranges of one
// record: more than a transaction can have (MaxRecordsLimit targets).
const maxListEntries = 1 << 16

// Target is a partition of a stream.
type Target struct {
	Stream    string
	Partition uint32
}

func (t Target) String() string { return fmt.Sprintf("%s/%d", t.Stream, t.Partition) }

// GroupCommit is a streaming group's next offset on one partition,
// committed with a transaction.
type GroupCommit struct {
	Stream    string
	Partition uint32
	Group     string
	Offset    uint64
}

// Range is where a committed transaction's records on one target went:
// Count records from First, in publish order.
type Range struct {
	Target
	First uint64
	Count uint32
}

// Floor is a target's next offset when the commit intent was written:
// every copy of the transaction's records is at or above it.
type Floor struct {
	Target
	Offset uint64
}

// entry is one decoded coordinator record.
type entry struct {
	kind uint8
	id   uint64

	identity  string // begin
	timeoutMs uint32 // begin

	index   uint32 // record
	target  Target // record
	bodyCRC uint32 // record
	body    []byte // record: aliases the input

	floors  []Floor       // intent
	commits []GroupCommit // intent
	ranges  []Range       // committed
	reason  uint8         // aborted
}

func appendHead(dst []byte, kind uint8, id uint64) []byte {
	dst = append(dst, recordVersion, kind)
	return le.AppendUint64(dst, id)
}

func appendString(dst []byte, s string) []byte {
	dst = le.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

func appendTarget(dst []byte, t Target) []byte {
	dst = appendString(dst, t.Stream)
	return le.AppendUint32(dst, t.Partition)
}

func encodeBegin(id uint64, identity string, timeoutMs uint32) []byte {
	dst := appendHead(make([]byte, 0, 16+len(identity)), kindBegin, id)
	dst = appendString(dst, identity[:min(len(identity), math.MaxUint16)])
	return le.AppendUint32(dst, timeoutMs)
}

func encodeRecord(id uint64, index uint32, t Target, bodyCRC uint32, body []byte) []byte {
	dst := appendHead(make([]byte, 0, 32+len(t.Stream)+len(body)), kindRecord, id)
	dst = le.AppendUint32(dst, index)
	dst = appendTarget(dst, t)
	dst = le.AppendUint32(dst, bodyCRC)
	return append(dst, body...)
}

func encodeIntent(id uint64, floors []Floor, commits []GroupCommit) []byte {
	dst := appendHead(nil, kindIntent, id)
	dst = le.AppendUint32(dst, uint32(len(floors)))
	for _, f := range floors {
		dst = appendTarget(dst, f.Target)
		dst = le.AppendUint64(dst, f.Offset)
	}
	dst = le.AppendUint32(dst, uint32(len(commits)))
	for _, c := range commits {
		dst = appendString(dst, c.Stream)
		dst = le.AppendUint32(dst, c.Partition)
		dst = appendString(dst, c.Group)
		dst = le.AppendUint64(dst, c.Offset)
	}
	return dst
}

func encodeCommitted(id uint64, ranges []Range) []byte {
	dst := appendHead(nil, kindCommitted, id)
	dst = le.AppendUint32(dst, uint32(len(ranges)))
	for _, r := range ranges {
		dst = appendTarget(dst, r.Target)
		dst = le.AppendUint64(dst, r.First)
		dst = le.AppendUint32(dst, r.Count)
	}
	return dst
}

func encodeAborted(id uint64, reason uint8) []byte {
	return append(appendHead(nil, kindAborted, id), reason)
}

// decoder reads fields off a record; the first failure sticks.
type decoder struct {
	buf []byte
	err error
}

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.buf) < n {
		d.err = fmt.Errorf("%w: %s: %d bytes left, need %d", ErrMalformed, what, len(d.buf), n)
		return nil
	}
	b := d.buf[:n:n]
	d.buf = d.buf[n:]
	return b
}

func (d *decoder) u8(what string) uint8 {
	if b := d.take(1, what); b != nil {
		return b[0]
	}
	return 0
}

func (d *decoder) u32(what string) uint32 {
	if b := d.take(4, what); b != nil {
		return le.Uint32(b)
	}
	return 0
}

func (d *decoder) u64(what string) uint64 {
	if b := d.take(8, what); b != nil {
		return le.Uint64(b)
	}
	return 0
}

func (d *decoder) str(what string) string {
	b := d.take(2, what)
	if b == nil {
		return ""
	}
	return string(d.take(int(le.Uint16(b)), what))
}

func (d *decoder) target(what string) Target {
	return Target{Stream: d.str(what), Partition: d.u32(what)}
}

// count reads a list length, refusing one the rest of the input cannot
// hold (each entry takes at least minEntry bytes), so a hostile count
// allocates nothing.
func (d *decoder) count(what string, minEntry int) int {
	n := d.u32(what)
	if d.err == nil && (n > maxListEntries || uint64(n)*uint64(minEntry) > uint64(len(d.buf))) {
		d.err = fmt.Errorf("%w: %s: %d entries in %d bytes", ErrMalformed, what, n, len(d.buf))
	}
	if d.err != nil {
		return 0
	}
	return int(n)
}

// decodeEntry decodes one coordinator record. Hostile input gets an error
// wrapping ErrMalformed, never a panic; the body of a RECORD aliases b.
func decodeEntry(b []byte) (entry, error) {
	d := decoder{buf: b}
	if version := d.u8("version"); d.err == nil && version != recordVersion {
		return entry{}, fmt.Errorf("%w: coordinator record version %d (this binary knows %d)", ErrMalformed, version, recordVersion)
	}
	e := entry{kind: d.u8("kind"), id: d.u64("id")}
	switch e.kind {
	case kindBegin:
		e.identity, e.timeoutMs = d.str("identity"), d.u32("timeout")
	case kindRecord:
		e.index, e.target, e.bodyCRC = d.u32("index"), d.target("target"), d.u32("body crc")
		e.body, d.buf = d.buf[:len(d.buf):len(d.buf)], nil
	case kindIntent:
		decodeIntent(&d, &e)
	case kindCommitted:
		n := d.count("ranges", 18)
		for range n {
			e.ranges = append(e.ranges, Range{Target: d.target("range"), First: d.u64("first"), Count: d.u32("count")})
		}
	case kindAborted:
		e.reason = d.u8("reason")
	default:
		if d.err == nil {
			d.err = fmt.Errorf("%w: unknown coordinator record kind %d", ErrMalformed, e.kind)
		}
	}
	if d.err == nil && len(d.buf) > 0 {
		d.err = fmt.Errorf("%w: %d bytes after a kind %d record", ErrMalformed, len(d.buf), e.kind)
	}
	if d.err != nil {
		return entry{}, d.err
	}
	return e, nil
}

func decodeIntent(d *decoder, e *entry) {
	n := d.count("floors", 14)
	for range n {
		e.floors = append(e.floors, Floor{Target: d.target("floor"), Offset: d.u64("floor offset")})
	}
	n = d.count("group commits", 16)
	for range n {
		e.commits = append(e.commits, GroupCommit{Stream: d.str("group stream"), Partition: d.u32("group partition"),
			Group: d.str("group"), Offset: d.u64("group offset")})
	}
}
