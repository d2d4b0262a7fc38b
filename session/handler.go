package session

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/wire"
)

// Config configures the wire protocol's side of a broker. The zero value
// of each field is its default.
type Config struct {
	// MaxFrame bounds a frame a client may send (16 MiB + 64 KiB).
	MaxFrame uint32
	// Window is how many produce requests a connection may have read but
	// not acknowledged (4096).
	Window uint32
	// HandshakeTimeout closes a connection that has not completed its
	// handshake, a TLS handshake included, this long after it was opened
	// (10 s): slowloris, and peers that send nothing.
	HandshakeTimeout time.Duration
	// IdleTimeout closes a connection silent this long (5 min).
	IdleTimeout time.Duration
	// MaxConsumeWait caps how long a Consume may wait (30 s).
	MaxConsumeWait time.Duration
	// ConnectionOutput bounds the reply bytes queued for one connection
	// before its session stops reading (4 MiB).
	ConnectionOutput int
	// LargeRecords admits records larger than the staging buffer until
	// they are written, against one shared capacity; nil: no bound beyond
	// one such record per stream being staged and one being written.
	LargeRecords *arena.SharedPool
	// Logger defaults to the engine's.
	Logger *slog.Logger

	// ---- Security (docs/SECURITY.md); nil fields turn the feature off.

	// Auth authenticates every connection's Hello and checks each request
	// against the identity's scopes. nil: every peer is trusted (the
	// loopback default).
	Auth *security.Authorizer
	// Gate applies the pre-authentication limits: half-open connections,
	// per-source connection rate, failed-auth lockout and delay.
	Gate *security.Gate
	// Audit receives auth outcomes and admin actions.
	Audit *security.AuditLog

	// Cluster answers ClusterInfo; nil when the broker is a single node
	// (the cluster capability is then not announced).
	Cluster ClusterView
}

// Defaults.
const (
	DefaultWindow           = 4096
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultIdleTimeout      = 5 * time.Minute
	DefaultMaxConsumeWait   = 30 * time.Second
	DefaultConnectionOutput = 4 << 20
	// MaxWindow bounds Window.
	MaxWindow = 1 << 20
)

// ErrInvalidConfig is what NewHandler wraps for a configuration it
// refuses.
var ErrInvalidConfig = errors.New("session: invalid configuration")

