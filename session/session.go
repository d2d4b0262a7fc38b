package session

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/subject"
	"github.com/ironbus/ironbus/wire"
)

// maxRun bounds how many produce requests go into one AppendBatch.
const maxRun = 1024

// session serves one connection. Data runs on the loop's reading goroutine;
// consume requests that wait run on their own goroutines; replies go
// through the writer.
type session struct {
	cfg    *Config
	engine *broker.Broker
	// client is this connection as the engine knows it: its member id in
	// groups and its own partition for keyless records.
	client *broker.Connection
	conn   loop.Conn
	// inline is conn when its backend lets Data commit a lone record and
	// answer it itself (flushRunLast); nil otherwise.
	inline loop.InlineConn
	out    *writer
	ctx    context.Context
	cancel context.CancelFunc

	handshook bool
	// handshake settles the handshake once (handshake.go): its deadline
	// ends it as a whole, not each read, so a peer that dribbles a byte at
	// a time (slowloris) is cut off too.
	handshake    *handshakeGuard
	capabilities uint64 // negotiated in Hello
	clientFrame  uint32 // largest frame the client accepts
	// Security (auth.go): the authenticated identity (nil without auth),
	// its publish quota, the place it holds in its connection quotas
	// (quota.go), and the half-open slot of the pre-auth gate it holds
	// until authenticated (nil: none).
	identity   *security.Identity
	quota      *security.PublishQuota
	connection *security.Connection
	admission  *security.Admission
	// untrack stops the Authorizer watching this session (nil: never
	// authenticated).
	untrack func()
	// names maps the identity's account's names to the engine's
	// (accounts.go); the zero value, the default account's, without auth.
	names security.Namespace
	// imported holds the imports this connection has read (audited once
	// each). Reader goroutine only.
	imported map[string]bool
	// auditMu guards reading and auditHeld: while Data runs (reading),
	// an essential audit event the full audit queue cannot take is held
	// here instead of blocking the reader, and the connection waits for
	// it after the frame (record, holdForAudit).
	auditMu   sync.Mutex
	reading   bool
	auditHeld []security.AuditEvent

	// The current produce run: records for one partition, in request
	// order, starting at runStart in the bytes Data was given.
	runPart    *broker.Partition
	runStart   int
	frameStart int // where the frame being handled begins in Data's bytes
	runBytes   int
	bodies     [][]byte
	crcs       []uint32
	ids        []uint32
	// silent marks the run's no-ack records (silentCount of them), which
	// get no answer; checked holds every record's check, used when
	// runChecked (a record asks for one, or the partition tracks its
	// records' subjects).
	silent      []bool
	silentCount int
	checked     broker.CheckedRun
	runChecked  bool
	// producers are the producer ids this connection initialised, with
	// their epochs (checked.go).
	producers map[uint64]uint32
	// batch is the atomic batch being collected (batch.go).
	batch      openBatch
	outputFull bool
	// runLease admits the run's one large record (see admitLarge); it is
	// released when the record is written.
	runLease arena.Lease
	// reserved is a large-record admission won while reading was paused,
	// kept for the record when its frame is handed back.
	reserved arena.Lease

	// sticky is the engine's number for this connection: its keyless
	// records to PartitionAny go to partition sticky % count (place.go).
	sticky uint32
	// routed holds the stream a subject routed to, as bytes for the
	// permission check (reused: no allocation per record).
	routed []byte
	// produceName and routeKey hold a record's stream and routing subject
	// as the engine names them (reused: no allocation per record).
	produceName []byte
	routeKey    []byte
	// subjects caches where this connection's subjects route (place.go).
	subjects subject.Cache

	entries  []wire.AckEntry
	statuses []uint8
	// answer holds the acks of a run committed inline, until written.
	answer []byte

	consumers sync.WaitGroup
	groupsMu  sync.Mutex
	// groups this connection consumed, each with its streaming read
	// position (unused by the other types): released when it closes.
	groups map[*broker.Group]uint64
}

var (
	_ loop.Session    = (*session)(nil)
	_ loop.FrameSizer = (*session)(nil)
)

