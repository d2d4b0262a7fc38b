package session

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/wire"
)

func TestConnectionLimit(t *testing.T) {
	addr, _ := testBroker(t, testConfig{engine: broker.Config{MaxConnections: 2}})
	first, second := dialRaw(t, addr), dialRaw(t, addr)
	first.handshake()
	second.handshake()
	third := dialRaw(t, addr)
	e := expectError(t, third.read(), 0, wire.CodeTooManyConns)
	if !e.Retryable || !e.Closes {
		t.Fatalf("too many connections should be retryable and closing: %+v", e)
	}
	_ = first.conn.Close()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		c := dialRaw(t, addr)
		c.send(0, &wire.Hello{MinVersion: 1, MaxVersion: 1, MaxFrame: wire.DefaultMaxFrame, Window: 1})
		if c.read().Type == wire.TypeWelcome {
			return // a slot freed up when the first connection closed
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the slot of a closed connection was never given back")
}

func TestOversizeFrameCloses(t *testing.T) {
	addr, _ := testBroker(t, testConfig{session: Config{MaxFrame: wire.MinMaxFrame}})
	c := dialRaw(t, addr)
	c.handshake()
	body, crc := recordBody(string(make([]byte, wire.MinMaxFrame)))
	c.send(3, &wire.Produce{Stream: []byte("s"), BodyCRC: crc, Body: body})
	e := expectError(t, c.read(), 0, wire.CodeFrameTooLarge)
	if !e.Closes {
		t.Fatal("frame_too_large must close")
	}
}

func TestHandshakeTimeoutCloses(t *testing.T) {
	addr, _ := testBroker(t, testConfig{session: Config{HandshakeTimeout: 100 * time.Millisecond}})
	c := dialRaw(t, addr) // says nothing: slowloris
	expectError(t, c.read(), 0, wire.CodeTimeout)
	if _, err := c.in.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("still open after the handshake timeout: %v", err)
	}
}

func TestWindowStopsReadingNotDropping(t *testing.T) {
	// A window of 8: a client that sends 200 produces without reading any
	// ack still gets all 200 acks, in the end: the broker stops reading
	// instead of dropping.
	addr, _ := testBroker(t, testConfig{session: Config{Window: 8}})
	c := dialRaw(t, addr)
	welcome := c.handshake()
	if welcome.Window != 8 {
		t.Fatalf("Welcome window %d", welcome.Window)
	}
	go func() {
		for i := 1; i <= 200; i++ {
			body, crc := recordBody(fmt.Sprint(i))
			if _, err := c.conn.Write(wire.Append(nil, uint32(i), &wire.Produce{Stream: []byte("w"), BodyCRC: crc, Body: body})); err != nil {
				return
			}
		}
	}()
	for i := 0; i < 200; i++ {
		if frame := c.read(); frame.Type != wire.TypeProduceAck {
			t.Fatalf("frame %d: %v", i, frame.Type)
		}
	}
}

func TestProducePathAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	addr, _ := testBroker(t, testConfig{})
	c := dialRaw(t, addr)
	c.handshake()
	body, crc := recordBody("steady-state")
	const perRound, rounds = 1000, 20
	var frames []byte
	for i := 0; i < perRound; i++ {
		frames = wire.Append(frames, uint32(i+1), &wire.Produce{Stream: []byte("alloc"), BodyCRC: crc, Body: body})
	}
	// Read acks into one reused buffer, so the test itself allocates
	// nothing per message and every allocation counted is the broker's.
	buf := make([]byte, 1<<20)
	round := func() {
		if _, err := c.conn.Write(frames); err != nil {
			t.Fatal(err)
		}
		acks, start, end := 0, 0, 0
		for acks < perRound {
			n, err := c.conn.Read(buf[end:])
			if err != nil {
				t.Fatal(err)
			}
			end += n
			for {
				frame, used, err := wire.ParseFrame(buf[start:end], wire.DefaultMaxFrame)
				if err != nil {
					break
				}
				if frame.Type != wire.TypeProduceAck {
					t.Fatalf("got %v", frame.Type)
				}
				acks++
				start += used
			}
			copy(buf, buf[start:end])
			end -= start
			start = 0
		}
	}
	round() // warm up: stream creation, buffers, segment preparation
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < rounds; i++ {
		round()
	}
	runtime.ReadMemStats(&after)
	perMessage := float64(after.Mallocs-before.Mallocs) / float64(perRound*rounds)
	t.Logf("%.4f allocations per produced message (client and broker in this process)", perMessage)
	if perMessage > 0.1 {
		t.Fatalf("%.2f allocations per message on the produce path", perMessage)
	}
}

