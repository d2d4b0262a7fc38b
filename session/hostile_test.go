package session

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/wire"
)

// The hostile-input suite: frames no client of ours would send. Each must
// get a typed error or a closed connection, never a panic or a hang, and
// the broker must go on serving a well-behaved client afterwards.

// hostileSeed is IRONBUS_SEED when set (to replay a failure), else the time.
func hostileSeed(t *testing.T) uint64 {
	if text := os.Getenv("IRONBUS_SEED"); text != "" {
		seed, err := strconv.ParseUint(text, 10, 64)
		if err != nil {
			t.Fatalf("IRONBUS_SEED=%q: %v", text, err)
		}
		return seed
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (replay with IRONBUS_SEED=%d)", seed, seed)
	return seed
}

// readOrClosed reads one frame, or reports that the broker closed the
// connection (io.EOF, a reset). Anything else — a timeout above all — is a
// failure: the broker must answer or close, not leave a peer hanging.
func (c *rawClient) readOrClosed(timeout time.Duration) (wire.Frame, bool) {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(timeout))
	head := make([]byte, 4)
	if _, err := io.ReadFull(c.in, head); err != nil {
		c.closedOrFail(err)
		return wire.Frame{}, false
	}
	rest := make([]byte, binary.LittleEndian.Uint32(head))
	if _, err := io.ReadFull(c.in, rest); err != nil {
		c.closedOrFail(err)
		return wire.Frame{}, false
	}
	frame, _, err := wire.ParseFrame(append(head, rest...), 1<<30)
	if err != nil {
		c.t.Fatalf("the broker sent a frame that does not parse: %v", err)
	}
	return frame, true
}

func (c *rawClient) closedOrFail(err error) {
	c.t.Helper()
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		c.t.Fatalf("the broker neither answered nor closed within the deadline")
	}
	// io.EOF, io.ErrUnexpectedEOF or a reset: closed, which is an answer.
}

// alive sends a Ping and reads until its Pong (true) or the close (false),
// skipping whatever replies the hostile frame earned.
func (c *rawClient) alive(id uint32) bool {
	c.t.Helper()
	if _, err := c.conn.Write(wire.Append(nil, id, &wire.Ping{Payload: uint64(id)})); err != nil {
		return false // closed already
	}
	for {
		frame, ok := c.readOrClosed(10 * time.Second)
		if !ok {
			return false
		}
		if frame.Type == wire.TypeError {
			if _, err := wire.DecodeError(frame.Body); err != nil {
				c.t.Fatalf("an Error frame that does not decode: %v", err)
			}
		}
		if frame.Type == wire.TypePong && frame.RequestID == id {
			return true
		}
	}
}

// hostileConfig keeps waits short so that a random Consume parks briefly.
func hostileConfig() testConfig {
	return testConfig{engine: broker.Config{MaxStreams: 64}, session: Config{MaxConsumeWait: 200 * time.Millisecond, HandshakeTimeout: 2 * time.Second}}
}

func TestHostileRandomBodiesOfEveryType(t *testing.T) {
	rng := rand.New(rand.NewPCG(hostileSeed(t), 7))
	addr, b := testBroker(t, hostileConfig())
	types := []wire.Type{0, 200, 255}
	for _, info := range wire.Types() {
		types = append(types, info.Type)
	}
	c := dialRaw(t, addr)
	c.handshake()
	closes := 0
	for _, frameType := range types {
		for attempt := range 12 {
			body := make([]byte, rng.IntN(96))
			for i := range body {
				body[i] = byte(rng.Uint32())
			}
			if _, err := c.conn.Write(wire.AppendFrame(nil, frameType, uint32(attempt+1), body)); err != nil {
				t.Fatal(err)
			}
			if !c.alive(1_000_000 + uint32(attempt)) {
				closes++
				c = dialRaw(t, addr)
				c.handshake()
			}
		}
	}
	t.Logf("%d random frames, %d closed their connection", len(types)*12, closes)
	expectServing(t, addr, b)
}

