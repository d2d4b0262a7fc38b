package record_test

import (
	"bytes"
	"testing"

	"github.com/ironbus/ironbus/record"
)

// FuzzSubject checks the filtered reader's accessor against the full
// decoder: it never panics, finds the same subject in every body
// Parse accepts, and whatever it returns lies inside the body at the
// place the subject length says.
//
// Run it with: go test -run='^$' -fuzz='^FuzzSubject$' -fuzztime=30s ./record
func FuzzSubject(f *testing.F) {
	for _, name := range []string{"empty", "payload only", "producer", "headers", "zstd", "everything", "unknown code"} {
		encoded, err := record.AppendBody(nil, exampleBodies()[name])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(encoded)
	}
	subjectOnly, err := record.AppendBody(nil, record.Body{Key: []byte("k"), Subject: []byte("orders.eu.new"), Payload: []byte("x")})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(subjectOnly)
	f.Add([]byte{})
	f.Add(make([]byte, record.BodyFixedSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		subject, ok := record.Subject(data)
		view, err := record.Parse(data)
		if err == nil && (!ok || !bytes.Equal(subject, view.Subject)) {
			t.Fatalf("Subject = %q, %v; Parse found %q", subject, ok, view.Subject)
		}
		if !ok {
			if subject != nil {
				t.Fatalf("a refused body returned subject %q", subject)
			}
			return
		}
		if cap(subject) != len(subject) {
			t.Fatal("the subject slice lets an append overwrite the body")
		}
		at := record.BodyFixedSize + int(littleEndian.Uint16(data[4:6]))
		if littleEndian.Uint16(data[2:4])&1 != 0 {
			at += record.BodyProducerSize
		}
		if len(subject) != int(littleEndian.Uint16(data[6:8])) || !bytes.Equal(data[at:at+len(subject)], subject) {
			t.Fatalf("subject %q is not the body's bytes at %d", subject, at)
		}
	})
}

// TestSubjectDoesNotAllocate pins the accessor to zero allocations:
// a filtered reader calls it once per record it passes.
func TestSubjectDoesNotAllocate(t *testing.T) {
	encoded, err := record.AppendBody(nil, record.Body{Key: []byte("key"), Subject: []byte("s.42"), Payload: make([]byte, 256), HasProducer: true})
	if err != nil {
		t.Fatal(err)
	}
	var subject []byte
	allocs := testing.AllocsPerRun(1000, func() { subject, _ = record.Subject(encoded) })
	if allocs != 0 || string(subject) != "s.42" {
		t.Fatalf("%v allocations, subject %q", allocs, subject)
	}
}