func (c Config) withDefaults() (Config, error) {
	if c.MaxFrame == 0 {
		c.MaxFrame = wire.DefaultMaxFrame
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxConsumeWait <= 0 {
		c.MaxConsumeWait = DefaultMaxConsumeWait
	}
	if c.ConnectionOutput <= 0 {
		c.ConnectionOutput = DefaultConnectionOutput
	}
	switch {
	case c.MaxFrame < wire.MinMaxFrame:
		return c, fmt.Errorf("%w: max frame %d below %d", ErrInvalidConfig, c.MaxFrame, wire.MinMaxFrame)
	case c.Window > MaxWindow:
		return c, fmt.Errorf("%w: window %d above %d", ErrInvalidConfig, c.Window, MaxWindow)
	case c.LargeRecords != nil && c.LargeRecords.Capacity() < int64(c.MaxFrame):
		return c, fmt.Errorf("%w: the large-record pool (%d bytes) cannot hold one largest frame (%d bytes)",
			ErrInvalidConfig, c.LargeRecords.Capacity(), c.MaxFrame)
	}
	return c, nil
}

// Handler serves wire connections over an engine: it implements
// loop.Handler, so it sees frames, never sockets.
type Handler struct {
	engine *broker.Broker
	cfg    Config
}

var _ loop.Handler = (*Handler)(nil)

// NewHandler returns the wire protocol's handler over an open engine.
func NewHandler(engine *broker.Broker, cfg Config) (*Handler, error) {
	if engine == nil {
		return nil, fmt.Errorf("%w: no engine", ErrInvalidConfig)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = engine.Logger()
	}
	return &Handler{engine: engine, cfg: cfg}, nil
}

// MaxFrame is the largest frame a client may send; a loop backend sizes
// its read buffers from it.
func (h *Handler) MaxFrame() uint32 { return h.cfg.MaxFrame }

// Open implements loop.Handler: the connection is attached to the engine
// (its limit and drain), then to the pre-authentication gate.
func (h *Handler) Open(conn loop.Conn) (loop.Session, error) {
	client, err := h.engine.Connect()
	if err != nil {
		refuse(conn, wireError(err))
		return nil, err
	}
	// No read timeout until Hello: the handshake deadline covers the
	// whole handshake (a per-read timeout would let a peer dribbling a
	// byte at a time stay for ever).
	handshake := newHandshakeGuard(conn, &h.cfg)
	admission, err := h.admit(conn, handshake)
	if err != nil {
		handshake.stop()
		client.Close() // before the refusal is written: a peer that does not read it holds no slot
		e := wire.NewError(wire.CodeTooManyConns, "%v", err)
		e.RetryAfter = time.Second
		refuse(conn, e)
		return nil, err
	}
	s := newSession(h, conn, client, handshake)
	s.admission = admission
	return s, nil
}

func refuse(conn loop.Conn, e *wire.Error) {
	_ = conn.Write(wire.Append(nil, 0, e))
}

// wireError maps an engine error to a structured wire error: the code
// from its kind, the message its text.
func wireError(err error) *wire.Error {
	var e *wire.Error
	if errors.As(err, &e) {
		return e
	}
	out := wire.NewError(errorCode(err), "%v", err)
	var retry *broker.RetryableError
	if errors.As(err, &retry) {
		out.RetryAfter = retry.RetryAfter
	}
	// The leader's id and address travel as typed fields; hide strips
	// them for a connection without the cluster capability.
	var notLeader *broker.NotLeaderError
	if errors.As(err, &notLeader) && notLeader.Node != 0 {
		out.HasValue, out.Value, out.Leader = true, uint64(notLeader.Node), notLeader.ClientAddr
	}
	return out
}

// errorCodes pairs each engine error kind with its wire code.
var errorCodes = []struct {
	kind error
	code wire.Code
}{
	// First: a refused batch wraps the refusal of one of its records,
	// and the batch's code is what the client must act on.
	{broker.ErrBatchRefused, wire.CodeBatchIncomplete},
	{broker.ErrNoSuchStream, wire.CodeNotFound},
	{broker.ErrNoSuchPartition, wire.CodeNotFound},
	{broker.ErrNoSuchGroup, wire.CodeNotFound},
	{broker.ErrNoSuchBinding, wire.CodeNotFound},
	{broker.ErrInvalidName, wire.CodeInvalidName},
	{broker.ErrReadOnly, wire.CodeInvalidName},
	{broker.ErrInvalidArgument, wire.CodeInvalidRequest},
	{broker.ErrInvalidRecord, wire.CodeInvalidRequest},
	{broker.ErrChecksum, wire.CodeChecksum},
	{broker.ErrRecordTooLarge, wire.CodeRecordTooLarge},
	{broker.ErrConflict, wire.CodeConflict},
	{broker.ErrGroupActive, wire.CodeGroupActive},
	{broker.ErrGroupMismatch, wire.CodeGroupModeMismatch},
	{broker.ErrFrozen, wire.CodeFrozen},
	{broker.ErrNoSpace, wire.CodeNoSpace},
	{broker.ErrBusy, wire.CodeBusy},
	{broker.ErrTooManyConnections, wire.CodeTooManyConns},
	{broker.ErrShuttingDown, wire.CodeShuttingDown},
	{broker.ErrNoRoute, wire.CodeNoRoute},
	{broker.ErrProducerFenced, wire.CodeProducerFenced},
	{broker.ErrSequenceGap, wire.CodeSequenceGap},
	{broker.ErrProducerExpired, wire.CodeProducerExpired},
	{broker.ErrUnknownProducer, wire.CodeUnknownProducer},
	{broker.ErrExpectationFailed, wire.CodeExpectationFailed},
	{broker.ErrBatchTooLarge, wire.CodeBatchIncomplete},
	{broker.ErrNotLeader, wire.CodeNotLeader},
	{broker.ErrNoLeader, wire.CodeNoLeader},
}

func errorCode(err error) wire.Code {
	for _, pair := range errorCodes {
		if errors.Is(err, pair.kind) {
			return pair.code
		}
	}
	return wire.CodeInternal
}