// TestHostileTruncatedBodies sends every prefix of a valid body of each
// request type: a decoder must refuse each one cleanly.
func TestHostileTruncatedBodies(t *testing.T) {
	addr, b := testBroker(t, hostileConfig())
	body, crc := recordBody("payload")
	requests := []wire.Message{
		&wire.Produce{Stream: []byte("truncated"), BodyCRC: crc, Body: body},
		&wire.Hello{MinVersion: 1, MaxVersion: 1, MaxFrame: wire.DefaultMaxFrame, Window: 8, ClientName: "again"},
		&wire.Ping{Payload: 9},
	}
	c := dialRaw(t, addr)
	c.handshake()
	for _, request := range requests {
		full := request.AppendBody(nil)
		for cut := range len(full) {
			if _, err := c.conn.Write(wire.AppendFrame(nil, request.Type(), 5, full[:cut])); err != nil {
				t.Fatal(err)
			}
			if !c.alive(77) {
				c = dialRaw(t, addr)
				c.handshake()
			}
		}
	}
	expectServing(t, addr, b)
}

func TestHostileHandshakes(t *testing.T) {
	addr, b := testBroker(t, hostileConfig())
	cases := []struct {
		name  string
		hello wire.Hello
		code  wire.Code
	}{
		{"a newer protocol only", wire.Hello{MinVersion: 2, MaxVersion: 9, MaxFrame: wire.DefaultMaxFrame, Window: 8}, wire.CodeVersion},
		{"max frame below the minimum", wire.Hello{MinVersion: 1, MaxVersion: 1, MaxFrame: wire.MinMaxFrame - 1, Window: 8}, wire.CodeHandshake},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, addr)
			c.send(1, &tc.hello)
			e := expectError(t, c.read(), 1, tc.code)
			if !e.Closes {
				t.Fatalf("%v must close the connection", tc.code)
			}
		})
	}
	t.Run("inverted version range", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.send(1, &wire.Hello{MinVersion: 3, MaxVersion: 1, MaxFrame: wire.DefaultMaxFrame})
		expectError(t, c.read(), 1, wire.CodeMalformed)
	})
	t.Run("a second Hello", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.handshake()
		c.send(2, &wire.Hello{MinVersion: 1, MaxVersion: 1, MaxFrame: wire.DefaultMaxFrame, Window: 8})
		expectError(t, c.read(), 2, wire.CodeHandshake)
	})
	t.Run("a huge window is clamped", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.send(1, &wire.Hello{MinVersion: 1, MaxVersion: 1, MaxFrame: wire.DefaultMaxFrame, Window: 1 << 31})
		frame := c.read()
		welcome, err := wire.DecodeWelcome(frame.Body)
		if err != nil || welcome.Window > DefaultWindow {
			t.Fatalf("welcome %+v (%v): the window must be the broker's, not the client's", welcome, err)
		}
	})
	expectServing(t, addr, b)
}

// TestHostileLengthsAtTheLimits: a frame exactly at the negotiated maximum
// is read; one byte more is refused and closes; a record one byte over the
// maximum record size is refused and the connection stays.
func TestHostileLengthsAtTheLimits(t *testing.T) {
	const maxFrame = wire.MinMaxFrame * 4
	cfg := hostileConfig()
	cfg.session.MaxFrame = maxFrame
	addr, b := testBroker(t, cfg)
	c := dialRaw(t, addr)
	welcome := c.handshake()

	// A Produce whose frame length field is exactly the limit.
	produceOfLength := func(length int, id uint32) []byte {
		payload := 0
		for {
			body, crc := recordBody(string(make([]byte, payload)))
			frame := wire.Append(nil, id, &wire.Produce{Stream: []byte("limits"), BodyCRC: crc, Body: body})
			if got := len(frame) - 4; got >= length {
				if got != length {
					t.Fatalf("cannot build a frame of length %d (got %d)", length, got)
				}
				return frame
			}
			payload += max(1, (length-(len(frame)-4))/2)
		}
	}
	if _, err := c.conn.Write(produceOfLength(maxFrame, 3)); err != nil {
		t.Fatal(err)
	}
	if frame := c.read(); frame.Type != wire.TypeProduceAck {
		t.Fatalf("a frame of exactly the maximum length was answered with %v", frame.Type)
	}

	payload := make([]byte, welcome.MaxRecordBytes+1)
	if int(welcome.MaxRecordBytes)+1 < maxFrame-200 {
		body, crc := recordBody(string(payload))
		c.send(5, &wire.Produce{Stream: []byte("limits"), BodyCRC: crc, Body: body})
		expectError(t, c.read(), 5, wire.CodeRecordTooLarge)
	}

	if _, err := c.conn.Write(produceOfLength(maxFrame+1, 6)); err != nil {
		t.Fatal(err)
	}
	frame, ok := c.readOrClosed(10 * time.Second)
	if ok {
		e := expectError(t, frame, 0, wire.CodeFrameTooLarge)
		if !e.Closes {
			t.Fatal("frame_too_large must close")
		}
	}
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'a'
	}
	c = dialRaw(t, addr)
	c.handshake()
	body, crc := recordBody("x")
	c.send(7, &wire.Produce{Stream: long, BodyCRC: crc, Body: body})
	expectError(t, c.read(), 7, wire.CodeInvalidName)
	expectServing(t, addr, b)
}

