package session

import (
	"testing"
	"time"

	"github.com/ironbus/ironbus/wire"
)

func batchOptions(id uint32, commit bool) wire.ProduceOptions {
	o := wire.ProduceOptions{Batch: true, BatchID: id}
	if commit {
		o.BatchFlags = wire.BatchCommit
	}
	return o
}

func TestAtomicBatchIsStoredWholeAtItsCommit(t *testing.T) {
	addr, b := testBroker(t, testConfig{})
	c := dialRaw(t, addr)
	c.handshake()
	produceWith(c, 1, "a", batchOptions(7, false), 0)
	produceWith(c, 2, "b", batchOptions(7, false), 0)
	c.send(3, &wire.Ping{})
	if frame := c.read(); frame.Type != wire.TypePong {
		t.Fatalf("a batch's records are answered at its commit; got %v for request %d", frame.Type, frame.RequestID)
	}
	if end := testLog(t, b, "orders", 0).NextOffset(); end != 0 {
		t.Fatalf("%d records assigned before the commit", end)
	}
	produceWith(c, 4, "c", batchOptions(7, true), 0)
	expectAck(t, c.read(), 1, 0, 0)
	expectAck(t, c.read(), 2, 1, 0)
	expectAck(t, c.read(), 4, 2, 0)
}

func TestAtomicBatchWithARefusedRecordStoresNothing(t *testing.T) {
	addr, b := testBroker(t, testConfig{})
	c := dialRaw(t, addr)
	c.handshake()
	produceWith(c, 1, "a", batchOptions(1, false), 0)
	bad := batchOptions(1, true)
	bad.HasExpectLastOffset, bad.ExpectLastOffset = true, 99
	produceWith(c, 2, "b", bad, 0)
	for _, id := range []uint32{1, 2} {
		expectError(t, c.read(), id, wire.CodeBatchIncomplete)
	}
	// An abandoned batch (another batch id before the commit) is
	// refused; the new one goes through.
	produceWith(c, 3, "x", batchOptions(2, false), 0)
	produceWith(c, 4, "y", batchOptions(3, true), 0)
	expectError(t, c.read(), 3, wire.CodeBatchIncomplete)
	expectAck(t, c.read(), 4, 0, 0)
	if end := testLog(t, b, "orders", 0).NextOffset(); end != 1 {
		t.Fatalf("%d records stored, want 1", end)
	}
}

func TestAtomicBatchLeftOpenByAClosedConnectionIsNeverStored(t *testing.T) {
	addr, b := testBroker(t, testConfig{})
	c := dialRaw(t, addr)
	c.handshake()
	produceWith(c, 1, "a", batchOptions(1, false), 0)
	produceWith(c, 2, "b", batchOptions(1, false), 0)
	_ = c.conn.Close()
	d := dialRaw(t, addr)
	d.handshake()
	produceWith(d, 1, "after", wire.ProduceOptions{}, 0)
	expectAck(t, d.read(), 1, 0, 0)
	time.Sleep(50 * time.Millisecond)
	if end := testLog(t, b, "orders", 0).NextOffset(); end != 1 {
		t.Fatalf("%d records stored, want only the one after", end)
	}
}
