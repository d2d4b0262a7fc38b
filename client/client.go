package client

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironbus/ironbus/codec"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/wire"
)

// Defaults for Options.
const (
	DefaultWindow      = 1024
	DefaultDialTimeout = 10 * time.Second
)

// Options configure a connection. The zero value is usable.
type Options struct {
	// ClientName is shown in the broker's logs and metrics.
	ClientName string
	// Window is the number of produce requests to keep in flight,
	// requested in Hello; default DefaultWindow. The connection uses the
	// smaller of this and the server's window.
	Window int
	// DialTimeout bounds the TCP connect and the handshake together, for
	// each address tried; default DefaultDialTimeout. The Dial context
	// can end it sooner.
	DialTimeout time.Duration
	// MaxFrame is the largest frame this client accepts, announced in
	// Hello; default wire.DefaultMaxFrame (room for a 16 MiB record). A
	// consumer needs at least the server's MaxRecordBytes + 46.
	MaxFrame uint32

	// Compression is what Produce compresses payloads with (Producers
	// have their own ProducerOptions.Compression); the zero value is lz4.
	Compression Compression
	// CompressMinBytes is the shortest payload Produce tries to compress:
	// 0 means codec.DefaultMinBytes (128), a negative value every payload.
	CompressMinBytes int
	// MaxDecompressedBytes caps the decompressed payload of a delivered
	// record: one that declares more is refused, before any allocation,
	// with a *DecompressError. Default: the server's MaxRecordBytes, or
	// record.DefaultMaxBody (16 MiB) when it announces none; producers
	// never compress a payload past MaxRecordBytes, so the default refuses
	// only records no IronBus producer would frame.
	MaxDecompressedBytes int
	// TLS, when set, speaks TLS 1.3 to the broker (security.ClientTLSConfig
	// builds one from files). An empty ServerName is taken from addr.
	TLS *tls.Config
	// Auth is the credential sent in Hello (TokenAuth, PasswordAuth,
	// MTLSAuth); the zero value sends none.
	Auth Auth
	// Idempotence is what Produce and ProduceTo do (Producers have their
	// own ProducerOptions.Idempotence); the zero value is IdempotenceOn,
	// under one producer identity per Client with a random name.
	Idempotence Idempotence
}

// Auth is a credential for Hello.
type Auth struct {
	Mechanism uint8 // wire.Auth*
	Material  []byte
}

// TokenAuth authenticates with a bearer token.
func TokenAuth(token string) Auth { return Auth{Mechanism: wire.AuthToken, Material: []byte(token)} }

// PasswordAuth authenticates with a username and password.
func PasswordAuth(username, password string) Auth {
	return Auth{Mechanism: wire.AuthPassword, Material: wire.AppendPasswordMaterial(nil, username, []byte(password))}
}

// MTLSAuth authenticates as the client certificate of Options.TLS.
func MTLSAuth() Auth { return Auth{Mechanism: wire.AuthMTLS} }

func (o Options) withDefaults() Options {
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	o.Window = min(o.Window, 1<<24) // a window is a count of frames; bound the semaphore
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.MaxFrame == 0 {
		o.MaxFrame = wire.DefaultMaxFrame
	}
	o.MaxFrame = max(o.MaxFrame, wire.MinMaxFrame)
	return o
}

// ServerInfo is what the server announced in Welcome.
type ServerInfo struct {
	Version        uint16 // protocol version of the connection
	ServerVersion  string
	Capabilities   uint64        // wire.Cap* bits in effect on the connection
	MaxFrame       uint32        // largest frame the server accepts
	Window         int           // produce requests the server reads ahead of acks
	MaxRecordBytes int           // largest record body the server stores; 0 = no limit announced
	IdleTimeout    time.Duration // the server closes a connection silent this long; 0 = never
}

