package raftmeta

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// Timeouts of the metadata group. The defaults suit a LAN of edge boxes:
// a dead leader is noticed after about a second, and a disk stall of a
// few hundred milliseconds (an SD card's fsync) does not start an
// election.
type Timeouts struct {
	// Heartbeat: a follower that hears nothing from the leader for this
	// long (randomized up to twice as long) calls an election; the leader
	// sends heartbeats at a tenth of it. Default 1 s.
	Heartbeat time.Duration
	// Election: how long a candidate waits for votes. Default 1 s.
	Election time.Duration
	// LeaderLease: a leader that cannot reach a majority for this long
	// steps down (check-quorum). At most Heartbeat; default half of it.
	LeaderLease time.Duration
	// Commit: how long the leader may wait to batch entries. Default 50 ms.
	Commit time.Duration
	// Request bounds a change or linearizable read whose context has no
	// deadline. Default 10 s.
	Request time.Duration
	// Dial bounds opening a connection to a peer, handshake included.
	// Default 2 s.
	Dial time.Duration
}

func (t Timeouts) withDefaults() Timeouts {
	if t.Heartbeat <= 0 {
		t.Heartbeat = time.Second
	}
	if t.Election <= 0 {
		t.Election = time.Second
	}
	if t.LeaderLease <= 0 || t.LeaderLease > t.Heartbeat {
		t.LeaderLease = t.Heartbeat / 2
	}
	if t.Commit <= 0 {
		t.Commit = 50 * time.Millisecond
	}
	if t.Request <= 0 {
		t.Request = 10 * time.Second
	}
	if t.Dial <= 0 {
		t.Dial = 2 * time.Second
	}
	return t
}

// Config configures Open.
type Config struct {
	// NodeID is this node's id (nonzero), the --node-id of serve.
	NodeID uint32
	// Incarnation is the data directory's incarnation (datadir).
	Incarnation uint32
	// DataDir is the data directory; the group keeps its log, vote and
	// snapshots in <DataDir>/meta.
	DataDir string
	// ClusterAddr is the address peers reach this node's Layer at; empty
	// means the Layer's own address.
	ClusterAddr string
	// ClientAddr is the client-protocol address, recorded for others to
	// send clients to.
	ClientAddr string
	// Tags are recorded with the node.
	Tags map[string]string
	// Layer carries the group's connections; nil listens on ClusterAddr
	// with ListenTCP. Open takes ownership: Close closes it.
	Layer StreamLayer
	// Peers is the static membership (node id -> cluster address) that
	// Bootstrap starts the group with; this node among them.
	Peers map[uint32]string
	// Logger receives the group's log lines (slog.Default when nil); the
	// library's own lines pass at warn and above.
	Logger   *slog.Logger
	Timeouts Timeouts
	// SnapshotThreshold is how many applied entries trigger a snapshot
	// (default 1024); TrailingLogs how many stay after one (default 1024).
	SnapshotThreshold uint64
	TrailingLogs      uint64
	// SnapshotInterval is how often the threshold is checked (default 2 min).
	SnapshotInterval time.Duration

	// storeFault, set by tests, fails store writes (store.go).
	storeFault func(op string) error
}

func (c Config) validate() error {
	switch {
	case c.NodeID == 0:
		return fmt.Errorf("%w: node id 0", ErrInvalid)
	case c.Incarnation == 0:
		return fmt.Errorf("%w: incarnation 0", ErrInvalid)
	case c.DataDir == "":
		return fmt.Errorf("%w: no data directory", ErrInvalid)
	case c.Layer == nil && c.ClusterAddr == "":
		return fmt.Errorf("%w: neither a cluster address nor a stream layer", ErrInvalid)
	}
	for id, addr := range c.Peers {
		if id == 0 || addr == "" {
			return fmt.Errorf("%w: peer %d=%q", ErrInvalid, id, addr)
		}
	}
	return nil
}

// Meta is one node's member of the metadata group.
type Meta struct {
	cfg       Config
	logger    *slog.Logger
	timeouts  Timeouts
	self      Identity
	fsm       *fsm
	latch     *latch
	raft      *raft.Raft
	transport *raft.NetworkTransport
	layer     *identityLayer
	store     *raftboltdb.BoltStore
	// started is closed once raft is set (or Open failed).
	started chan struct{}

	mu struct {
		sync.Mutex
		// seen is the last identity each peer node showed in a handshake.
		seen map[uint32]Identity
		// refused are the identities turned away, until registered, with
		// when they last showed up.
		refused map[uint32]refusal
	}
	wake   chan struct{}
	stop   chan struct{}
	done   chan struct{}
	closed sync.Once
}

