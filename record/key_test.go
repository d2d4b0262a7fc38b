package record

import (
	"bytes"
	"errors"
	"testing"
)

func TestTombstoneRoundTrip(t *testing.T) {
	b, err := AppendBody(nil, Body{Key: []byte("user-7"), Subject: []byte("users"), Tombstone: true, HasProducer: true, ProducerID: 3, Sequence: 9})
	if err != nil {
		t.Fatal(err)
	}
	v, err := Parse(b)
	if err != nil || !v.Tombstone || string(v.Key) != "user-7" || len(v.Payload) != 0 {
		t.Fatalf("parse: %+v %v", v, err)
	}
	key, tombstone, ok := Key(b)
	if !ok || !tombstone || !bytes.Equal(key, []byte("user-7")) {
		t.Fatalf("Key: %q %v %v", key, tombstone, ok)
	}
	plain, _ := AppendBody(nil, Body{Key: []byte("k"), Payload: []byte("v")})
	if key, tombstone, ok := Key(plain); !ok || tombstone || string(key) != "k" {
		t.Fatalf("Key of a plain record: %q %v %v", key, tombstone, ok)
	}
	if _, _, ok := Key(plain[:len(plain)-1]); ok {
		t.Fatal("Key accepted a truncated body")
	}
}

func TestTombstoneNeedsKeyAndNoPayload(t *testing.T) {
	for _, b := range []Body{{Tombstone: true}, {Key: []byte("k"), Payload: []byte("x"), Tombstone: true}} {
		if _, err := AppendBody(nil, b); !errors.Is(err, ErrMalformed) {
			t.Fatalf("AppendBody(%+v) = %v, want ErrMalformed", b, err)
		}
	}
	// A keyless body with the flag set by hand is refused by Parse.
	raw, _ := AppendBody(nil, Body{Subject: []byte("s")})
	raw[2] |= bodyFlagTombstone
	if _, err := Parse(raw); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Parse of a keyless tombstone = %v", err)
	}
}

// FuzzKey checks compaction's key accessor against the full decoder: it
// never panics, finds the same key and tombstone flag in every body Parse
// accepts, and a returned key is clipped so an append cannot overwrite
// the body.
//
// Run it with: go test -run='^$' -fuzz='^FuzzKey$' -fuzztime=30s ./record
func FuzzKey(f *testing.F) {
	for _, b := range []Body{{}, {Key: []byte("k"), Payload: []byte("v")}, {Key: []byte("gone"), Tombstone: true, HasProducer: true},
		{Key: []byte("k"), Subject: []byte("s"), Headers: []Header{{Name: "h", Value: []byte("1")}}, Payload: []byte("p")}} {
		encoded, err := AppendBody(nil, b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(encoded)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		key, tombstone, ok := Key(data)
		view, err := Parse(data)
		if err == nil && (!ok || !bytes.Equal(key, view.Key) || tombstone != view.Tombstone) {
			t.Fatalf("Key = %q, %v, %v; Parse found %q, %v", key, tombstone, ok, view.Key, view.Tombstone)
		}
		if ok && cap(key) != len(key) {
			t.Fatal("the key slice lets an append overwrite the body")
		}
	})
}
