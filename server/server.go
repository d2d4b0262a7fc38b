package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/keyring"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/session"
)

// state is where a Server is in its life: New → started → stopped.
type state int

const (
	stateNew state = iota
	stateStarted
	stateStopped
)

// Server is one running broker: its data directory, engine, listeners,
// health endpoints and security files. Its methods are safe for
// concurrent use.
type Server struct {
	logger           *slog.Logger
	level            *slog.LevelVar
	exposedPlaintext bool
	plan             *memoryPlan
	health           *healthEndpoints
	secured          *securityRuntime
	engine           *broker.Broker
	wire             *wireListener
	cluster          *clusterListener // nil for a single node
	listeners        []listener
	failed           chan error

	mu struct {
		sync.Mutex
		cfg     Config // the running settings; Reload changes the reloadable ones
		state   state
		started time.Time
	}
}

// New runs the boot checks and acquires everything the broker needs, so
// that Start cannot fail on configuration: it validates cfg, refuses a
// data directory that is not a directory, a TLS key or auth file others
// can read, and a RAM budget over RAMCeiling; it binds the health
// endpoints, loads TLS and auth, opens (and locks, and recovers) the data
// directory and binds every listener. Each refusal wraps one of the
// package's sentinel errors and says what to do. A Server that New
// returns must be stopped (Stop), started or not.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Version == "" {
		cfg.Version = "devel"
	}
	if err := checkDataDir(cfg); err != nil {
		return nil, err
	}
	if err := checkSecretFiles(cfg); err != nil {
		return nil, err
	}
	s := &Server{failed: make(chan error, 1)}
	s.exposedPlaintext, _ = cfg.checkBind()
	s.logger, s.level = newLogger(cfg)
	s.mu.cfg = cfg
	if err := s.acquire(cfg); err != nil {
		s.release()
		return nil, err
	}
	return s, nil
}

// acquire builds, in order, what release frees.
func (s *Server) acquire(cfg Config) error {
	mapped, err := mapConfig(cfg, s.logger)
	if err != nil {
		return err
	}
	if cfg.EncryptionKeyFile != "" {
		ring, err := keyring.Load(cfg.EncryptionKeyFile)
		if err != nil {
			return fmt.Errorf("%w: --encryption-key-file %s: %w", ErrEncryptionKey, cfg.EncryptionKeyFile, err)
		}
		mapped.engine.Storage.Encryption = ring
	}
	if s.plan, err = planMemory(cfg, &mapped); err != nil {
		return err
	}
	if err := s.plan.enforce(cfg.RAMCeiling); err != nil {
		return err
	}
	if s.health, err = startHealth(cfg, s.logger); err != nil {
		return err
	}
	if s.secured, err = openSecurity(cfg, s.logger); err != nil {
		return err
	}
	network := attachRuntime(&mapped, s.plan, s.secured, cfg.RAMCeiling, s.logger)
	if s.engine, err = broker.Open(mapped.engine); err != nil {
		return openError(cfg.DataDir, err)
	}
	var view *clusterView
	if cfg.NodeID != 0 {
		view = &clusterView{}
		mapped.session.Cluster = view
	}
	handler, err := session.NewHandler(s.engine, mapped.session)
	if err != nil {
		return invalid("%w", err)
	}
	if s.wire, err = listenWire(cfg.Loop, cfg.Addr, network, handler); err != nil {
		return err
	}
	s.listeners = []listener{s.wire}
	if cfg.NodeID != 0 {
		cluster, err := listenCluster(cfg, s.engine, s.wire.addr().String(), s.logger)
		if err != nil {
			return err
		}
		s.cluster = cluster
		view.listener.Store(cluster)
		s.listeners = append(s.listeners, cluster)
	}
	return nil
}

// release frees what acquire built, in reverse, after a failed New or a
// Stop without Start.
func (s *Server) release() {
	ctx := context.Background()
	for _, l := range s.listeners {
		_ = l.shutdown(ctx)
	}
	if s.engine != nil {
		_ = s.engine.Close()
	}
	if s.secured != nil {
		s.secured.close()
	}
	if s.health != nil {
		s.health.close(ctx)
	}
	if s.plan != nil {
		s.plan.close()
	}
}

// checkDataDir refuses a data directory that exists but is no directory
// (a missing one is created when the data directory opens).
func checkDataDir(cfg Config) error {
	if cfg.Storage == StorageMemory {
		return nil
	}
	if cfg.DataDir == "" {
		return invalid("--data-dir is required: name the broker's data directory (the one holding FORMAT and streams/)")
	}
	info, err := os.Stat(cfg.DataDir)
	switch {
	case err == nil && !info.IsDir():
		return fmt.Errorf("%w: --data-dir %s is a file; name a directory (a missing one is created), or move the file away", ErrNotADirectory, cfg.DataDir)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%w: --data-dir %s: a part of the path is a file, not a directory", ErrNotADirectory, cfg.DataDir)
	}
	return nil
}