func newSession(h *Handler, conn loop.Conn, client *broker.Connection, handshake *handshakeGuard) *session {
	ctx, cancel := context.WithCancel(context.Background())
	cfg := &h.cfg
	s := &session{cfg: cfg, engine: h.engine, client: client, conn: conn, out: newWriter(conn, int(cfg.Window), cfg.ConnectionOutput),
		ctx: ctx, cancel: cancel, bodies: make([][]byte, 0, maxRun), crcs: make([]uint32, 0, maxRun), ids: make([]uint32, 0, maxRun),
		groups: map[*broker.Group]uint64{}, sticky: client.Sticky(), handshake: handshake}
	s.inline, _ = conn.(loop.InlineConn)
	return s
}

// frameLimit is the largest frame accepted now: until Hello is answered,
// only what a handshake needs.
func (s *session) frameLimit() uint32 {
	if s.handshook {
		return s.cfg.MaxFrame
	}
	return min(maxHandshakeFrame, s.cfg.MaxFrame)
}

// Data implements loop.Session: it handles every whole frame in in, and
// never blocks. When a run of produce requests cannot be appended (the
// window or the log's staging buffer is full) it pauses reading and
// returns the position where that run began: the backend hands those bytes
// back after the resume. Every other effect (a reply, a consume) happens
// only while no run is pending, so nothing is ever done twice.
func (s *session) Data(in []byte) (int, error) {
	if s.cfg.Audit == nil {
		return s.data(in)
	}
	s.setReading(true)
	defer s.setReading(false)
	return s.data(in)
}

func (s *session) data(in []byte) (int, error) {
	consumed := 0
	s.runStart = 0
	for {
		frame, n, err := wire.ParseFrame(in[consumed:], s.frameLimit())
		if errors.Is(err, wire.ErrIncomplete) {
			break
		}
		if err != nil {
			if !s.flushRun() {
				return s.runStart, nil
			}
			code, text := wire.CodeMalformed, err.Error()
			if errors.Is(err, wire.ErrFrameTooLarge) {
				code = wire.CodeFrameTooLarge
				if !s.handshook {
					text += " before the handshake"
				}
			}
			return consumed, s.fatal(0, wire.NewError(code, "%s", text))
		}
		if s.frameStart = consumed; len(s.ids) == 0 {
			s.runStart = consumed
		}
		outcome, err := s.handle(frame)
		switch {
		case outcome == outcomePaused:
			return s.runStart, nil
		case err != nil:
			return consumed + n, err
		}
		consumed += n
		if outcome == outcomeStop {
			return consumed, nil
		}
		if outcome == outcomePauseAfter {
			if !s.flushRun() {
				return s.runStart, nil
			}
			s.pauseForOutput()
			return consumed, nil
		}
	}
	// All of in was handled and the peer sent nothing more: if this run
	// is a lone record or a few, the peer is most likely waiting for
	// them (flushRunLast).
	if !s.flushRunLast(consumed == len(in)) {
		return s.runStart, nil
	}
	return consumed, nil
}

// FrameSize implements loop.FrameSizer: the backend leases a large frame's
// buffer at its exact size.
func (s *session) FrameSize(head []byte) int {
	_, total, err := wire.ParseFrame(head, s.frameLimit())
	if errors.Is(err, wire.ErrIncomplete) && total > wire.HeaderSize {
		return total
	}
	return 0
}

// outcome says what Data does after a frame.
type outcome int

const (
	outcomeDone       outcome = iota
	outcomePaused             // the frame was not handled; reading is paused
	outcomePauseAfter         // handled, but the reply queue is full: pause now
	outcomeStop               // handled; reading is paused until a goroutine resumes it
)

// handle dispatches one frame. An error ends the connection.
func (s *session) handle(frame wire.Frame) (outcome, error) {
	result, err := s.dispatch(frame)
	if held := s.takeHeld(); len(held) > 0 {
		return s.holdForAudit(held, result, err)
	}
	return result, err
}

