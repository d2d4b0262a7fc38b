package client_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/wire"
)

// fakeBroker is an in-process server speaking protocol v1 over loopback
// TCP: enough of a broker to test the client against (handshake, produce
// with configurable ack order, delay and errors, work-mode consume with
// leases, acks, gaps, pings, and connection-level failures). It checks
// what the client sends and reports violations as test errors.
type fakeBroker struct {
	tb testing.TB
	ln net.Listener

	// Configuration: set before the first Dial (in the configure func).
	welcome      wire.Welcome
	reject       *wire.Error   // answer Hello with this Error instead of Welcome
	silent       bool          // never answer Hello
	reverseAcks  bool          // acknowledge each read batch in reverse order
	ackDelay     time.Duration // wait before acknowledging each read batch
	discard      bool          // store no bodies (benchmarks: keeps the server allocation-free)
	produceErr   func(n uint64) *wire.Error
	recordIDs    bool
	partitions   map[string]uint32 // stream → partition count (default 1)
	bindings     map[string]string // subject pattern → stream
	ackFrames    []fakeAck         // every Ack frame received
	commits      map[string]uint64 // logKey → committed position (streaming)
	routed       []byte            // discard mode: the stream of routed records
	groupFilters []string          // the filter of every OpenGroup received
	// dropAfter, when it returns true for the count of Produce frames
	// received, closes that connection right after storing the record,
	// before its ack (and the acks of its read batch) are written.
	dropAfter   func(n uint64) bool
	noProducers bool // answer ProducerInit with unknown_type (a broker that does not serve it)
	noPositions bool // answer ProducerInit without positions (a broker with stale positions)
	// forget, when it returns true for the count of Produce frames
	// received, makes the broker forget the producer's state on the
	// record's partition and answer producer_expired.
	forget    func(n uint64) bool
	producers fakeProducers
	cluster   *fakeCluster // fakecluster_test.go: nil for a single broker
	// lateAnswers counts the goroutines writing late answers, so stop
	// waits for them.
	lateAnswers sync.WaitGroup

	mu          sync.Mutex
	holding     bool
	conns       []*fakeConn
	accepted    int
	hellos      []wire.Hello
	logs        map[string]*fakeLog
	produced    uint64 // Produce frames received
	noAcks      uint64 // Produce frames received with ProduceNoAck
	inFlight    int
	maxInFlight int
	pings       int
	pongs       []uint64
	ids         []uint32
	corrupt     map[uint64]bool // offsets delivered with a flipped body byte
	gaps        []wire.Gap      // sent at the start of the next Consume
	nextLease   uint64
	problems    []string
}

type fakeLog struct{ records []fakeRecord }

type fakeRecord struct {
	body        []byte
	crc         uint32
	timestamp   int64
	lease       uint64
	leased      bool
	acked       bool
	attempts    uint32
	availableAt time.Time
}

// reply is a produce outcome waiting to be written.
type reply struct {
	id  uint32
	ack wire.ProduceAck
	err *wire.Error
}

func defaultWelcome() wire.Welcome {
	return wire.Welcome{Version: 1, Capabilities: wire.Capabilities, MaxFrame: wire.DefaultMaxFrame,
		Window: 256, MaxRecordBytes: 1 << 20, ServerVersion: "fake-0"}
}

// startFake starts a fake broker; configure (may be nil) adjusts it
// before it accepts. tb may be nil (examples): problems are then ignored.
func startFake(tb testing.TB, configure func(*fakeBroker)) *fakeBroker {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	b := &fakeBroker{tb: tb, ln: ln, welcome: defaultWelcome(), logs: map[string]*fakeLog{}, commits: map[string]uint64{}, corrupt: map[uint64]bool{}}
	if configure != nil {
		configure(b)
	}
	go b.accept()
	if tb != nil {
		tb.Cleanup(func() {
			b.stop()
			for _, p := range b.problemList() {
				tb.Errorf("fake broker: %s", p)
			}
		})
	}
	return b
}

func (b *fakeBroker) addr() string { return b.ln.Addr().String() }

func (b *fakeBroker) stop() {
	b.ln.Close()
	if b.cluster != nil {
		b.cluster.stop()
	}
	b.dropAll()
	b.lateAnswers.Wait()
}

