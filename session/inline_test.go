package session

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/segment/vfs"
	"github.com/ironbus/ironbus/wire"
)

// An awaited produce, one record in flight, is committed inline on every
// backend: its fdatasync runs outside any committer cycle, and its ack
// comes straight back.
func TestAwaitedProduceCommitsInline(t *testing.T) {
	addr, b := testBroker(t, testConfig{})
	c := dialRaw(t, addr)
	c.handshake()
	before := b.Dir().Stats()
	const n = 100
	for i := 1; i <= n; i++ {
		body, crc := recordBody(fmt.Sprint("m", i))
		c.send(uint32(i), &wire.Produce{Stream: []byte("orders"), BodyCRC: crc, Body: body})
		frame := c.read()
		if frame.Type != wire.TypeProduceAck || frame.RequestID != uint32(i) {
			t.Fatalf("request %d answered by %v for request %d", i, frame.Type, frame.RequestID)
		}
		ack, err := wire.DecodeProduceAck(frame.Body)
		if err != nil {
			t.Fatal(err)
		}
		if ack.Offset != uint64(i-1) {
			t.Fatalf("request %d acknowledged at offset %d, want %d", i, ack.Offset, i-1)
		}
	}
	after := b.Dir().Stats()
	inline := (after.Syncs - before.Syncs) - (after.Cycles - before.Cycles)
	t.Logf("%s backend: %d of %d syncs outside committer cycles", testBackend(), inline, after.Syncs-before.Syncs)
	if inline < n/2 {
		t.Fatalf("%d of %d awaited produces were committed inline, want most of them", inline, n)
	}
}

// A lone record that follows a pipelined burst on the same connection may
// be ready to commit inline (to another, idle stream) while the writer
// still holds the burst's acks: it must then go through the writer, so
// that acks keep their order. The burst's stream syncs slowly so that its
// acks are still waiting when the lone record arrives.
func TestInlineAckNeverOvertakes(t *testing.T) {
	slow := vfs.Inject(vfs.OS{}, vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpSyncData && strings.Contains(op.Path, "/slow/") {
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	}))
	addr, _ := testBroker(t, testConfig{engine: broker.Config{FS: slow}})
	c := dialRaw(t, addr)
	c.handshake()
	id := uint32(0)
	for round := range 10 {
		var burst []byte
		for range 64 {
			id++
			body, crc := recordBody(fmt.Sprint("burst", id))
			burst = wire.Append(burst, id, &wire.Produce{Stream: []byte("slow"), BodyCRC: crc, Body: body})
		}
		if _, err := c.conn.Write(burst); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // the broker has read the burst
		id++
		body, crc := recordBody(fmt.Sprint("lone", id))
		c.send(id, &wire.Produce{Stream: []byte("fast"), BodyCRC: crc, Body: body})
		for want := id - 64; want <= id; want++ {
			frame := c.read()
			if frame.Type != wire.TypeProduceAck {
				t.Fatalf("round %d: request %d answered by %v", round, frame.RequestID, frame.Type)
			}
			if frame.RequestID != want {
				t.Fatalf("round %d: ack for request %d arrived where %d's was due", round, frame.RequestID, want)
			}
		}
	}
}