func (s *session) dispatch(frame wire.Frame) (outcome, error) {
	if !s.handshook {
		if frame.Type != wire.TypeHello {
			return outcomeDone, s.fatal(frame.RequestID, wire.NewError(wire.CodeHandshake, "the first frame must be Hello, got %v", frame.Type))
		}
		return s.hello(frame)
	}
	if frame.Type == wire.TypeProduce {
		return s.produce(frame)
	}
	// Anything else is handled only once the produce run before it is in.
	if !s.flushRun() {
		return outcomePaused, nil
	}
	var err error
	switch frame.Type {
	case wire.TypeHello:
		err = s.fatal(frame.RequestID, wire.NewError(wire.CodeHandshake, "a second Hello"))
	case wire.TypeConsume:
		err = s.consume(frame)
	case wire.TypeAck:
		err = s.ack(frame)
	case wire.TypeOpenGroup:
		err = s.openGroupRequest(frame)
	case wire.TypeGroupAdmin, wire.TypeDeadLetterAdmin:
		err = s.adminRequest(frame)
	case wire.TypeStreamAdmin:
		err = s.streamAdminRequest(frame)
	case wire.TypeProducerInit:
		err = s.producerInit(frame)
	case wire.TypeTxnBegin:
		err = s.txnBegin(frame)
	case wire.TypeTxnEnd:
		err = s.txnEnd(frame)
	case wire.TypeClusterInfo:
		err = s.clusterInfo(frame)
	case wire.TypeLeaderTransfer:
		err = s.leaderTransfer(frame)
	case wire.TypePing:
		err = s.ping(frame)
	case wire.TypePong:
	default:
		s.reply(frame.RequestID, wire.NewError(wire.CodeUnknownType, "frame type %v is not a request this broker serves", frame.Type))
	}
	if err == nil && s.outputFull {
		s.outputFull = false
		return outcomePauseAfter, nil
	}
	return outcomeDone, err
}

func (s *session) ping(frame wire.Frame) error {
	payload, err := wire.DecodePing(frame.Body)
	if err != nil {
		return s.malformed(frame, err)
	}
	s.send(wire.Append(nil, frame.RequestID, &wire.Pong{Payload: payload}))
	return nil
}

func (s *session) hello(frame wire.Frame) (outcome, error) {
	hello, err := wire.DecodeHello(frame.Body)
	if err != nil {
		return outcomeDone, s.fatal(frame.RequestID, wire.NewError(wire.CodeMalformed, "%v", err))
	}
	if hello.MinVersion > wire.ProtocolVersion || hello.MaxVersion < wire.ProtocolVersion {
		return outcomeDone, s.fatal(frame.RequestID, wire.NewError(wire.CodeVersion,
			"this broker speaks protocol version %d; the client offers %d..%d", wire.ProtocolVersion, hello.MinVersion, hello.MaxVersion))
	}
	if hello.MaxFrame < wire.MinMaxFrame {
		return outcomeDone, s.fatal(frame.RequestID, wire.NewError(wire.CodeHandshake,
			"Hello max_frame %d is below the %d-byte minimum", hello.MaxFrame, wire.MinMaxFrame))
	}
	if !s.handshake.hello() {
		return outcomeDone, net.ErrClosed // the deadline or an eviction won: the connection is closing
	}
	welcome := func() {
		cfg := s.cfg
		s.handshook = true
		s.releaseGate()
		served := wire.Capabilities
		if cfg.Cluster != nil {
			served |= wire.CapCluster
		}
		s.capabilities = hello.Capabilities & served
		s.clientFrame = hello.MaxFrame
		s.conn.SetReadTimeout(cfg.IdleTimeout)
		s.send(wire.Append(nil, frame.RequestID, &wire.Welcome{Version: wire.ProtocolVersion,
			Capabilities: s.capabilities, MaxFrame: cfg.MaxFrame, Window: cfg.Window,
			MaxRecordBytes: s.engine.MaxRecordBytes(), IdleTimeoutMs: uint32(cfg.IdleTimeout.Milliseconds()),
			ServerVersion: s.engine.Version()}))
	}
	if s.cfg.Auth != nil {
		s.authenticateHello(hello, frame.RequestID, welcome)
		return outcomeStop, nil
	}
	welcome()
	return outcomeDone, nil
}