func (b *fakeBroker) accept() { b.acceptOn(b.ln, 0) }

// acceptOn serves the connections of one listener: a cluster's node.
func (b *fakeBroker) acceptOn(ln net.Listener, node int) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		fc := &fakeConn{b: b, conn: conn, node: node}
		b.mu.Lock()
		b.accepted++
		b.conns = append(b.conns, fc)
		b.mu.Unlock()
		go fc.serve()
	}
}

func (b *fakeBroker) problem(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, fmt.Sprintf(format, args...))
}

func (b *fakeBroker) problemList() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.problems)
}

// locked runs f under the broker's lock, for reading its counters.
func (b *fakeBroker) locked(f func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f()
}

// hold makes the broker keep produce acks back until release.
func (b *fakeBroker) hold() { b.locked(func() { b.holding = true }) }

// release writes every held ack and stops holding.
func (b *fakeBroker) release() {
	b.mu.Lock()
	b.holding = false
	conns := slices.Clone(b.conns)
	b.mu.Unlock()
	for _, fc := range conns {
		fc.writeReplies(fc.takeHeld())
	}
}

// dropAll closes every connection without a word.
func (b *fakeBroker) dropAll() {
	b.mu.Lock()
	conns := slices.Clone(b.conns)
	b.mu.Unlock()
	for _, fc := range conns {
		fc.conn.Close()
	}
}

// sendAll writes a frame to every connection.
func (b *fakeBroker) sendAll(id uint32, m wire.Message) {
	b.mu.Lock()
	conns := slices.Clone(b.conns)
	b.mu.Unlock()
	for _, fc := range conns {
		fc.write(wire.Append(nil, id, m))
	}
}

// bodies returns the stored record bodies of a stream, in offset order.
func (b *fakeBroker) bodies(stream string) [][]byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out [][]byte
	if log := b.logs[stream]; log != nil {
		for _, r := range log.records {
			out = append(out, r.body)
		}
	}
	return out
}

type fakeConn struct {
	b    *fakeBroker
	conn net.Conn
	node int // the cluster node whose listener accepted it
	wmu  sync.Mutex

	// Owned by the serving goroutine.
	out          []byte
	batch        []reply
	ackMsg       wire.ProduceAck
	dropped      bool          // dropAfter fired: stop serving
	atomic       []pendingPart // the open atomic batch of the connection
	atomicFailed bool          // a part of the open batch was refused
	lagged       []reply       // refusals answered late (fakeCluster.lagRefusals)

	heldMu sync.Mutex
	held   []reply
}

func (fc *fakeConn) write(p []byte) {
	fc.wmu.Lock()
	defer fc.wmu.Unlock()
	fc.conn.Write(p) // a failed write shows up as a failed read
}

func (fc *fakeConn) takeHeld() []reply {
	fc.heldMu.Lock()
	defer fc.heldMu.Unlock()
	held := fc.held
	fc.held = nil
	return held
}

// writeReplies writes produce outcomes from outside the serving goroutine.
func (fc *fakeConn) writeReplies(replies []reply) {
	var out []byte
	for _, r := range replies {
		out = appendReply(out, r, &wire.ProduceAck{})
	}
	fc.b.locked(func() { fc.b.inFlight -= len(replies) })
	if len(out) > 0 {
		fc.write(out)
	}
}

func appendReply(out []byte, r reply, scratch *wire.ProduceAck) []byte {
	if r.err != nil {
		return wire.Append(out, r.id, r.err)
	}
	*scratch = r.ack
	return wire.Append(out, r.id, scratch)
}

func (fc *fakeConn) serve() {
	defer fc.conn.Close()
	defer func() { // acks never written no longer count as in flight
		fc.b.locked(func() { fc.b.inFlight -= len(fc.batch) })
	}()
	buf := make([]byte, 256<<10)
	start, end, ok := fc.handshake(buf)
	if !ok {
		return
	}
	for {
		for {
			f, n, err := wire.ParseFrame(buf[start:end], wire.DefaultMaxFrame)
			if errors.Is(err, wire.ErrIncomplete) {
				break
			}
			if err != nil {
				fc.b.problem("client sent a bad frame: %v", err)
				return
			}
			fc.handle(f)
			start += n
			if fc.dropped {
				return
			}
		}
		fc.flush()
		if start == end {
			start, end = 0, 0
		} else if len(buf)-end < 64<<10 {
			end = copy(buf, buf[start:end])
			start = 0
			if end == len(buf) {
				buf = append(buf, make([]byte, len(buf))...)
			}
		}
		n, err := fc.conn.Read(buf[end:])
		if err != nil {
			return
		}
		end += n
	}
}

