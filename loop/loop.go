package loop

import (
	"errors"
	"log/slog"
	"time"
)

// Handler accepts connections for the broker.
type Handler interface {
	// Open is called for each accepted connection. An error closes it at
	// once (after the handler wrote whatever explanation it wanted).
	Open(conn Conn) (Session, error)
}

// Session handles the bytes of one connection.
type Session interface {
	// Data hands over received bytes; see the package contract.
	Data(in []byte) (consumed int, err error)
	// ReadStopped says no more Data will come, and why (nil: the server is
	// draining).
	ReadStopped(cause error)
}

// Conn is a connection as a session sees it.
type Conn interface {
	// ID is unique per connection for the life of the server.
	ID() uint64
	// RemoteAddr names the peer for logs.
	RemoteAddr() string
	// Write sends b, whole, in one write. Safe for concurrent use.
	Write(b []byte) error
	// SetReadTimeout closes reading when no byte arrives for d (zero:
	// never). It applies from the next read.
	SetReadTimeout(d time.Duration)
	// Close closes the connection. Idempotent.
	Close() error
}

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
	Logger       *slog.Logger
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
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Sentinel errors.
var (
	// ErrServerClosed is returned by Serve after Shutdown.
	ErrServerClosed = errors.New("loop: server closed")
	// ErrBufferFull means one frame did not fit in MaxBuffer.
	ErrBufferFull = errors.New("loop: frame larger than the read buffer limit")
)
