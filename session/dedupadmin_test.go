package session

import (
	"testing"

	"github.com/ironbus/ironbus/wire"
)

// streamListReply sends a StreamAdmin and decodes its StreamList.
func (c *rawClient) streamListReply(id uint32, m wire.StreamAdmin) wire.StreamList {
	c.t.Helper()
	c.send(id, &m)
	frame := c.read()
	if frame.Type != wire.TypeStreamList {
		e, _ := wire.DecodeError(frame.Body)
		c.t.Fatalf("StreamAdmin answered %v %v", frame.Type, e)
	}
	list, err := wire.DecodeStreamList(frame.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return list
}

// TestStreamAdminCarriesTheDedupWindow: a create sets the message-id
// window (default, off, a duration) and a connection with the producers
// capability reads it back in the extended StreamList; one without it
// gets the list it always had.
func TestStreamAdminCarriesTheDedupWindow(t *testing.T) {
	addr, _ := testBroker(t, testConfig{})
	c := dialRaw(t, addr)
	c.handshake()
	cases := []struct {
		stream   string
		settings uint8
		ms       uint64
		want     uint64
	}{{"plain", 0, 0, 120_000}, {"off", wire.StreamDedupWindowSet, 0, 0}, {"short", wire.StreamDedupWindowSet, 30_000, 30_000}}
	for i, tc := range cases {
		list := c.streamListReply(uint32(i+1), wire.StreamAdmin{Op: wire.StreamOpCreate, Stream: []byte(tc.stream),
			Settings: tc.settings, DedupWindowMs: tc.ms})
		if !list.Extended || len(list.Streams) != 1 || list.Streams[0].DedupWindowMs != tc.want {
			t.Fatalf("%s: extended %v, streams %+v; want window %d ms", tc.stream, list.Extended, list.Streams, tc.want)
		}
	}
	c.send(9, &wire.StreamAdmin{Op: wire.StreamOpCreate, Stream: []byte("long"), Settings: wire.StreamDedupWindowSet, DedupWindowMs: 25 * 3600_000})
	expectError(t, c.read(), 9, wire.CodeInvalidRequest)

	old := dialRaw(t, addr)
	old.send(0, &wire.Hello{MinVersion: 1, MaxVersion: 1, Capabilities: wire.Capabilities &^ wire.CapProducers,
		MaxFrame: wire.DefaultMaxFrame, Window: 1024, ClientName: "old"})
	if frame := old.read(); frame.Type != wire.TypeWelcome {
		t.Fatalf("handshake answered %v", frame.Type)
	}
	if list := old.streamListReply(1, wire.StreamAdmin{Op: wire.StreamOpList}); list.Extended || len(list.Streams) != 3 {
		t.Fatalf("a connection without the producers capability got extended %v, %d streams", list.Extended, len(list.Streams))
	}
}