// handshake reads Hello and answers it; it returns the unparsed bytes.
func (fc *fakeConn) handshake(buf []byte) (int, int, bool) {
	end := 0
	for {
		f, n, err := wire.ParseFrame(buf[:end], wire.DefaultMaxFrame)
		if err == nil {
			return n, end, fc.hello(f)
		}
		if !errors.Is(err, wire.ErrIncomplete) {
			fc.b.problem("bad first frame: %v", err)
			return 0, 0, false
		}
		m, err := fc.conn.Read(buf[end:])
		if err != nil {
			return 0, 0, false
		}
		end += m
	}
}

func (fc *fakeConn) hello(f wire.Frame) bool {
	b := fc.b
	hello, err := wire.DecodeHello(f.Body)
	if f.Type != wire.TypeHello || f.RequestID != 0 || err != nil {
		b.problem("first frame %s id %d: %v", f.Type, f.RequestID, err)
		return false
	}
	b.locked(func() { b.hellos = append(b.hellos, hello) })
	switch {
	case b.silent:
		fc.conn.Read(make([]byte, 1)) // until the client gives up
		return false
	case b.reject != nil:
		fc.write(wire.Append(nil, 0, b.reject))
		return false
	}
	fc.write(wire.Append(nil, 0, &b.welcome))
	return true
}

// flush writes the replies of one read batch: other replies first, then
// the produce acks, delayed and reordered as configured.
func (fc *fakeConn) flush() {
	b := fc.b
	if len(fc.lagged) > 0 {
		fc.answerLate(fc.lagged)
		fc.lagged = nil
	}
	if len(fc.batch) > 0 {
		if b.ackDelay > 0 {
			time.Sleep(b.ackDelay)
		}
		if b.reverseAcks {
			slices.Reverse(fc.batch)
		}
		b.mu.Lock()
		holding := b.holding
		if !holding {
			b.inFlight -= len(fc.batch)
		}
		b.mu.Unlock()
		if holding {
			fc.heldMu.Lock()
			fc.held = append(fc.held, fc.batch...)
			fc.heldMu.Unlock()
		} else {
			for _, r := range fc.batch {
				fc.out = appendReply(fc.out, r, &fc.ackMsg)
			}
		}
		fc.batch = fc.batch[:0]
	}
	if len(fc.out) > 0 {
		fc.write(fc.out)
		fc.out = fc.out[:0]
	}
}

func (fc *fakeConn) handle(f wire.Frame) {
	b := fc.b
	if f.RequestID == 0 {
		b.problem("%s frame with request id 0", f.Type)
	}
	if b.recordIDs {
		b.locked(func() { b.ids = append(b.ids, f.RequestID) })
	}
	switch f.Type {
	case wire.TypeProduce:
		fc.produce(f)
	case wire.TypeConsume:
		fc.consume(f)
	case wire.TypeAck:
		fc.ack(f)
	case wire.TypeOpenGroup:
		fc.openGroup(f)
	case wire.TypeStreamAdmin:
		fc.streamAdmin(f)
	case wire.TypeProducerInit:
		fc.producerInit(f)
	case wire.TypeClusterInfo:
		fc.clusterInfo(f)
	case wire.TypeLeaderTransfer:
		fc.leaderTransfer(f)
	case wire.TypePing:
		payload, _ := wire.DecodePing(f.Body)
		b.locked(func() { b.pings++ })
		fc.out = wire.Append(fc.out, f.RequestID, &wire.Pong{Payload: payload})
	case wire.TypePong:
		payload, _ := wire.DecodePing(f.Body)
		b.locked(func() { b.pongs = append(b.pongs, payload) })
	default:
		b.problem("unexpected %s frame from the client", f.Type)
	}
}

