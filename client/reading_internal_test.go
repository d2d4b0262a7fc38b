package client

import (
	"testing"
	"time"
)

// TestReaderTurns walks the reader role through its transitions: a
// caller reads only when nobody does, and a caller letting go hands the
// socket to the loop exactly when something is still pending, so no
// waiter is left for the quiet timer to rescue.
func TestReaderTurns(t *testing.T) {
	c := &Client{loopWake: make(chan struct{}, 1), epoch: time.Now()}
	waiter := entry{kind: kindProduce, call: &call{done: make(chan struct{}, 1)}}

	if !c.takeReading() || c.reader != readerCaller {
		t.Fatalf("an unread socket is not taken: reader %d", c.reader)
	}
	if c.takeReading() {
		t.Fatal("a second caller took the socket from the first")
	}
	c.releaseReading()
	if c.reader != readerNone || len(c.loopWake) != 0 {
		t.Fatalf("nothing pending: reader %d, loop woken %d times", c.reader, len(c.loopWake))
	}

	id, err := c.register(waiter)
	if err != nil {
		t.Fatal(err)
	}
	if c.reader != readerNone {
		t.Fatal("an awaited request woke the loop: its caller reads for itself")
	}
	if !c.takeReading() {
		t.Fatal("the caller could not take the socket")
	}
	other, _ := c.register(entry{kind: kindProduce, call: &call{done: make(chan struct{}, 1)}})
	c.pending.remove(c.pending.get(id)) // the first caller's answer came
	c.releaseReading()
	if c.reader != readerLoop || len(c.loopWake) != 1 {
		t.Fatalf("a waiter pending: reader %d, loop woken %d times", c.reader, len(c.loopWake))
	}
	if c.takeReading() {
		t.Fatal("a caller took the socket from the loop")
	}
	<-c.loopWake
	c.pending.remove(c.pending.get(other))
	if c.keepReading() || c.reader != readerNone {
		t.Fatalf("the loop reads on with nothing pending: reader %d", c.reader)
	}

	if _, err := c.register(entry{kind: kindKeepalive}); err != nil {
		t.Fatal(err)
	}
	if c.reader != readerLoop || len(c.loopWake) != 1 {
		t.Fatalf("a request nobody awaits: reader %d, loop woken %d times", c.reader, len(c.loopWake))
	}

	// A Stream's read-ahead has a call but is awaited only later: the
	// loop must read it meanwhile.
	reads := &Client{loopWake: make(chan struct{}, 1), epoch: time.Now()}
	if _, err := reads.registerAhead(entry{kind: kindFetch, call: &call{done: make(chan struct{}, 1)}}); err != nil {
		t.Fatal(err)
	}
	if reads.reader != readerLoop || len(reads.loopWake) != 1 {
		t.Fatalf("a read-ahead: reader %d, loop woken %d times", reads.reader, len(reads.loopWake))
	}
}

// TestQuietSocket: the loop takes the socket only once nobody has read
// it for quietReadAfter.
func TestQuietSocket(t *testing.T) {
	c := &Client{loopWake: make(chan struct{}, 1), epoch: time.Now()}
	c.releasedAt = c.now()
	if wait := c.takeQuietSocket(); wait <= 0 || wait > quietReadAfter {
		t.Fatalf("just released: wait %v", wait)
	}
	c.releasedAt = c.now() - int64(quietReadAfter)
	if wait := c.takeQuietSocket(); wait != 0 || c.reader != readerLoop {
		t.Fatalf("quiet: wait %v, reader %d", wait, c.reader)
	}
	if wait := c.takeQuietSocket(); wait != quietReadAfter {
		t.Fatalf("already read by the loop: wait %v", wait)
	}
}
