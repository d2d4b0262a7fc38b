package loop

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/ironbus/ironbus/arena"
)

// Handler accepts connections for the broker.
type Handler interface {
	// Open is called for each accepted connection. An error closes it at
	// once (after the handler wrote whatever explanation it wanted).
	Open(conn Conn) (Session, error)
}

// Session handles the bytes of one connection.
type Session interface {
	// Data hands over received bytes; see the package contract. It must
	// not block: a session that cannot take more pauses reading instead.
	Data(in []byte) (consumed int, err error)
	// ReadStopped says no more Data will come, and why (nil: the server is
	// draining). It is called once, on a goroutine where it may block.
	ReadStopped(cause error)
}

// FrameSizer is implemented by a Session that can tell how long the frame
// at the start of its unconsumed bytes is. The backend then sizes a large
// frame's buffer exactly, once, instead of taking the largest buffer.
type FrameSizer interface {
	// FrameSize returns the bytes the frame starting at head needs in
	// total, or 0 when head is too short to tell.
	FrameSize(head []byte) int
}

// Conn is a connection as a session sees it.
type Conn interface {
	// ID is unique per connection for the life of the server.
	ID() uint64
	// RemoteAddr names the peer for logs.
	RemoteAddr() string
	// Write queues b to be sent, whole and in order; b may be reused when
	// Write returns. It blocks while more than the backend's output limit
	// is waiting to be sent (flow control against a peer that does not
	// read), so it is never called from inside Data. Safe for concurrent
	// use.
	Write(b []byte) error
	// WriteVectored queues header followed by every part as one write,
	// whole and in order with Write, without the caller joining them.
	// The parts may alias memory the caller must keep unchanged, such as
	// a mapped segment, until done runs; done runs exactly once, when
	// the backend no longer needs them: sent, copied into its output
	// queue, or failed. Flow control is Write's: the bytes count against
	// the output limit. Safe for concurrent use; never call it from
	// inside Data.
	WriteVectored(header []byte, parts [][]byte, done func()) error
	// SetReadTimeout ends reading when no byte arrives for d (zero:
	// never). It applies from the next read.
	SetReadTimeout(d time.Duration)
	// PauseReading stops reading until ResumeReading; bytes Data did not
	// consume stay buffered. Safe from any goroutine.
	PauseReading()
	// ResumeReading restarts reading; buffered bytes are handed to Data
	// again before anything new is read. Safe from any goroutine.
	ResumeReading()
	// Close sends what Write queued (bounded by the write timeout), then
	// closes. Idempotent; safe from any goroutine.
	Close() error
}

// InlineConn is implemented by every backend's Conn: it lets Data finish
// a short piece of work itself and answer it at once. The broker commits a
// lone awaited record on the goroutine running Data (one write and one
// fdatasync, a fraction of a millisecond) and sends its acknowledgement
// from there, instead of handing both to other goroutines, each hand-off
// a wake-up.
type InlineConn interface {
	// MayBlock reports whether the Data call running now may block for
	// such a while without holding up other connections that are
	// ready. Call it from inside Data only.
	MayBlock() bool
	// TryWrite queues b as Write does when that needs no wait for the
	// output limit, and reports whether it did; unlike Write it may be
	// called from inside Data.
	TryWrite(b []byte) bool
}

// Server is a network backend: it listens, hands connections to a
// Handler, and drains.
type Server interface {
	// Listen binds addr ("host:port"; port 0 picks one) and returns the
	// bound address.
	Listen(addr string) (net.Addr, error)
	// Serve accepts connections until Shutdown; it returns ErrServerClosed
	// then.
	Serve() error
	// Shutdown stops accepting, stops reading from every connection and
	// waits until every session has closed its connection, or ctx ends.
	Shutdown(ctx context.Context) error
	// CloseAll closes every connection at once (after a failed drain).
	CloseAll()
	// Backend names the backend for logs ("std", "epoll", "uring").
	Backend() string
	// Busy returns, per reactor, the time it has spent handling events
	// since it started (a counter: its rate is the loop-busy gauge). The
	// std backend has no reactors and returns nil.
	Busy() []time.Duration
}

// OutputChunkSize is the size of the pieces a reactor connection's queued
// output is made of (Config.OutputBuffers holds buffers of this size).
const OutputChunkSize = 64 << 10

// Config bounds the network side.
type Config struct {
	// ReadBufferSize is the initial read buffer per connection (64 KiB:
	// a read sees hundreds of small frames at once).
	ReadBufferSize int
	// MaxBuffer bounds the read buffer when one frame is larger than it.
	MaxBuffer int
	// WriteTimeout fails a write that cannot finish in time (a peer that
	// stopped reading).
	WriteTimeout time.Duration
	// HandshakeTimeout bounds a TLS connection's handshake, from accept
	// (10 s): a connection that has not completed it by then is closed,
	// whether it sent nothing or stopped half way.
	HandshakeTimeout time.Duration
	// OutputLimit bounds the bytes queued for a connection before Write
	// blocks (4 MiB).
	OutputLimit int
	// Loops is the number of reactors of an event-loop backend
	// (GOMAXPROCS by default).
	Loops int
	// Buffers supplies the per-connection read buffers (ReadBufferSize
	// each) from a budgeted slab; nil takes them from the heap.
	Buffers *arena.Slab
	// LargeFrames admits buffers larger than ReadBufferSize, for frames
	// that do not fit, against one shared capacity: a connection waits
	// (not reading) until its frame's memory is free, instead of every
	// connection reserving the largest frame. nil: the heap, bounded only
	// by MaxBuffer per connection.
	LargeFrames *arena.SharedPool
	// OutputBuffers supplies the chunks (OutputChunkSize each) that
	// reactor connections queue output in, from a budgeted slab, taken
	// while output waits and given back once sent; nil takes them from
	// the heap. The std backend writes from the caller's memory and
	// needs none.
	OutputBuffers *arena.Slab
	Logger        *slog.Logger

	// TLS, when set, makes the listener speak TLS. Only the std backend
	// serves it (crypto/tls drives a net.Conn); New hands a TLS listener
	// to std whichever backend was asked, and says so in Choice.Reason.
	TLS *tls.Config
}

// TLSConn is implemented by a Conn on a TLS listener: the session reads
// the verified peer certificate from it (after the handshake, which has
// happened by the time any Data arrives).
type TLSConn interface {
	TLSState() (tls.ConnectionState, bool)
	// Handshaking reports whether the connection's TLS handshake has not
	// completed yet: bytes written now would first wait for it, and a peer
	// that never handshakes never reads them.
	Handshaking() bool
}

func (c Config) withDefaults() Config {
	if c.ReadBufferSize <= 0 {
		c.ReadBufferSize = 64 << 10
	}
	if c.MaxBuffer < c.ReadBufferSize {
		c.MaxBuffer = 16<<20 + 128<<10
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 30 * time.Second
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.OutputLimit <= 0 {
		c.OutputLimit = 4 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// DefaultHandshakeTimeout is Config.HandshakeTimeout's default.
const DefaultHandshakeTimeout = 10 * time.Second

// Sentinel errors.
var (
	// ErrServerClosed is returned by Serve after Shutdown.
	ErrServerClosed = errors.New("loop: server closed")
	// ErrBufferFull means one frame did not fit in MaxBuffer.
	ErrBufferFull = errors.New("loop: frame larger than the read buffer limit")
)
