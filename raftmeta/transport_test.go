package raftmeta

import (
	"bytes"
	"testing"
)

func TestHandshakeRoundTrip(t *testing.T) {
	id := Identity{Node: 3, Incarnation: 0xabcdef01, ClusterID: 99, ClusterAddr: "10.0.0.3:8003", ClientAddr: "10.0.0.3:7003"}
	got, verdict, err := readHandshake(bytes.NewReader(encodeHandshake(id, verdictRefused)))
	if err != nil || got != id || verdict != verdictRefused {
		t.Fatalf("%+v %d %v", got, verdict, err)
	}
}

func FuzzReadHandshake(f *testing.F) {
	f.Add(encodeHandshake(Identity{Node: 1, Incarnation: 2, ClusterAddr: "a:1"}, verdictOK))
	f.Add([]byte(handshakeMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		id, verdict, err := readHandshake(bytes.NewReader(data))
		if err != nil {
			return
		}
		again := encodeHandshake(id, verdict)
		if !bytes.HasPrefix(data, again) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", data, id, again)
		}
	})
}