// Client is one connection to a broker (and, in a cluster, a pool of
// connections to the leaders of the partitions it uses). It is safe for
// concurrent use: every call is a request with its own id, and replies
// are matched by id whatever order they come back in.
type Client struct {
	conn    net.Conn
	addr    string
	info    ServerInfo
	readMax uint32    // our MaxFrame: the largest frame we read
	epoch   time.Time // monotonic base for lastSend and ping times
	window  chan struct{}

	wmu  sync.Mutex // guards wbuf and writing
	wbuf []byte     // frames waiting for the flusher
	// writing is set while a write to conn is under way, by the flusher
	// or by an awaited call writing its own frame (enqueueAwaited); the
	// one write at a time keeps frames whole and in order.
	writing bool
	// direct is the frame an awaited call writes itself; it belongs to
	// whoever set writing for a direct write.
	direct   []byte
	wake     chan struct{}
	lastSend atomic.Int64 // nanoseconds since epoch of the last write
	pingID   atomic.Uint32

	pmu     sync.Mutex // guards pending, err, reader and releasedAt
	pending pendingTable
	// reader is who reads the socket now (reading.go); whoever it is
	// owns rbuf. releasedAt is when the last reader let go (c.now()).
	reader     readerRole
	releasedAt int64
	rbuf       readBuffer
	loopWake   chan struct{} // hands the socket to the read loop
	err        error         // sticky: set once, before done is closed
	done       chan struct{} // closed when the connection is finished

	encoders     sync.Pool
	decompressor *codec.Decompressor
	wg           sync.WaitGroup

	opts            Options // as dialled, with defaults: a Producer redials with them
	partitionCounts partitionCounts
	awaited         awaitedProducer // the identity of Produce's idempotent records
	batchID         atomic.Uint32   // the last atomic batch id used on the connection
	asyncSent       atomic.Uint64   // records PublishAsync sent
	// router sends requests answered not_leader to the leader (nil on a
	// connection the router itself opened: only the Client the caller
	// dialled routes).
	router *router
}

// Dial connects to a broker and completes the handshake. addr is one
// host:port, or a seed list of them separated by commas
// ("a:7001,b:7002,c:7003"): the seeds are tried in order until one
// completes the handshake, and the error of a Dial that reached none
// names every address tried (errors.Is finds each cause). A handshake
// refused by the server returns an error wrapping the server's
// *wire.Error; a refusal that is not retryable (authentication, no
// protocol version in common) ends the Dial at once, since every member
// of a cluster would answer the same.
//
// The seeds stay with the Client: a request answered not_leader without
// a leader's address goes to the next seed (the package documentation,
// Clusters), and an idempotent Producer redials through them.
func Dial(ctx context.Context, addr string, opts Options) (*Client, error) {
	opts = opts.withDefaults()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, err := opts.Compression.codec(); err != nil {
		return nil, err
	}
	seeds, err := ParseSeeds(addr)
	if err != nil {
		return nil, err
	}
	c, _, err := dialSeeds(ctx, seeds, 0, opts)
	if err != nil {
		return nil, err
	}
	c.router = newRouter(c, seeds)
	return c, nil
}

// dialOne connects to one address and completes the handshake.
func dialOne(ctx context.Context, addr string, opts Options) (*Client, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
	defer cancel()
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("ironbus client: dial %s: %w", addr, err)
	}
	if opts.TLS != nil {
		if conn, err = secure(ctx, conn, addr, opts.TLS); err != nil {
			return nil, fmt.Errorf("ironbus client: TLS handshake with %s: %w", addr, err)
		}
	}
	welcome, buf, err := handshake(ctx, conn, opts)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("ironbus client: handshake with %s: %w", addr, err)
	}
	c := newClient(conn, addr, opts, welcome)
	c.start(buf)
	return c, nil
}

func newClient(conn net.Conn, addr string, opts Options, w wire.Welcome) *Client {
	c := &Client{
		conn: conn, addr: addr, readMax: opts.MaxFrame, epoch: time.Now(), opts: opts,
		wake: make(chan struct{}, 1), done: make(chan struct{}), loopWake: make(chan struct{}, 1),
		info: ServerInfo{
			Version: w.Version, ServerVersion: w.ServerVersion, Capabilities: w.Capabilities,
			MaxFrame: w.MaxFrame, Window: int(w.Window), MaxRecordBytes: int(w.MaxRecordBytes),
			IdleTimeout: time.Duration(w.IdleTimeoutMs) * time.Millisecond,
		},
	}
	window := opts.Window
	if w.Window > 0 {
		window = min(window, int(w.Window))
	}
	c.window = make(chan struct{}, window)
	// Dial checked the compression, so a pooled encoder's compressor
	// cannot fail to build.
	c.encoders.New = func() any {
		compressor, _ := newCompressor(opts.Compression, opts.CompressMinBytes)
		return &encoder{compressor: compressor}
	}
	limit := opts.MaxDecompressedBytes
	if limit <= 0 {
		limit = c.info.MaxRecordBytes
	}
	if limit <= 0 {
		limit = record.DefaultMaxBody
	}
	c.decompressor = codec.NewDecompressor(limit)
	return c
}