// MetaDirName is the metadata group's directory inside a data directory.
const MetaDirName = "meta"

func serverID(node uint32) raft.ServerID { return raft.ServerID(strconv.FormatUint(uint64(node), 10)) }

func nodeOf(id raft.ServerID) uint32 {
	n, err := strconv.ParseUint(string(id), 10, 32)
	if err != nil {
		return 0
	}
	return uint32(n)
}

// Open opens (creating it when missing) this node's member of the group
// and starts it. A member whose store was made under another node id or
// incarnation does not reuse it (its vote and log belong to that
// identity): the store is moved aside and this member starts empty.
func Open(cfg Config) (*Meta, error) {
	if err := cfg.validate(); err != nil {
		if cfg.Layer != nil {
			_ = cfg.Layer.Close()
		}
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("component", "raftmeta", "node", cfg.NodeID)
	m := &Meta{cfg: cfg, logger: logger, timeouts: cfg.Timeouts.withDefaults(), latch: &latch{fault: cfg.storeFault},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), started: make(chan struct{})}
	m.mu.seen = map[uint32]Identity{}
	m.mu.refused = map[uint32]refusal{}
	m.fsm = newFSM(logger)

	if err := m.start(); err != nil {
		close(m.started)
		return nil, err
	}
	close(m.started)
	go m.reconcile()
	return m, nil
}

// start opens the store, the transport and the Raft instance; on failure
// it closes what it opened, the configured layer included.
func (m *Meta) start() (err error) {
	cfg := m.cfg
	layer := cfg.Layer
	var closers []func() error
	defer func() {
		if err != nil {
			if m.transport == nil && layer != nil {
				closers = append(closers, layer.Close)
			}
			for i := len(closers) - 1; i >= 0; i-- {
				_ = closers[i]()
			}
		}
	}()
	dir := filepath.Join(cfg.DataDir, MetaDirName)
	if err := claimDir(dir, cfg.NodeID, cfg.Incarnation, m.logger); err != nil {
		return err
	}
	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db"),
		BoltOptions: &bbolt.Options{Timeout: time.Second}})
	if err != nil {
		return fmt.Errorf("raftmeta: opening the store in %s: %w", dir, err)
	}
	m.store = store
	closers = append(closers, store.Close)
	hclogger := newHCLogger(m.logger)
	snapshots, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclogger)
	if err != nil {
		return fmt.Errorf("raftmeta: opening the snapshots in %s: %w", dir, err)
	}
	if layer == nil {
		if layer, err = ListenTCP(cfg.ClusterAddr); err != nil {
			return err
		}
	}
	advertise := cfg.ClusterAddr
	if advertise == "" {
		advertise = layer.Addr().String()
	}
	m.self = Identity{Node: cfg.NodeID, Incarnation: cfg.Incarnation, ClusterAddr: advertise, ClientAddr: cfg.ClientAddr}
	m.layer = newIdentityLayer(layer, advertise, m.identity, m.admit, m.timeouts.Dial)
	m.latch.onTrip = m.onLatch
	m.transport = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: m.layer, MaxPool: 3, Timeout: m.timeouts.Dial, Logger: hclogger})
	closers = append(closers, m.transport.Close)
	m.raft, err = raft.NewRaft(m.raftConfig(hclogger), m.fsm,
		latchedLogStore{inner: store, latch: m.latch}, latchedStableStore{inner: store, latch: m.latch}, snapshots, m.transport)
	if err != nil {
		return fmt.Errorf("raftmeta: starting: %w", err)
	}
	return nil
}

// onLatch cuts the member off at its first storage failure and stops its
// Raft instance (store.go says why).
func (m *Meta) onLatch() {
	m.logger.Error("metadata store failed; this member stops for good", "error", m.latch.latched())
	m.layer.sever()
	go func() {
		<-m.started
		if m.raft != nil {
			_ = m.raft.Shutdown().Error()
		}
	}()
}