func (fc *fakeConn) produce(f wire.Frame) {
	b := fc.b
	m, err := fc.decodeProduce(f.Body)
	if err != nil {
		b.problem("Produce: %v", err)
		return
	}
	if record.Checksum(m.Body) != m.BodyCRC {
		fc.batch = append(fc.batch, reply{id: f.RequestID, err: wire.NewError(wire.CodeChecksum, "body crc")})
		return
	}
	if _, err := record.Parse(m.Body); err != nil && !b.discard {
		b.problem("Produce body: %v", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.produced++
	noAck := m.Flags&wire.ProduceNoAck != 0
	if noAck {
		b.noAcks++
	} else {
		b.inFlight++
	}
	b.maxInFlight = max(b.maxInFlight, b.inFlight)
	if b.inFlight > int(b.welcome.Window) {
		b.problems = append(b.problems, fmt.Sprintf("%d produces in flight, window %d", b.inFlight, b.welcome.Window))
	}
	answer := func(r reply) {
		if noAck {
			return
		}
		fc.batch = append(fc.batch, r)
	}
	if b.produceErr != nil {
		if werr := b.produceErr(b.produced); werr != nil {
			answer(reply{id: f.RequestID, err: werr})
			return
		}
	}
	stream, partition, werr := b.route(m)
	if werr == nil && b.cluster != nil {
		if werr = b.cluster.leads(fc, stream, partition); werr != nil && b.cluster.lagRefusals && !noAck {
			fc.lagged = append(fc.lagged, reply{id: f.RequestID, err: werr})
			return
		}
	}
	if werr != nil {
		answer(reply{id: f.RequestID, err: werr})
		return
	}
	if !b.discard {
		if r, done := fc.checkProduce(f.RequestID, m, stream, partition); done {
			if r != nil {
				answer(*r)
			}
			return
		}
	}
	fc.store(f.RequestID, m, stream, partition, answer)
}

// store appends a checked record to its log and answers it. b.mu is held.
func (fc *fakeConn) store(id uint32, m wire.Produce, stream []byte, partition uint32, answer func(reply)) {
	b := fc.b
	log := b.logOf(stream, partition)
	if log == nil {
		log = &fakeLog{}
		key := logKey(stream, partition)
		if b.discard {
			key = string(stream) // logOf's key in discard mode
		}
		b.logs[key] = log
	}
	offset := uint64(len(log.records))
	rec := fakeRecord{crc: m.BodyCRC, timestamp: time.Now().UnixNano()}
	if !b.discard {
		rec.body = bytes.Clone(m.Body)
	}
	if b.discard {
		log.records = log.records[:0] // count offsets without keeping records
		offset = b.produced - 1
	}
	log.records = append(log.records, rec)
	if !b.discard {
		b.noteStored(m, stream, partition, offset)
	}
	if b.dropAfter != nil && b.dropAfter(b.produced) {
		fc.dropped = true
		b.inFlight-- // its ack is never written
		return
	}
	answer(reply{id: id, ack: wire.ProduceAck{Partition: partition, Offset: offset}})
}

// decodeProduce is wire.DecodeProduce, except in discard mode: there it
// reads the fixed layout by hand, because wire.DecodeProduce allocates
// once per call (its bytes16 builds a field name eagerly) and the
// allocation benchmarks must measure the client alone.
func (fc *fakeConn) decodeProduce(body []byte) (wire.Produce, error) {
	if !fc.b.discard {
		return wire.DecodeProduce(body)
	}
	if len(body) < 2 {
		return wire.Produce{}, wire.ErrMalformed
	}
	n := 2 + int(binary.LittleEndian.Uint16(body))
	if len(body) < n+9 {
		return wire.Produce{}, wire.ErrMalformed
	}
	m := wire.Produce{Stream: body[2:n], Partition: binary.LittleEndian.Uint32(body[n:]), Flags: body[n+4],
		BodyCRC: binary.LittleEndian.Uint32(body[n+5:]), Body: body[n+9:]}
	if m.Flags&wire.ProduceHasOptions != 0 { // skipped unread: discard mode checks nothing
		if len(m.Body) < 2 || len(m.Body) < 2+int(binary.LittleEndian.Uint16(m.Body)) {
			return wire.Produce{}, wire.ErrMalformed
		}
		m.Body = m.Body[2+int(binary.LittleEndian.Uint16(m.Body)):]
	}
	return m, nil
}
