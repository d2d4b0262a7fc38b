package txn

import (
	"bytes"
	"testing"
)

// FuzzDecodeEntry feeds the coordinator record decoder hostile input: it
// never panics, and what it accepts encodes back to the same bytes.
func FuzzDecodeEntry(f *testing.F) {
	f.Add(encodeBegin(0, "alice", 60000))
	f.Add(encodeRecord(9, 2, targetA, 77, []byte("body")))
	f.Add(encodeIntent(9, []Floor{{Target: targetB, Offset: 5}}, []GroupCommit{{Stream: "in", Partition: 1, Group: "g", Offset: 3}}))
	f.Add(encodeCommitted(9, []Range{{Target: targetA, First: 4, Count: 2}}))
	f.Add(encodeAborted(9, ReasonTimeout))
	f.Add([]byte{1, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeEntry(b)
		if err != nil {
			return
		}
		var again []byte
		switch e.kind {
		case kindBegin:
			again = encodeBegin(e.id, e.identity, e.timeoutMs)
		case kindRecord:
			again = encodeRecord(e.id, e.index, e.target, e.bodyCRC, e.body)
		case kindIntent:
			again = encodeIntent(e.id, e.floors, e.commits)
		case kindCommitted:
			again = encodeCommitted(e.id, e.ranges)
		case kindAborted:
			again = encodeAborted(e.id, e.reason)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("decoded %+v re-encodes to %x, input %x", e, again, b)
		}
	})
}

// FuzzReference: a reference header value that parses names what was
// written.
func FuzzReference(f *testing.F) {
	f.Add([]byte("12:3"))
	f.Add([]byte(":"))
	f.Fuzz(func(t *testing.T, value []byte) {
		id, index, ok := parseReference(value)
		if ok && string(appendReference(nil, id, index)) != string(value) && !bytes.ContainsAny(value, "+0") {
			t.Fatalf("%q parsed as %d:%d", value, id, index)
		}
	})
}