// secure runs the TLS handshake over conn, checking the broker's
// certificate against the host of addr unless config names another.
func secure(ctx context.Context, conn net.Conn, addr string, config *tls.Config) (net.Conn, error) {
	config = config.Clone()
	if config.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		config.ServerName = host
	}
	if config.MinVersion < tls.VersionTLS13 {
		config.MinVersion = tls.VersionTLS13
	}
	secured := tls.Client(conn, config)
	if err := secured.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return secured, nil
}

// aLongTimeAgo is a deadline in the past: setting it unblocks I/O at once.
var aLongTimeAgo = time.Unix(1, 0)

// handshake sends Hello and reads the first frame: Welcome or an Error.
// It returns the read buffer holding any bytes after that frame.
func handshake(ctx context.Context, conn net.Conn, opts Options) (wire.Welcome, readBuffer, error) {
	// Only the context bounds the handshake (DialTimeout is in it), so an
	// expiry reports as the context's error rather than an I/O timeout.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(aLongTimeAgo) })
	welcome, buf, err := exchangeHello(conn, opts)
	if !stop() || ctx.Err() != nil {
		// The context fired: its deadline is what failed the I/O, or it
		// could still land after we clear the deadline below.
		return welcome, buf, ctx.Err()
	}
	if err != nil {
		return welcome, buf, err
	}
	return welcome, buf, conn.SetDeadline(time.Time{})
}