// reply queues a structured error answering one request.
func (s *session) reply(requestID uint32, e *wire.Error) {
	s.send(wire.Append(nil, requestID, s.hide(e)))
}

// send queues encoded frames; a full reply queue makes Data pause after
// the current frame.
func (s *session) send(b []byte) {
	if s.out.frame(b) {
		s.outputFull = true
	}
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
	s.cfg.Logger.Warn("closing a connection after a protocol error", "remote", s.conn.RemoteAddr(),
		"code", e.Code.String(), "request", requestID, "error", e.Message)
	return e
}

// produce validates one record and adds it to the current run. A record
// that fails validation is answered only after the run before it is in.
func (s *session) produce(frame wire.Frame) (outcome, error) {
	p, err := wire.DecodeProduce(frame.Body)
	silent := p.Flags&wire.ProduceNoAck != 0
	if err != nil {
		if !s.flushRun() {
			return outcomePaused, nil
		}
		if errors.Is(err, wire.ErrUnsupportedOption) {
			s.refuse(frame.RequestID, silent, wire.NewError(wire.CodeUnsupportedOption, "%s; nothing was stored", err))
			return outcomeDone, nil
		}
		return outcomeDone, s.malformed(frame, err)
	}
	part, view, werr, closes := s.placeRecord(&p)
	if closes {
		if !s.flushRun() {
			return outcomePaused, nil
		}
		return outcomeDone, s.fatal(frame.RequestID, werr)
	}
	if werr == nil {
		werr = s.chargeQuota(len(p.Body), part)
	}
	if werr == nil && p.Options.Transaction {
		return s.produceTransactional(frame, &p, part)
	}
	var check broker.Check
	asks := false
	if werr == nil {
		check, asks, werr = s.recordCheck(&p, &view)
	}
	if werr != nil {
		if !s.flushRun() {
			return outcomePaused, nil
		}
		s.refuse(frame.RequestID, silent, werr)
		return outcomeDone, nil
	}
	frameBytes := record.FrameSize(len(p.Body))
	if p.Options.Batch {
		return s.batchRecord(frame, &p, part, check, silent, frameBytes)
	}
	staging := s.engine.StagingBytes()
	// A run goes in whole, so one larger than the staging buffer would
	// stage past it: such a run is cut, and a record that alone is larger
	// goes in alone, admitted by the large-record pool.
	if part != s.runPart || s.runBytes+frameBytes > staging {
		if !s.flushRun() {
			return outcomePaused, nil
		}
		// The new run begins at this frame: should it be handed back
		// later, the run just appended must not be.
		s.runPart, s.runStart = part, s.frameStart
	}
	if frameBytes > staging && !s.admitLarge(frameBytes) {
		return outcomePaused, nil
	}
	s.bodies = append(s.bodies, p.Body)
	s.crcs = append(s.crcs, p.BodyCRC)
	s.ids = append(s.ids, frame.RequestID)
	s.silent = append(s.silent, silent)
	if silent {
		s.silentCount++
	}
	s.checked.Checks = append(s.checked.Checks, check)
	s.runChecked = s.runChecked || asks
	s.runBytes += frameBytes
	// A run never needs more credits than the window holds, or it could
	// never have them; a full run goes in at once.
	if (len(s.ids) == min(maxRun, int(s.cfg.Window)) || frameBytes > staging) && !s.flushRun() {
		return outcomePaused, nil
	}
	return outcomeDone, nil
}

// admitLarge takes room in the large-record pool for a record larger than
// the staging buffer, so such records cannot pile up in every stream's
// staging at once. Without room it pauses reading while a goroutine waits
// in line, and reports false; the frame comes back after the resume.
func (s *session) admitLarge(frameBytes int) bool {
	pool := s.cfg.LargeRecords
	if pool == nil {
		return true
	}
	if s.reserved.Size() == int64(frameBytes) {
		s.runLease, s.reserved = s.reserved, arena.Lease{}
		return true
	}
	s.releaseReserved()
	if lease, ok := pool.TryAcquire(frameBytes); ok {
		s.runLease = lease
		return true
	}
	s.conn.PauseReading()
	s.consumers.Add(1)
	go func() {
		defer s.consumers.Done()
		if lease, err := pool.Acquire(s.ctx, frameBytes); err == nil {
			s.reserved = lease // read by Data only after the resume below
		}
		s.conn.ResumeReading()
	}()
	return false
}