// openError classifies a failure to open the data directory.
func openError(dataDir string, err error) error {
	switch {
	case errors.Is(err, segment.ErrKeyRequired):
		return fmt.Errorf("%w: %s is encrypted: start it with --encryption-key-file naming the key ring it was written with: %w",
			ErrEncryptionKey, dataDir, err)
	case errors.Is(err, segment.ErrWrongKey):
		return fmt.Errorf("%w: --encryption-key-file is not the key ring %s was written with: %w", ErrEncryptionKey, dataDir, err)
	case errors.Is(err, segment.ErrLocked):
		return fmt.Errorf("%w: %s is in use: %w; stop that broker first", ErrLocked, dataDir, err)
	case errors.Is(err, broker.ErrInvalidRetention):
		return invalid("%w", err)
	case errors.Is(err, segment.ErrTooNew), errors.Is(err, segment.ErrInconsistent), errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%w: %w", ErrUnreadable, err)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%w: %s: %w", ErrNotADirectory, dataDir, err)
	}
	return fmt.Errorf("server: opening %s: %w", dataDir, err)
}

// Start serves every listener and returns; it does not block. A listener
// that stops serving on its own is reported on Failed. ctx is not
// retained.
func (s *Server) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.state != stateNew {
		return fmt.Errorf("%w: Start on a server already started or stopped", ErrState)
	}
	s.mu.state, s.mu.started = stateStarted, time.Now()
	cfg := s.mu.cfg
	if cfg.Storage == StorageMemory {
		s.logger.Warn("STORAGE IS IN MEMORY: NOTHING IS DURABLE. Every record, cursor and stream is lost when this process stops, crashes or loses power; an acknowledgement only means the record is in RAM",
			"memory_storage_cap", arena.FormatBytes(cfg.MemoryStorageCap))
	}
	s.engine.ObserveReactors(s.wire.busy)
	for _, l := range s.listeners {
		go func() {
			if err := l.serve(); err != nil {
				select {
				case s.failed <- fmt.Errorf("server: the %s listener stopped serving: %w", l.name(), err):
				default:
				}
			}
		}()
	}
	addr := s.wire.addr().String()
	s.health.attach(s.engine, addr, s.wire.tls)
	s.logger.Info("serving", "version", cfg.Version, "data_dir", dataDirName(cfg), "addr", addr,
		"backend", s.wire.choice.Backend, "backend_reason", s.wire.choice.Reason,
		"ram_budget", arena.FormatBytes(s.plan.budget.Total()), "ram_ceiling", ceilingText(cfg.RAMCeiling),
		"durability", cfg.Durability, "io_mode", s.engine.Dir().IOMode().String())
	s.secured.logStart(addr, s.exposedPlaintext, cfg.Loop, s.wire.choice)
	s.secured.watch(cfg.SecurityReloadInterval)
	return nil
}

// dataDirName is the data directory as the log names it.
func dataDirName(cfg Config) string {
	if cfg.Storage == StorageMemory {
		return memoryDataDir
	}
	return cfg.DataDir
}

// Failed delivers the error of a listener that stopped serving on its own
// (never one Stop stopped): the caller should Stop the server.
func (s *Server) Failed() <-chan error { return s.failed }

// Stop drains and closes: the listeners stop accepting, every connection
// finishes what it read (a produce is acknowledged only once synced) until
// ctx ends, when the rest are closed; then every log is synced and the
// data directory unlocked. A Server never started is released at once.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.mu.state {
	case stateStopped:
		return fmt.Errorf("%w: Stop on a stopped server", ErrState)
	case stateNew:
		s.mu.state = stateStopped
		s.release()
		return nil
	}
	s.mu.state = stateStopped
	s.engine.Drain()
	for _, l := range s.listeners {
		if err := l.shutdown(ctx); err != nil {
			s.logger.Warn("connections still busy when the drain ended; closing them", "listener", l.name(), "error", err.Error())
		}
	}
	closeErr := s.engine.Close()
	if closeErr == nil {
		stats := s.engine.Dir().Stats()
		s.logger.Info("stopped cleanly", "reactor_busy", busyShares(s.wire.busy(), time.Since(s.mu.started)),
			"syncs", stats.Syncs, "sync_cycles", stats.Cycles)
	}
	s.engine, s.listeners = nil, nil
	s.release()
	if closeErr != nil {
		return fmt.Errorf("server: closing the data directory: %w", closeErr)
	}
	return nil
}

// busyShares renders each reactor's busy time as a share of the uptime,
// "12.5%,3.1%" ("none" for the std backend).
func busyShares(busy []time.Duration, uptime time.Duration) string {
	if len(busy) == 0 || uptime <= 0 {
		return "none"
	}
	shares := make([]string, len(busy))
	for i, d := range busy {
		shares[i] = fmt.Sprintf("%.1f%%", 100*float64(d)/float64(uptime))
	}
	return strings.Join(shares, ",")
}

// Addr is the address clients connect to (the wire listener's).
func (s *Server) Addr() string { return s.wire.addr().String() }

// HealthAddr is where the health endpoints listen ("" when off).
func (s *Server) HealthAddr() string { return s.health.addr() }

// Addresses maps each listener's name to its bound address: "wire", and
// "health" when the endpoints are on.
func (s *Server) Addresses() map[string]net.Addr {
	addresses := map[string]net.Addr{}
	for _, l := range s.listeners {
		addresses[l.name()] = l.addr()
	}
	if s.health.server != nil {
		addresses["health"], _ = net.ResolveTCPAddr("tcp", s.health.addr())
	}
	return addresses
}

// Backend names the network backend serving the wire listener ("std",
// "epoll", "uring"): what Loop "auto" chose.
func (s *Server) Backend() string { return s.wire.choice.Backend }

// Logger is the server's logger, for the caller's own lines about it.
func (s *Server) Logger() *slog.Logger { return s.logger }

// Config returns the running settings, with what Reload applied.
func (s *Server) Config() Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.cfg
}
