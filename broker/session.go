package broker

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/wire"
)

// maxRun bounds how many produce requests go into one AppendBatch.
const maxRun = 1024

// session serves one connection. Data runs on the loop's reading goroutine;
// consume requests that wait run on their own goroutines; replies go
// through the writer.
type session struct {
	broker *Broker
	conn   loop.Conn
	out    *writer
	ctx    context.Context
	cancel context.CancelFunc

	handshook    bool
	capabilities uint64 // negotiated in Hello
	clientFrame  uint32 // largest frame the client accepts

	// The current produce run: records for one log, in request order.
	runLog       *segment.Log
	runPartition uint32
	bodies       [][]byte
	crcs         []uint32
	ids          []uint32

	entries  []wire.AckEntry
	statuses []uint8

	consumers sync.WaitGroup
	groupsMu  sync.Mutex
	groups    map[*consumer.Group]struct{}
}

var _ loop.Session = (*session)(nil)

func newSession(b *Broker, conn loop.Conn) *session {
	ctx, cancel := context.WithCancel(context.Background())
	return &session{broker: b, conn: conn, out: newWriter(conn, int(b.cfg.Window)), ctx: ctx, cancel: cancel,
		bodies: make([][]byte, 0, maxRun), crcs: make([]uint32, 0, maxRun), ids: make([]uint32, 0, maxRun),
		groups: map[*consumer.Group]struct{}{}}
}

// Data implements loop.Session: it handles every whole frame in in.
func (s *session) Data(in []byte) (int, error) {
	consumed := 0
	for {
		frame, n, err := wire.ParseFrame(in[consumed:], s.broker.cfg.MaxFrame)
		if errors.Is(err, wire.ErrIncomplete) {
			break
		}
		if err != nil {
			s.flushRun()
			code := wire.CodeMalformed
			if errors.Is(err, wire.ErrFrameTooLarge) {
				code = wire.CodeFrameTooLarge
			}
			return consumed, s.fatal(0, wire.NewError(code, "%v", err))
		}
		consumed += n
		if err := s.handle(frame); err != nil {
			s.flushRun()
			return consumed, err
		}
	}
	s.flushRun()
	return consumed, nil
}

// handle dispatches one frame. An error ends the connection.
func (s *session) handle(frame wire.Frame) error {
	if !s.handshook {
		if frame.Type != wire.TypeHello {
			return s.fatal(frame.RequestID, wire.NewError(wire.CodeHandshake, "the first frame must be Hello, got %v", frame.Type))
		}
		return s.hello(frame)
	}
	if frame.Type == wire.TypeProduce {
		return s.produce(frame)
	}
	s.flushRun() // keep produce runs ahead of anything that follows them
	switch frame.Type {
	case wire.TypeHello:
		return s.fatal(frame.RequestID, wire.NewError(wire.CodeHandshake, "a second Hello"))
	case wire.TypeConsume:
		return s.consume(frame)
	case wire.TypeAck:
		return s.ack(frame)
	case wire.TypePing:
		payload, err := wire.DecodePing(frame.Body)
		if err != nil {
			return s.malformed(frame, err)
		}
		s.out.frame(wire.Append(nil, frame.RequestID, &wire.Pong{Payload: payload}))
	case wire.TypePong:
	default:
		s.reply(frame.RequestID, wire.NewError(wire.CodeUnknownType, "frame type %v is not a request this broker serves", frame.Type))
	}
	return nil
}

func (s *session) hello(frame wire.Frame) error {
	hello, err := wire.DecodeHello(frame.Body)
	if err != nil {
		return s.fatal(frame.RequestID, wire.NewError(wire.CodeMalformed, "%v", err))
	}
	if hello.MinVersion > wire.ProtocolVersion || hello.MaxVersion < wire.ProtocolVersion {
		return s.fatal(frame.RequestID, wire.NewError(wire.CodeVersion,
			"this broker speaks protocol version %d; the client offers %d..%d", wire.ProtocolVersion, hello.MinVersion, hello.MaxVersion))
	}
	if hello.MaxFrame < wire.MinMaxFrame {
		return s.fatal(frame.RequestID, wire.NewError(wire.CodeHandshake,
			"Hello max_frame %d is below the %d-byte minimum", hello.MaxFrame, wire.MinMaxFrame))
	}
	cfg := s.broker.cfg
	s.handshook = true
	s.capabilities = hello.Capabilities & wire.Capabilities
	s.clientFrame = hello.MaxFrame
	s.conn.SetReadTimeout(cfg.IdleTimeout)
	s.out.frame(wire.Append(nil, frame.RequestID, &wire.Welcome{Version: wire.ProtocolVersion,
		Capabilities: hello.Capabilities & wire.Capabilities, MaxFrame: cfg.MaxFrame, Window: cfg.Window,
		MaxRecordBytes: cfg.Storage.MaxRecordBytes, IdleTimeoutMs: uint32(cfg.IdleTimeout.Milliseconds()),
		ServerVersion: cfg.Version}))
	return nil
}