func (s *session) releaseReserved() {
	if s.reserved.Size() > 0 {
		_ = s.reserved.Release()
		s.reserved = arena.Lease{}
	}
}

// releaseWhenWritten gives a large record's admission back once its batch
// is committed (or failed): its staging memory is free then. A release is
// a short lock and hands the bytes to waiters, so it runs on the
// completing goroutine rather than on one of its own.
func releaseWhenWritten(ticket broker.Ticket, lease arena.Lease) {
	if lease.Size() == 0 {
		return
	}
	ticket.OnDone(func() { _ = lease.Release() })
}

// Inline commits are for runs this small: a lone awaited record, or the
// few that several callers sharing a connection have in flight. A larger
// run comes from a pipelining producer, which is better served by
// reading on while the run's fdatasync is in flight.
const (
	inlineMaxRecords = 16
	inlineMaxBytes   = 64 << 10
)

// flushRun appends the current run with one TryAppendBatch and hands its
// ticket to the writer. It returns false, with reading paused and the run
// dropped (its bytes will be handed back), when the window or the log's
// staging buffer is full: that is the connection's backpressure.
func (s *session) flushRun() bool { return s.flushRunLast(false) }

// flushRunLast is flushRun for the run that ends the peer's input (last):
// such a run, when small, is committed inline where the backend allows it.
//
// Inline, the run is written and fdatasynced on this goroutine when its
// log is idle (segment.Log.TryCommitBatch) and its acks are sent from
// here, sparing the hand-offs to the appender, the committer, the writer
// and back to the reactor: four goroutine wake-ups, each of which costs
// tens of microseconds on a small machine, against an fdatasync of about
// a hundred (docs/BENCHMARKS.md, "Awaited produce"). It is taken only
// while the writer has no acks of this connection left to send, so acks
// keep their order.
func (s *session) flushRunLast(last bool) bool {
	n := len(s.ids)
	if n == 0 {
		return true
	}
	if !s.out.credits.tryAcquire(n) {
		if s.out.credits.isBroken() {
			s.resetRun() // the connection broke; nobody will read the answers
			return true
		}
		if s.shedRun() {
			return true
		}
		s.conn.PauseReading()
		s.out.credits.whenAvailable(n, s.conn.ResumeReading)
		s.dropRun()
		return false
	}
	inline := last && s.inline != nil && n <= inlineMaxRecords && s.runBytes <= inlineMaxBytes &&
		s.out.unsent.Load() == 0 && s.inline.MayBlock()
	ticket, err := s.appendRun(inline)
	if err == broker.ErrFull { // returned unwrapped: the backpressure path
		s.out.credits.release(n)
		if s.shedRun() {
			return true
		}
		s.conn.PauseReading()
		room := s.runPart.RoomFor(s.runBytes)
		go s.resumeWhen(room)
		s.dropRun()
		return false
	}
	if err != nil {
		s.out.credits.release(n)
		failure := wireError(err)
		for i, id := range s.ids {
			if !s.silent[i] {
				s.reply(id, failure)
			}
		}
		s.releaseRunLease()
		s.resetRun()
		return true
	}
	releaseWhenWritten(ticket, s.runLease)
	s.runLease = arena.Lease{}
	answers := s.runAnswers(ticket.First)
	if answers != nil || !inline || !completed(ticket) || !s.answerInline(ticket) {
		s.out.pushAcks(ticket, s.runPart.Index(), s.ids, answers)
	}
	s.resetRun()
	return true
}

// appendRun appends the current run: checked when a record asks for it.
func (s *session) appendRun(inline bool) (broker.Ticket, error) {
	if !s.runChecked {
		if inline {
			return s.runPart.TryCommit(s.bodies, s.crcs, s.runBytes)
		}
		return s.runPart.TryAppend(s.bodies, s.crcs, s.runBytes)
	}
	run := &s.checked
	run.Bodies, run.CRCs, run.FrameBytes = s.bodies, s.crcs, s.runBytes
	if inline {
		return s.runPart.TryCommitChecked(run)
	}
	return s.runPart.TryAppendChecked(run)
}

