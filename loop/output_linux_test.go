package loop

import (
	"bytes"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWriteDirect: a small write goes to the socket at once, and only
// while nothing waits ahead of it: not with bytes queued, not while the
// reactor holds a batch it has not written whole, not once the queue is
// finished, and not above directWriteMax or on a backend without a
// socket for it. A write the socket takes only partly queues the rest.
func TestWriteDirect(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	q := newOutputQueue(chunkSource{})
	received := func() []byte {
		buffer := make([]byte, 1<<20)
		n, err := unix.Read(fds[1], buffer)
		if err != nil {
			return nil
		}
		return buffer[:n]
	}
	if written, _ := q.writeDirect([]byte("no socket")); written {
		t.Fatal("a queue without a socket wrote directly")
	}
	q.direct = fds[0]
	if written, queued := q.writeDirect([]byte("ack")); !written || queued || !bytes.Equal(received(), []byte("ack")) {
		t.Fatalf("a lone small write: written %v, queued %v", written, queued)
	}
	if written, _ := q.writeDirect(make([]byte, directWriteMax+1)); written {
		t.Fatal("a write above directWriteMax went direct")
	}
	q.mu.Lock()
	q.appendLocked([]byte("earlier"))
	q.mu.Unlock()
	if written, _ := q.writeDirect([]byte("later")); written {
		t.Fatal("a direct write overtook queued bytes")
	}
	q.takeAll(nil, nil) // the reactor takes "earlier" and has not written it yet
	if written, _ := q.writeDirect([]byte("later")); written {
		t.Fatal("a direct write overtook the reactor's unwritten batch")
	}
	q.takeAll(nil, nil) // written whole: nothing taken now
	// Fill the socket so the next write is taken only in part.
	for {
		if _, err := unix.Write(fds[0], make([]byte, 64<<10)); err != nil {
			break
		}
	}
	if written, queued := q.writeDirect([]byte("tail")); !written || !queued || q.queuedBytes == 0 {
		t.Fatalf("a write to a full socket: written %v, queued %v, %d bytes queued", written, queued, q.queuedBytes)
	}
	q.takeAll(nil, nil)
	q.takeAll(nil, nil)
	q.finish()
	if written, _ := q.writeDirect([]byte("after")); written {
		t.Fatal("a finished queue wrote directly")
	}
}