func exchangeHello(conn net.Conn, opts Options) (wire.Welcome, readBuffer, error) {
	hello := wire.Hello{MinVersion: wire.ProtocolVersion, MaxVersion: wire.ProtocolVersion,
		Capabilities: clientCapabilities, MaxFrame: opts.MaxFrame, Window: uint32(opts.Window),
		ClientName: opts.ClientName, AuthMechanism: opts.Auth.Mechanism, AuthMaterial: opts.Auth.Material}
	if _, err := conn.Write(wire.Append(nil, 0, &hello)); err != nil {
		return wire.Welcome{}, readBuffer{}, fmt.Errorf("send Hello: %w", err)
	}
	buf := newReadBuffer()
	frame, err := buf.next(conn, opts.MaxFrame)
	if err != nil {
		return wire.Welcome{}, buf, fmt.Errorf("read Welcome: %w", err)
	}
	switch frame.Type {
	case wire.TypeWelcome:
		w, err := wire.DecodeWelcome(frame.Body)
		if err != nil {
			return w, buf, fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		return w, buf, checkWelcome(w)
	case wire.TypeError:
		werr, err := wire.DecodeError(frame.Body)
		if err != nil {
			return wire.Welcome{}, buf, fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		return wire.Welcome{}, buf, werr
	}
	return wire.Welcome{}, buf, fmt.Errorf("%w: %s frame before Welcome", ErrProtocol, frame.Type)
}

func checkWelcome(w wire.Welcome) error {
	switch {
	case w.Version != wire.ProtocolVersion:
		return fmt.Errorf("%w: server chose protocol version %d, this client speaks %d", ErrProtocol, w.Version, wire.ProtocolVersion)
	case w.MaxFrame < wire.MinMaxFrame:
		return fmt.Errorf("%w: server max frame %d is below the minimum %d", ErrProtocol, w.MaxFrame, wire.MinMaxFrame)
	}
	return nil
}

// ServerInfo returns what the server announced in Welcome.
func (c *Client) ServerInfo() ServerInfo { return c.info }

// Window returns the produce window of the connection: at most this many
// produce requests are unacknowledged at once, across all producers.
func (c *Client) Window() int { return cap(c.window) }

// Close closes the connection. Calls pending on it fail with ErrClosed
// (if the connection had not already failed), and so do later calls. A
// produce pending at Close may still be stored. Close waits for the
// connection's goroutines and is safe to call more than once.
func (c *Client) Close() error {
	c.shutdown(ErrClosed)
	c.wg.Wait()
	if c.router != nil {
		c.router.close()
	}
	return nil
}

// Err returns nil while the connection is usable, else the error every
// call now fails with (ErrClosed or one wrapping ErrConnectionLost).
func (c *Client) Err() error {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	return c.err
}

// lost builds the sticky error of a broken connection.
func (c *Client) lost(cause error) error {
	return fmt.Errorf("%w (%s): %w", ErrConnectionLost, c.addr, cause)
}

// shutdown finishes the connection once: it records err, closes the
// socket and fails every pending request with err. Later calls see err.
func (c *Client) shutdown(err error) {
	c.pmu.Lock()
	if c.err != nil {
		c.pmu.Unlock()
		return
	}
	c.err = err
	entries := c.pending.drain()
	close(c.done)
	c.pmu.Unlock()
	c.conn.Close()
	for _, e := range entries {
		c.finish(e, err)
	}
}

// register records a request in flight and returns its id, or the
// connection's error when it is finished. A request with a call is
// awaited by its caller, who reads the answer itself if nobody else is
// reading by then (await); any other request hands the socket to the
// read loop when nobody reads it.
func (c *Client) register(e entry) (uint32, error) { return c.registerFor(e, e.call == nil) }

// registerAhead is register for a request with a call that its caller
// awaits only later (a Stream's read-ahead): the loop reads its answer
// meanwhile.
func (c *Client) registerAhead(e entry) (uint32, error) { return c.registerFor(e, true) }

func (c *Client) registerFor(e entry, loopReads bool) (uint32, error) {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	id := c.pending.add(e)
	if loopReads {
		c.wantReaderLocked()
	}
	return id, nil
}

// take removes and returns the entry of id when its kind is in accepts
// (a mask of 1<<kind). ok is false when id is not in flight; err reports
// a reply to a request of another kind, a protocol violation that leaves
// the entry for shutdown to fail.
func (c *Client) take(f wire.Frame, accepts uint16) (e entry, ok bool, err error) {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	slot := c.pending.get(f.RequestID)
	if slot == nil {
		return e, false, nil
	}
	if accepts&(1<<slot.kind) == 0 {
		return e, false, fmt.Errorf("%w: %s frame answers request %d, a %s", ErrProtocol, f.Type, f.RequestID, slot.kind)
	}
	e = *slot
	c.pending.remove(slot)
	return e, true, nil
}

// await waits for the reply to an awaited request, reading it itself
// when nobody else reads the socket (readOwn). When ctx ends first, the
// request is abandoned: its reply will be dropped by the reader and
// ctx.Err() is returned. If the reply won the race, it is returned
// instead, so an ack that did arrive is never thrown away.
func (c *Client) await(ctx context.Context, id uint32, cl *call) error {
	select {
	case <-cl.done:
		return nil
	default:
	}
	if c.takeReading() {
		return c.readOwn(ctx, id, cl)
	}
	select {
	case <-cl.done:
		return nil
	case <-ctx.Done():
	}
	if c.abandon(id, cl) {
		return ctx.Err()
	}
	<-cl.done // the reader has the entry and is about to signal
	return nil
}

// abandon detaches an awaited call from its request. A Produce keeps its
// entry (without the call) until the reply comes, because the request
// still counts against the window until the server answers it.
func (c *Client) abandon(id uint32, cl *call) bool {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	slot := c.pending.get(id)
	if slot == nil || slot.call != cl {
		return false
	}
	if slot.kind == kindProduce {
		slot.call = nil
	} else {
		c.pending.remove(slot)
	}
	return true
}

// finish completes a request that will get no other reply: the server
// answered it with err, or the connection ended.
func (c *Client) finish(e entry, err error) {
	switch e.kind {
	case kindProduce, kindProducer:
		c.finishProduce(e, Ack{}, err)
	case kindFetch, kindAck, kindPing, kindOpenGroup, kindAdmin:
		e.call.err = err
		e.call.done <- struct{}{}
	}
}

// finishProduce hands a produce outcome to whoever waits for it and frees
// its place in the window.
func (c *Client) finishProduce(e entry, ack Ack, err error) {
	err = produceError(err)
	switch {
	case e.kind == kindProducer:
		e.producer.complete(e.seq, e.attempt, ack, err)
	case e.call != nil:
		e.call.ack, e.call.err = ack, err
		e.call.done <- struct{}{}
	}
	<-c.window
}

// acquireWindow takes a place in the connection's produce window.
func (c *Client) acquireWindow(ctx context.Context) error {
	select {
	case c.window <- struct{}{}:
		return nil
	default:
	}
	select {
	case c.window <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return c.Err()
	}
}
