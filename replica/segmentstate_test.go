package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/ironbus/ironbus/segment/format"
)

var exampleJournalState = journalState{
	state: State{Term: 7, Vote: NewReplicaID(2, 5), Commit: 99, ConfigIndex: 40,
		Config: Membership{Voters: []ReplicaID{NewReplicaID(1, 1), NewReplicaID(2, 5)}, Learners: []ReplicaID{NewReplicaID(3, 2)},
			VotersOutgoing: []ReplicaID{NewReplicaID(1, 1)}, LearnersNext: []ReplicaID{NewReplicaID(4, 4)}, AutoLeave: true}},
	start:     Snapshot{Index: 50, Term: 6, NextOffset: 12345, Config: Membership{Voters: []ReplicaID{NewReplicaID(1, 1)}}},
	dataIndex: 44,
}

func TestJournalStateRoundTrip(t *testing.T) {
	for _, js := range []journalState{{}, exampleJournalState} {
		image := appendJournalState(nil, js)
		got, err := decodeJournalState(image)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if fmt.Sprint(got) != fmt.Sprint(js) {
			t.Fatalf("decoded %+v, want %+v", got, js)
		}
	}
}

func TestJournalStateRejects(t *testing.T) {
	image := appendJournalState(nil, exampleJournalState)
	for n := range len(image) {
		if _, err := decodeJournalState(image[:n]); !errors.Is(err, ErrDamaged) {
			t.Fatalf("prefix of %d bytes: %v, want ErrDamaged", n, err)
		}
	}
	reseal := func(b []byte) {
		binary.LittleEndian.PutUint32(b[len(b)-4:], format.CRC(b[:len(b)-4]))
	}
	for _, edit := range []struct {
		name string
		edit func([]byte)
	}{
		{"bit flip", func(b []byte) { b[20] ^= 1 }},
		{"magic", func(b []byte) { b[0] = 'X'; reseal(b) }},
		{"version", func(b []byte) { b[4] = 2; reseal(b) }},
		{"flags", func(b []byte) { b[6] = 1; reseal(b) }},
		{"auto-leave", func(b []byte) { b[40] = 2; reseal(b) }},
		{"huge list", func(b []byte) { binary.LittleEndian.PutUint32(b[41:], 1<<20); reseal(b) }},
	} {
		b := bytes.Clone(image)
		edit.edit(b)
		if _, err := decodeJournalState(b); !errors.Is(err, ErrDamaged) {
			t.Fatalf("%s: %v, want ErrDamaged", edit.name, err)
		}
	}
	trailing := append(bytes.Clone(image[:len(image)-4]), 0)
	trailing = binary.LittleEndian.AppendUint32(trailing, format.CRC(trailing))
	if _, err := decodeJournalState(trailing); !errors.Is(err, ErrDamaged) {
		t.Fatalf("a byte after the fields: %v", err)
	}
}

// FuzzDecodeJournalState: the state decoder never panics, fails only with
// ErrDamaged, and what it accepts re-encodes to the same bytes. With
// repair set the checksum is recomputed, so the fuzzer reaches the checks
// behind it.
func FuzzDecodeJournalState(f *testing.F) {
	f.Add(appendJournalState(nil, exampleJournalState), false)
	f.Add(appendJournalState(nil, journalState{}), false)
	f.Add(appendJournalState(nil, exampleJournalState)[:30], true)
	f.Add([]byte("IBRJ\x01\x00\x00\x00"), true)
	f.Fuzz(func(t *testing.T, input []byte, repair bool) {
		data := bytes.Clone(input)
		if repair && len(data) >= 4 {
			binary.LittleEndian.PutUint32(data[len(data)-4:], format.CRC(data[:len(data)-4]))
		}
		js, err := decodeJournalState(data)
		if err != nil {
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("error %v does not wrap ErrDamaged", err)
			}
			return
		}
		if again := appendJournalState(nil, js); !bytes.Equal(again, data) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", again, data)
		}
	})
}
