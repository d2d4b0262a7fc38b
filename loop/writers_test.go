package loop

import (
	"bufio"
	"encoding/binary"
	"io"
	"testing"
	"time"
)

// TestConformanceConcurrentWriters: writers on several goroutines, each
// sending numbered messages of varied sizes, to a peer that stalls at
// first (so the socket buffer fills and writes go partly to the kernel,
// partly to the queue) and then reads everything. Every message arrives
// whole, and each writer's in order: writes a writer makes itself (epoll's
// direct path) never tear or overtake what another writer left queued.
func TestConformanceConcurrentWriters(t *testing.T) {
	const writers, messages = 4, 1500
	forEachBackend(t, func(t *testing.T, backend string) {
		handler := funcHandler{open: func(conn Conn) (Session, error) {
			for writer := range writers {
				go func() {
					for seq := range messages {
						size := 12 + (seq*7919+writer*104729)%3000
						message := make([]byte, size)
						binary.LittleEndian.PutUint32(message[0:], uint32(size))
						binary.LittleEndian.PutUint32(message[4:], uint32(writer))
						binary.LittleEndian.PutUint32(message[8:], uint32(seq))
						for i := 12; i < size; i++ {
							message[i] = byte(writer + seq + i)
						}
						if err := conn.Write(message); err != nil {
							return
						}
					}
				}()
			}
			return funcSession{data: func(in []byte) (int, error) { return len(in), nil }, stopped: func(error) { _ = conn.Close() }}, nil
		}}
		_, addr := startServer(t, backend, Config{}, handler)
		conn := dial(t, addr)
		time.Sleep(50 * time.Millisecond) // the writers fill the socket buffer meanwhile
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		reader := bufio.NewReader(conn)
		next := make([]int, writers)
		for range writers * messages {
			var head [12]byte
			if _, err := io.ReadFull(reader, head[:]); err != nil {
				t.Fatalf("after %v messages: %v", next, err)
			}
			size := int(binary.LittleEndian.Uint32(head[0:]))
			writer := int(binary.LittleEndian.Uint32(head[4:]))
			seq := int(binary.LittleEndian.Uint32(head[8:]))
			if writer >= writers || seq != next[writer] || size < 12 || size > 3012 {
				t.Fatalf("message of writer %d seq %d size %d; want writer < %d at seq %v (a torn or reordered write)",
					writer, seq, size, writers, next)
			}
			body := make([]byte, size-12)
			if _, err := io.ReadFull(reader, body); err != nil {
				t.Fatal(err)
			}
			for i, b := range body {
				if b != byte(writer+seq+i+12) {
					t.Fatalf("writer %d seq %d: byte %d is %d", writer, seq, i+12, b)
				}
			}
			next[writer]++
		}
		_ = conn.Close()
	})
}