// shedRun drops a run of fire-and-forget records that would otherwise
// hold the connection back, when the broker's shedding budget allows; the
// broker counts them.
func (s *session) shedRun() bool {
	if s.silentCount != len(s.ids) || !s.engine.TryShed(len(s.ids)) {
		return false
	}
	s.releaseRunLease()
	s.resetRun()
	return true
}

// refuse answers a record that was not appended, unless it asked for no
// answer.
func (s *session) refuse(requestID uint32, silent bool, e *wire.Error) {
	if silent {
		s.engine.CountSilentRefusal()
		return
	}
	s.reply(requestID, e)
}

// answerInline sends the acks of a run committed inline straight to the
// connection, and reports false when the connection's output has no room
// now (the writer then sends them, as for any run).
func (s *session) answerInline(ticket broker.Ticket) bool {
	s.answer = appendRunAnswers(s.answer[:0], ticket, s.runPart.Index(), s.ids, 0)
	if !s.inline.TryWrite(s.answer) {
		return false
	}
	s.out.credits.release(len(s.ids))
	return true
}

// dropRun abandons the run until its bytes are handed back; a large
// record's admission is kept for it.
func (s *session) dropRun() {
	if s.runLease.Size() > 0 {
		s.reserved, s.runLease = s.runLease, arena.Lease{}
	}
	s.resetRun()
}

func (s *session) releaseRunLease() {
	if s.runLease.Size() > 0 {
		_ = s.runLease.Release()
		s.runLease = arena.Lease{}
	}
}

// resetRun empties the run, dropping its references into the read buffer.
func (s *session) resetRun() {
	clear(s.bodies)
	s.bodies, s.crcs, s.ids, s.silent = s.bodies[:0], s.crcs[:0], s.ids[:0], s.silent[:0]
	s.silentCount, s.runChecked = 0, false
	s.checked.Reset()
	s.runBytes = 0
}

// resumeWhen resumes reading when ready closes (or the session ends).
func (s *session) resumeWhen(ready <-chan struct{}) {
	select {
	case <-ready:
	case <-s.ctx.Done():
	}
	s.conn.ResumeReading()
}

// pauseForOutput stops reading until the reply queue drains.
func (s *session) pauseForOutput() {
	s.conn.PauseReading()
	s.out.whenDrained(s.conn.ResumeReading)
}

// ReadStopped implements loop.Session: finish in-flight work, then close.
func (s *session) ReadStopped(cause error) {
	s.handshake.stop()
	s.cancel() // end long polls and admission waits
	s.consumers.Wait()
	if s.untrack != nil {
		s.untrack()
	}
	s.releaseGate()
	s.connection.Release()
	s.releaseRunLease()
	s.releaseReserved()
	s.closeBatch() // an open batch without its commit is never stored
	s.groupsMu.Lock()
	for served := range s.groups {
		served.Release(s.client.ID()) // its leases and keys go to the others at once
	}
	s.groupsMu.Unlock()
	var timeout interface{ Timeout() bool }
	var protocol *wire.Error
	switch {
	case cause == nil, errors.Is(cause, io.EOF), errors.Is(cause, net.ErrClosed), errors.As(cause, &protocol):
	case errors.As(cause, &timeout) && timeout.Timeout():
		s.auditUnauthenticatedEnd("timeout", "")
		s.reply(0, wire.NewError(wire.CodeTimeout, "no frame within the timeout; closing"))
	default:
		s.auditUnauthenticatedEnd("failed", cause.Error())
		s.cfg.Logger.Warn("connection read failed", "remote", s.conn.RemoteAddr(), "error", cause.Error())
	}
	s.out.close()
	s.client.Close()
}

// waitDeadline bounds a consume's wait.
func (s *session) waitDeadline(waitMs uint32) time.Time {
	wait := min(time.Duration(waitMs)*time.Millisecond, s.cfg.MaxConsumeWait)
	return time.Now().Add(wait)
}