// TestHostileSlowlorisWriter dribbles a Hello a byte at a time, slower than
// the handshake timeout allows: the broker closes it with a timeout.
func TestHostileSlowlorisWriter(t *testing.T) {
	cfg := hostileConfig()
	cfg.session.HandshakeTimeout = 300 * time.Millisecond
	addr, b := testBroker(t, cfg)
	c := dialRaw(t, addr)
	hello := wire.Append(nil, 1, &wire.Hello{MinVersion: 1, MaxVersion: 1, MaxFrame: wire.DefaultMaxFrame, Window: 8})
	deadline := time.Now().Add(5 * time.Second)
	closed := false
	for _, octet := range hello {
		if _, err := c.conn.Write([]byte{octet}); err != nil {
			closed = true
			break
		}
		time.Sleep(100 * time.Millisecond)
		if time.Now().After(deadline) {
			break
		}
	}
	if !closed {
		frame, ok := c.readOrClosed(5 * time.Second)
		if ok && frame.Type != wire.TypeError {
			t.Fatalf("a Hello dribbled over %v was answered with %v", 100*time.Millisecond*time.Duration(len(hello)), frame.Type)
		}
	}
	expectServing(t, addr, b)
}

// TestHostileClientThatNeverReads produces without reading a single ack
// until the broker stops reading it; a well-behaved client is served all
// the while, and the broker's memory for the stalled one stays bounded.
func TestHostileClientThatNeverReads(t *testing.T) {
	cfg := hostileConfig()
	cfg.session.Window = 64
	cfg.session.ConnectionOutput = 64 << 10
	addr, b := testBroker(t, cfg)
	stalled := dialRaw(t, addr)
	stalled.handshake()
	body, crc := recordBody("never read")
	frame := wire.Append(nil, 1, &wire.Produce{Stream: []byte("stalled"), BodyCRC: crc, Body: body})
	sent := 0
	_ = stalled.conn.SetWriteDeadline(time.Now().Add(3 * time.Second))
	writer := bufio.NewWriterSize(stalled.conn, 64<<10)
	for range 200_000 {
		if _, err := writer.Write(frame); err != nil {
			break // the broker stopped reading: backpressure reached the socket
		}
		sent++
	}
	t.Logf("the stalled client got %d produce frames into the socket before it filled", sent)
	expectServing(t, addr, b)
}

// expectServing checks the broker still acknowledges a well-behaved
// producer promptly after the abuse, and that nothing was frozen.
func expectServing(t *testing.T, addr string, b *broker.Broker) {
	t.Helper()
	c := dialRaw(t, addr)
	c.handshake()
	body, crc := recordBody("after the abuse")
	for i := range 20 {
		c.send(uint32(100+i), &wire.Produce{Stream: []byte("healthy"), BodyCRC: crc, Body: body})
	}
	for range 20 {
		frame := c.read()
		if frame.Type != wire.TypeProduceAck {
			e, _ := wire.DecodeError(frame.Body)
			t.Fatalf("a healthy producer got %v after the abuse: %+v", frame.Type, e)
		}
	}
	for _, l := range allLogs(t, b) {
		if err := l.Err(); err != nil {
			t.Fatalf("log %s froze: %v", l.ID(), err)
		}
	}
}
