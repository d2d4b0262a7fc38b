package session

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/wire"
)

func TestMain(m *testing.M) {
	if backend := os.Getenv("IRONBUS_TEST_LOOP"); backend != "" {
		if err := loop.Available(backend); err != nil {
			fmt.Fprintf(os.Stderr, "SKIP: the %s backend does not run here: %v\n", backend, err)
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

// testBackend is the network backend the suite runs on: IRONBUS_TEST_LOOP
// names one (the Makefile runs the suite once per backend), else auto.
func testBackend() string {
	if name := os.Getenv("IRONBUS_TEST_LOOP"); name != "" {
		return name
	}
	return loop.BackendAuto
}

// testConfig configures a test broker: its engine and its sessions.
type testConfig struct {
	engine  broker.Config
	session Config
}

// testBroker runs a broker on a loopback listener: this package's handler
// over an engine the test opens itself, not a server.Server (which
// imports this package), so a test can inject file-system faults into the
// engine and inspect its logs.
func testBroker(t testing.TB, cfg testConfig) (string, *broker.Broker) {
	t.Helper()
	return testBrokerOn(t, cfg, loop.Config{})
}

// testHandler is the wire handler over b.
func testHandler(t testing.TB, b *broker.Broker, cfg Config) *Handler {
	t.Helper()
	handler, err := NewHandler(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return handler
}

// testBrokerOn is testBroker with the network backend configured.
func testBrokerOn(t testing.TB, cfg testConfig, network loop.Config) (string, *broker.Broker) {
	t.Helper()
	if cfg.engine.DataDir == "" {
		cfg.engine.DataDir = t.TempDir()
	}
	b, err := broker.Open(cfg.engine)
	if err != nil {
		t.Fatal(err)
	}
	server, _, err := loop.New(testBackend(), network, testHandler(t, b, cfg.session))
	if err != nil {
		t.Fatal(err)
	}
	bound, err := server.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = server.Serve() }()
	t.Cleanup(func() {
		b.Drain()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := server.Shutdown(ctx); err != nil {
			server.CloseAll()
		}
		_ = b.Close()
	})
	return bound.String(), b
}

// testLog is a stream partition's log, which must exist.
func testLog(t testing.TB, b *broker.Broker, stream string, partition uint32) *segment.Log {
	t.Helper()
	served, err := b.Stream([]byte(stream))
	if err != nil {
		t.Fatal(err)
	}
	part, err := served.Partition(partition)
	if err != nil {
		t.Fatal(err)
	}
	return part.Log()
}

// allLogs is every open log of every stream.
func allLogs(t testing.TB, b *broker.Broker) []*segment.Log {
	t.Helper()
	var logs []*segment.Log
	for _, info := range b.Streams() {
		served, err := b.Stream([]byte(info.Name))
		if err != nil {
			t.Fatal(err)
		}
		for p := range served.Partitions() {
			if part, err := served.Partition(p); err == nil {
				logs = append(logs, part.Log())
			}
		}
	}
	return logs
}

// rawClient speaks frames directly, so tests control every byte.
type rawClient struct {
	t    testing.TB
	conn net.Conn
	in   *bufio.Reader
	buf  []byte
}

func dialRaw(t testing.TB, addr string) *rawClient {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &rawClient{t: t, conn: conn, in: bufio.NewReaderSize(conn, 1<<20)}
}

func (c *rawClient) send(id uint32, m wire.Message) {
	c.t.Helper()
	if _, err := c.conn.Write(wire.Append(nil, id, m)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawClient) read() wire.Frame {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	head := make([]byte, 4)
	if _, err := io.ReadFull(c.in, head); err != nil {
		c.t.Fatalf("reading a frame: %v", err)
	}
	length := uint32(head[0]) | uint32(head[1])<<8 | uint32(head[2])<<16 | uint32(head[3])<<24
	rest := make([]byte, length)
	if _, err := io.ReadFull(c.in, rest); err != nil {
		c.t.Fatal(err)
	}
	frame, _, err := wire.ParseFrame(append(head, rest...), wire.DefaultMaxFrame)
	if err != nil {
		c.t.Fatal(err)
	}
	return frame
}

func (c *rawClient) handshake() wire.Welcome {
	c.t.Helper()
	c.send(0, &wire.Hello{MinVersion: 1, MaxVersion: 1, Capabilities: wire.Capabilities, MaxFrame: wire.DefaultMaxFrame, Window: 1024, ClientName: "test"})
	frame := c.read()
	if frame.Type != wire.TypeWelcome {
		c.t.Fatalf("handshake answered %v", frame.Type)
	}
	welcome, err := wire.DecodeWelcome(frame.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return welcome
}

func recordBody(payload string) ([]byte, uint32) {
	body, _ := record.AppendBody(nil, record.Body{Key: []byte("k"), Payload: []byte(payload)})
	return body, record.Checksum(body)
}

func TestProduceAcksAreDurableOffsets(t *testing.T) {
	addr, _ := testBroker(t, testConfig{})
	c := dialRaw(t, addr)
	c.handshake()
	const n = 500
	var batch []byte
	for i := 1; i <= n; i++ {
		body, crc := recordBody(fmt.Sprint("m", i))
		batch = wire.Append(batch, uint32(i), &wire.Produce{Stream: []byte("orders"), BodyCRC: crc, Body: body})
	}
	if _, err := c.conn.Write(batch); err != nil {
		t.Fatal(err)
	}
	seen := map[uint32]uint64{}
	for len(seen) < n {
		frame := c.read()
		if frame.Type != wire.TypeProduceAck {
			e, _ := wire.DecodeError(frame.Body)
			t.Fatalf("got %v %v", frame.Type, e)
		}
		ack, err := wire.DecodeProduceAck(frame.Body)
		if err != nil {
			t.Fatal(err)
		}
		seen[frame.RequestID] = ack.Offset
	}
	for i := uint32(1); i <= n; i++ {
		if seen[i] != uint64(i-1) {
			t.Fatalf("request %d acked at offset %d", i, seen[i])
		}
	}
}

func TestBadInputGetsStructuredErrors(t *testing.T) {
	addr, _ := testBroker(t, testConfig{})
	c := dialRaw(t, addr)
	c.handshake()
	body, crc := recordBody("x")
	c.send(7, &wire.Produce{Stream: []byte("orders"), BodyCRC: crc + 1, Body: body})
	expectError(t, c.read(), 7, wire.CodeChecksum)
	c.send(8, &wire.Produce{Stream: []byte("../etc"), BodyCRC: crc, Body: body})
	expectError(t, c.read(), 8, wire.CodeInvalidName)
	c.send(9, &wire.Produce{Stream: []byte("orders"), Partition: 3, BodyCRC: crc, Body: body})
	expectError(t, c.read(), 9, wire.CodeNotFound)
	if _, err := c.conn.Write(wire.AppendFrame(nil, 99, 10, nil)); err != nil {
		t.Fatal(err)
	}
	expectError(t, c.read(), 10, wire.CodeUnknownType)
	c.send(11, &wire.Ping{Payload: 5}) // the connection survived all of that
	if frame := c.read(); frame.Type != wire.TypePong {
		t.Fatalf("after recoverable errors: %v", frame.Type)
	}
	if _, err := c.conn.Write([]byte{2, 0, 0, 0, 1, 2}); err != nil { // length below the minimum
		t.Fatal(err)
	}
	frame := c.read()
	e := expectError(t, frame, 0, wire.CodeMalformed)
	if !e.Closes {
		t.Fatal("a malformed envelope must close the connection")
	}
	if _, err := c.in.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("connection still open after a malformed frame: %v", err)
	}
}

func TestFrameBeforeHelloCloses(t *testing.T) {
	addr, _ := testBroker(t, testConfig{})
	c := dialRaw(t, addr)
	c.send(1, &wire.Ping{})
	expectError(t, c.read(), 1, wire.CodeHandshake)
}

func expectError(t *testing.T, frame wire.Frame, id uint32, code wire.Code) *wire.Error {
	t.Helper()
	if frame.Type != wire.TypeError || frame.RequestID != id {
		t.Fatalf("want Error for request %d, got %v for %d", id, frame.Type, frame.RequestID)
	}
	e, err := wire.DecodeError(frame.Body)
	if err != nil || e.Code != code {
		t.Fatalf("want code %v, got %+v (%v)", code, e, err)
	}
	return e
}

func TestConsumeLeasesAckAndRelease(t *testing.T) {
	addr, _ := testBroker(t, testConfig{})
	producer := dialRaw(t, addr)
	producer.handshake()
	for i := 1; i <= 5; i++ {
		body, crc := recordBody(fmt.Sprint("m", i))
		producer.send(uint32(i), &wire.Produce{Stream: []byte("jobs"), BodyCRC: crc, Body: body})
		producer.read()
	}
	worker := dialRaw(t, addr)
	worker.handshake()
	worker.send(1, &wire.Consume{Stream: []byte("jobs"), Group: []byte("w"), Mode: wire.ModeWork, MaxRecords: 3})
	var leased []wire.Deliver
	for {
		frame := worker.read()
		if frame.Type == wire.TypeConsumeEnd {
			break
		}
		d, err := wire.DecodeDeliver(frame.Body)
		if err != nil || frame.Type != wire.TypeDeliver {
			t.Fatalf("%v %v", frame.Type, err)
		}
		d.Body = append([]byte(nil), d.Body...)
		leased = append(leased, d)
	}
	if len(leased) != 3 || leased[0].Offset != 0 || leased[0].Attempt != 1 {
		t.Fatalf("leased %+v", leased)
	}
	worker.send(2, &wire.Ack{Stream: []byte("jobs"), Group: []byte("w"), Op: wire.AckDone,
		Entries: []wire.AckEntry{{Offset: 0, Lease: leased[0].Lease}, {Offset: 1, Lease: 12345}}})
	frame := worker.read()
	result, err := wire.DecodeAckResult(frame.Body)
	if err != nil || len(result.Statuses) != 2 || result.Statuses[0] != wire.AckOK || result.Statuses[1] != wire.AckStale {
		t.Fatalf("ack result %+v %v", result, err)
	}
	_ = worker.conn.Close() // offsets 1 and 2 go back at once
	other := dialRaw(t, addr)
	other.handshake()
	other.send(1, &wire.Consume{Stream: []byte("jobs"), Group: []byte("w"), Mode: wire.ModeWork, MaxRecords: 10, WaitMs: 2000})
	var offsets []uint64
	for {
		frame := other.read()
		if frame.Type == wire.TypeConsumeEnd {
			break
		}
		d, _ := wire.DecodeDeliver(frame.Body)
		offsets = append(offsets, d.Offset)
	}
	if len(offsets) == 0 {
		t.Fatal("nothing redelivered after the first worker disconnected")
	}
}

// TestUnknownStreamIsNotFound: consume, open group, every ack op and the
// admin verbs answer not_found naming the stream, and create nothing;
// a publish creates the stream unless the engine is told not to.
func TestUnknownStreamIsNotFound(t *testing.T) {
	for _, disabled := range []bool{false, true} {
		t.Run(fmt.Sprint("auto-create off=", disabled), func(t *testing.T) {
			addr, b := testBroker(t, testConfig{engine: broker.Config{DisableAutoCreateStreams: disabled}})
			c := dialRaw(t, addr)
			c.handshake()
			requests := []wire.Message{
				&wire.Consume{Stream: []byte("typo"), Group: []byte("g"), Mode: wire.ModeWork, MaxRecords: 1},
				&wire.Consume{Stream: []byte("typo"), Partition: wire.PartitionAll, Group: []byte("g"), Mode: wire.ModeStreaming, MaxRecords: 1},
				&wire.Consume{Stream: []byte(".dlq.typo"), Group: []byte("g"), Mode: wire.ModeWork, MaxRecords: 1},
				&wire.OpenGroup{Stream: []byte("typo"), Group: []byte("g"), Mode: wire.ModeBroadcast},
				&wire.Ack{Stream: []byte("typo"), Group: []byte("g"), Op: wire.AckDone, Entries: []wire.AckEntry{{Offset: 0, Lease: 1}}},
				&wire.Ack{Stream: []byte("typo"), Group: []byte("g"), Op: wire.AckCumulative, Entries: []wire.AckEntry{{Offset: 0}}},
				&wire.Ack{Stream: []byte("typo"), Group: []byte("g"), Op: wire.AckCommit, Entries: []wire.AckEntry{{Offset: 0}}},
				&wire.GroupAdmin{Op: wire.GroupOpList, Stream: []byte("typo")},
				&wire.GroupAdmin{Op: wire.GroupOpReset, Stream: []byte("typo"), Group: []byte("g")},
				&wire.DeadLetterAdmin{Op: wire.DeadLetterOpList, Stream: []byte("typo")},
				&wire.DeadLetterAdmin{Op: wire.DeadLetterOpRedrive, Stream: []byte("typo"), Max: 1},
				&wire.StreamAdmin{Op: wire.StreamOpInfo, Stream: []byte("typo")},
				&wire.StreamAdmin{Op: wire.StreamOpRemove, Flags: wire.StreamForce, Stream: []byte("typo")},
				&wire.StreamAdmin{Op: wire.StreamOpBind, Stream: []byte("typo"), Pattern: []byte("typo.>")},
			}
			for i, m := range requests {
				id := uint32(i + 1)
				c.send(id, m)
				if e := expectError(t, c.read(), id, wire.CodeNotFound); !strings.Contains(e.Message, "typo") {
					t.Fatalf("%T: %q does not name the stream", m, e.Message)
				}
			}
			if streams := b.Streams(); len(streams) != 0 {
				t.Fatalf("requests about an unknown stream created %+v", streams)
			}
			body, crc := recordBody("x")
			c.send(100, &wire.Produce{Stream: []byte("typo"), BodyCRC: crc, Body: body})
			frame := c.read()
			if disabled {
				expectError(t, frame, 100, wire.CodeNotFound)
				return
			}
			if frame.Type != wire.TypeProduceAck {
				t.Fatalf("a first publish answered %v", frame.Type)
			}
		})
	}
}