func (m *Meta) raftConfig(logger hclog.Logger) *raft.Config {
	conf := raft.DefaultConfig()
	conf.LocalID = serverID(m.cfg.NodeID)
	conf.HeartbeatTimeout = m.timeouts.Heartbeat
	conf.ElectionTimeout = m.timeouts.Election
	conf.LeaderLeaseTimeout = m.timeouts.LeaderLease
	conf.CommitTimeout = m.timeouts.Commit
	conf.SnapshotThreshold = orDefault(m.cfg.SnapshotThreshold, 1024)
	conf.TrailingLogs = orDefault(m.cfg.TrailingLogs, 1024)
	conf.SnapshotInterval = 2 * time.Minute
	if m.cfg.SnapshotInterval > 0 {
		conf.SnapshotInterval = m.cfg.SnapshotInterval
	}
	conf.Logger = logger
	// Pre-vote keeps a node that was cut off from raising the term and
	// deposing a healthy leader when it returns.
	conf.PreVoteDisabled = false
	return conf
}

func orDefault(v, fallback uint64) uint64 {
	if v == 0 {
		return fallback
	}
	return v
}

// identity is what this node says in a handshake.
func (m *Meta) identity() Identity {
	id := m.self
	id.ClusterID = m.fsm.current.Load().ClusterID
	return id
}

// admit judges a peer's identity in a handshake and remembers it for the
// leader's reconciliation. On the dialing side, where the reply is what
// counts (a vote, an acknowledged append), a node registered under
// another incarnation is refused: it holds none of its old self's state.
// The accepting side only checks the cluster and remembers, since a node
// catching up may hold a stale view of its peers' incarnations and must
// still hear from the leader.
func (m *Meta) admit(peer Identity, dialed bool) error {
	if peer.Node == 0 || peer.Incarnation == 0 {
		return fmt.Errorf("%w: node %d incarnation %d", ErrRefused, peer.Node, peer.Incarnation)
	}
	state := m.fsm.current.Load()
	if peer.ClusterID != 0 && state.ClusterID != 0 && peer.ClusterID != state.ClusterID {
		return fmt.Errorf("%w: node %d is in cluster %016x, not %016x", ErrRefused, peer.Node, peer.ClusterID, state.ClusterID)
	}
	if peer.Node == m.cfg.NodeID {
		return fmt.Errorf("%w: node %d (incarnation %08x) claims this node's id", ErrRefused, peer.Node, peer.Incarnation)
	}
	var refused error
	if n, ok := state.Nodes[peer.Node]; ok && n.Incarnation != peer.Incarnation {
		refused = fmt.Errorf("%w: node %d has incarnation %08x, registered %08x", ErrRefused, peer.Node, peer.Incarnation, n.Incarnation)
	}
	m.mu.Lock()
	changed := m.mu.seen[peer.Node] != peer
	m.mu.seen[peer.Node] = peer
	if refused != nil {
		m.mu.refused[peer.Node] = refusal{peer: peer, at: time.Now()}
	} else {
		delete(m.mu.refused, peer.Node)
	}
	m.mu.Unlock()
	if changed || refused != nil {
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}
	if !dialed {
		return nil
	}
	return refused
}

// refusal is a peer turned away for its incarnation: a live process that
// claims the node id with another data directory.
type refusal struct {
	peer Identity
	at   time.Time
}

// Bootstrap starts the group with the static Peers as its voters. It is
// idempotent: a member that already has state (bootstrapped before, or
// joined) is left as it is.
func (m *Meta) Bootstrap() error {
	if _, ok := m.cfg.Peers[m.cfg.NodeID]; !ok {
		return fmt.Errorf("%w: the peers to bootstrap with do not name this node (%d)", ErrInvalid, m.cfg.NodeID)
	}
	var conf raft.Configuration
	for _, id := range slices.Sorted(maps.Keys(m.cfg.Peers)) {
		addr := m.cfg.Peers[id]
		if id == m.cfg.NodeID {
			addr = m.self.ClusterAddr
		}
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: serverID(id), Address: raft.ServerAddress(addr)})
	}
	err := m.raft.BootstrapCluster(conf).Error()
	if errors.Is(err, raft.ErrCantBootstrap) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("raftmeta: bootstrapping: %w", m.mapError(err))
	}
	return nil
}