// TestAwaitedProducePathAllocations: an awaited produce is a batch of one
// record, so what the engine allocates per batch it allocates per record:
// the batch, its done channel and the committed mark (three). Everything
// else on the path (the parker's check, the output queue's wake channel,
// the log's waiter channels, the completed-batch list) is reused; output
// chunks come from a slab, as under serve.
func TestAwaitedProducePathAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	chunks, err := arena.NewLazySlab(arena.NewBudget(), "output chunks", "--test", loop.OutputChunkSize, 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = chunks.Close() })
	addr, _ := testBrokerOn(t, testConfig{}, loop.Config{OutputBuffers: chunks})
	c := dialRaw(t, addr)
	c.handshake()
	body, crc := recordBody("awaited")
	frame := wire.Append(nil, 1, &wire.Produce{Stream: []byte("awaited"), BodyCRC: crc, Body: body})
	buf := make([]byte, 4096)
	produce := func() {
		if _, err := c.conn.Write(frame); err != nil {
			t.Fatal(err)
		}
		if _, err := c.conn.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	for range 200 { // warm up: stream creation, buffers, segment preparation
		produce()
	}
	const n = 2000
	best := 1e9
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			produce()
		}
		runtime.ReadMemStats(&after)
		best = min(best, float64(after.Mallocs-before.Mallocs)/n)
	}
	t.Logf("%.2f allocations per awaited produce (%s backend; client and broker in this process)", best, testBackend())
	if best > 4 {
		t.Fatalf("%.2f allocations per awaited produce, want at most the three the engine makes per batch", best)
	}
}

func TestBackpressureNeverDuplicatesOrDrops(t *testing.T) {
	checkBackpressure(t, []string{"bp"})
}

// TestBackpressureAcrossStreams interleaves streams, so runs end at every
// stream switch; a run handed back after a pause must not carry the run
// appended before it (that once acknowledged records twice).
func TestBackpressureAcrossStreams(t *testing.T) {
	checkBackpressure(t, []string{"bp-a", "bp-a", "bp-b", "bp-c", "bp-c", "bp-c"})
}

// checkBackpressure sends records round robin over streams through a tiny
// staging buffer and window, so the session pauses for both reasons many
// times and each pause hands the run's bytes back. Every request must be
// acknowledged exactly once, in order within its stream.
func checkBackpressure(t *testing.T, streams []string) {
	addr, b := testBroker(t, testConfig{engine: broker.Config{Storage: segment.Options{StagingBytes: 4096}}, session: Config{Window: 16}})
	c := dialRaw(t, addr)
	c.handshake()
	const n = 3000
	streamOf := func(id uint32) string { return streams[int(id-1)%len(streams)] }
	go func() {
		var batch []byte
		for i := 1; i <= n; i++ {
			body, crc := recordBody(fmt.Sprint("record-", i, string(make([]byte, 300))))
			batch = wire.Append(batch, uint32(i), &wire.Produce{Stream: []byte(streamOf(uint32(i))), BodyCRC: crc, Body: body})
			if len(batch) > 256<<10 || i == n {
				if _, err := c.conn.Write(batch); err != nil {
					return
				}
				batch = batch[:0]
			}
		}
	}()
	type position struct {
		stream string
		offset uint64
	}
	seen := map[position]uint32{}
	next := map[string]uint32{}
	for len(seen) < n {
		frame := c.read()
		if frame.Type != wire.TypeProduceAck {
			t.Fatalf("got %v", frame.Type)
		}
		ack, _ := wire.DecodeProduceAck(frame.Body)
		at := position{streamOf(frame.RequestID), ack.Offset}
		if previous, dup := seen[at]; dup {
			t.Fatalf("%s offset %d acknowledged for requests %d and %d", at.stream, at.offset, previous, frame.RequestID)
		}
		seen[at] = frame.RequestID
		if frame.RequestID <= next[at.stream] {
			t.Fatalf("request %d acknowledged after request %d of the same stream: order lost", frame.RequestID, next[at.stream])
		}
		next[at.stream] = frame.RequestID
	}
	total := uint64(0)
	for _, stream := range []string{"bp", "bp-a", "bp-b", "bp-c"} {
		if served, err := b.Stream([]byte(stream)); err == nil {
			total += testLog(t, b, served.Name(), 0).Committed()
		}
	}
	if total != n {
		t.Fatalf("the logs hold %d records, %d were sent", total, n)
	}
}