// reply queues a structured error answering one request.
func (s *session) reply(requestID uint32, e *wire.Error) {
	s.out.frame(wire.Append(nil, requestID, e))
}

// malformed answers a body that does not decode: the peer and the broker
// disagree about the protocol, so the connection is not worth keeping.
func (s *session) malformed(frame wire.Frame, err error) error {
	return s.fatal(frame.RequestID, wire.NewError(wire.CodeMalformed, "%v", err))
}

// fatal sends an error that closes the connection and returns it, so the
// loop stops reading.
func (s *session) fatal(requestID uint32, e *wire.Error) error {
	e.Closes = true
	s.reply(requestID, e)
	s.broker.cfg.Logger.Warn("closing a connection after a protocol error", "remote", s.conn.RemoteAddr(),
		"code", e.Code.String(), "request", requestID, "error", e.Message)
	return e
}

// produce validates one record and adds it to the current run.
func (s *session) produce(frame wire.Frame) error {
	p, err := wire.DecodeProduce(frame.Body)
	if err != nil {
		return s.malformed(frame, err)
	}
	l, werr := s.broker.logFor(p.Stream, p.Partition)
	if werr != nil {
		s.reply(frame.RequestID, werr)
		return nil
	}
	if werr := s.validateRecord(p); werr != nil {
		s.reply(frame.RequestID, werr)
		return nil
	}
	if l != s.runLog || p.Partition != s.runPartition {
		s.flushRun()
		s.runLog, s.runPartition = l, p.Partition
	}
	s.bodies = append(s.bodies, p.Body)
	s.crcs = append(s.crcs, p.BodyCRC)
	s.ids = append(s.ids, frame.RequestID)
	// A run never needs more credits than the window holds, or it could
	// never acquire them.
	if len(s.ids) == min(maxRun, int(s.broker.cfg.Window)) {
		s.flushRun()
	}
	return nil
}

func (s *session) validateRecord(p wire.Produce) *wire.Error {
	if max := s.broker.cfg.Storage.MaxRecordBytes; max > 0 && len(p.Body) > int(max) {
		return wire.NewError(wire.CodeRecordTooLarge, "record body of %d bytes, maximum %d", len(p.Body), max)
	}
	if crc := format.CRC(p.Body); crc != p.BodyCRC {
		return wire.NewError(wire.CodeChecksum, "record body CRC32C is %08x, the frame says %08x: damaged in transit", crc, p.BodyCRC)
	}
	if _, err := format.DecodeBody(p.Body); err != nil {
		return wire.NewError(wire.CodeInvalidRequest, "record body: %v", err)
	}
	return nil
}

// flushRun appends the current run with one AppendBatch and hands its
// ticket to the writer. Waiting for credits and for room in the log's
// staging buffer is the connection's backpressure.
func (s *session) flushRun() {
	n := len(s.ids)
	if n == 0 {
		return
	}
	defer func() {
		clear(s.bodies) // drop references into the read buffer
		s.bodies, s.crcs, s.ids = s.bodies[:0], s.crcs[:0], s.ids[:0]
	}()
	if !s.out.credits.acquire(n) {
		return // the connection broke; nobody will read the answers
	}
	ticket, err := s.runLog.AppendBatch(s.ctx, s.bodies, s.crcs)
	if err != nil {
		s.out.credits.release(n)
		failure := storageError(err)
		for _, id := range s.ids {
			s.reply(id, failure)
		}
		return
	}
	s.out.pushAcks(ticket, s.runPartition, s.ids)
}

// ReadStopped implements loop.Session: finish in-flight work, then close.
func (s *session) ReadStopped(cause error) {
	s.cancel() // end long polls
	s.consumers.Wait()
	s.groupsMu.Lock()
	for g := range s.groups {
		g.Release(s.conn.ID()) // its leases go back at once
	}
	s.groupsMu.Unlock()
	var timeout interface{ Timeout() bool }
	var protocol *wire.Error
	switch {
	case cause == nil, errors.Is(cause, io.EOF), errors.Is(cause, net.ErrClosed), errors.As(cause, &protocol):
	case errors.As(cause, &timeout) && timeout.Timeout():
		s.reply(0, wire.NewError(wire.CodeTimeout, "no frame within the timeout; closing"))
	default:
		s.broker.cfg.Logger.Warn("connection read failed", "remote", s.conn.RemoteAddr(), "error", cause.Error())
	}
	s.out.close()
	s.broker.connections.Add(-1)
}

// waitDeadline bounds a consume's wait.
func (s *session) waitDeadline(waitMs uint32) time.Time {
	wait := min(time.Duration(waitMs)*time.Millisecond, s.broker.cfg.MaxConsumeWait)
	return time.Now().Add(wait)
}
