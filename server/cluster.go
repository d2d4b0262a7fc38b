package server

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/datadir"
	"github.com/ironbus/ironbus/peerlink"
	"github.com/ironbus/ironbus/raftmeta"
	"github.com/ironbus/ironbus/replica"
	"github.com/ironbus/ironbus/segment/vfs"
	"github.com/ironbus/ironbus/wire"
)

// clusterListener is the cluster door: the shared cluster address (peer
// link and metadata group), the node's replica host and its member of the
// metadata group. It is a listener like the client wire: bound in New,
// served by Start, stopped by Stop, which first hands over the leadership
// of the partitions (and of the metadata group) this node holds.
type clusterListener struct {
	config      Config
	logger      *slog.Logger
	engine      *broker.Broker
	incarnation uint32
	// attached counts, per replicated stream, the partitions reconcile
	// gave the engine; reconcileMu serialises reconcile passes.
	reconcileMu sync.Mutex
	attached    map[string]int
	stopping    chan struct{}
	reconciled  chan struct{}
	mux         *clusterMux
	link        *peerlink.Link
	host        *replica.Host
	meta        *raftmeta.Meta
	// transfers holds, per replica.GroupID, a channel closed when the
	// operator's transfer of that partition's leadership ends (one at a
	// time): appends refused meanwhile wait for its outcome.
	transfers sync.Map
}

// listenCluster binds the cluster address and opens the node's parts. The
// data directory's incarnation (package datadir) makes this node's
// replica ids; clientAddr is recorded in the metadata so clients can be
// sent here.
func listenCluster(cfg Config, engine *broker.Broker, clientAddr string, logger *slog.Logger) (*clusterListener, error) {
	logger = logger.With("component", "cluster")
	incarnation, err := datadir.OpenIncarnation(vfs.OS{}, engine.Dir(), datadir.IncarnationOptions{Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("server: the data directory's incarnation: %w", err)
	}
	if incarnation.Created() {
		logger.Info("this data directory has a new incarnation", "incarnation", incarnation.ID, "reason", incarnation.Reason)
	}
	listener, err := net.Listen("tcp", cfg.ClusterAddr)
	if err != nil {
		return nil, fmt.Errorf("%w: --cluster-addr %s: %w (is another node or program using the port?)", ErrListen, cfg.ClusterAddr, err)
	}
	c := &clusterListener{config: cfg, logger: logger, engine: engine, incarnation: incarnation.ID,
		mux: newClusterMux(listener, logger), attached: map[string]int{},
		stopping: make(chan struct{}), reconciled: make(chan struct{})}
	if err := c.open(clientAddr); err != nil {
		close(c.reconciled)
		c.close(context.Background())
		return nil, err
	}
	// The replicated streams the metadata already holds open before
	// clients are served; later changes follow.
	c.reconcile(c.meta.State())
	engine.OpenMissingStreams(c.openMissing)
	if err := engine.RegisterCollector(newClusterCollector(c)); err != nil {
		logger.Warn("the cluster's metrics are not exposed", "error", err)
	}
	go c.reconcileLoop()
	return c, nil
}

func (c *clusterListener) open(clientAddr string) error {
	cfg := c.config
	c.host = replica.NewHost(replica.HostConfig{Logger: c.logger,
		Send: func(node uint32, group replica.GroupID, message []byte) {
			c.link.Send(peerlink.NodeID(node), uint64(group), message)
		}})
	peers := map[peerlink.NodeID]string{}
	for id, address := range cfg.Peers {
		if id != cfg.NodeID {
			peers[peerlink.NodeID(id)] = address
		}
	}
	var err error
	c.link, err = peerlink.New(peerlink.Config{Cluster: cfg.ClusterName, Node: peerlink.NodeID(cfg.NodeID),
		Listener: c.mux.peer, Peers: peers, InsecurePlaintext: cfg.InsecurePlaintextCluster, Logger: c.logger,
		Handler: func(_ peerlink.NodeID, channel uint64, payload []byte) {
			c.host.Deliver(replica.GroupID(channel), append([]byte(nil), payload...))
		},
		Unreachable: func(node peerlink.NodeID) { c.host.NodeUnreachable(uint32(node)) }})
	if err != nil {
		return fmt.Errorf("%w: the peer link: %w", ErrInvalidSetting, err)
	}
	c.meta, err = raftmeta.Open(raftmeta.Config{NodeID: cfg.NodeID, Incarnation: c.incarnation,
		DataDir: cfg.DataDir, ClusterAddr: cfg.ClusterAddr, ClientAddr: clientAddr,
		Layer: metaLayer{c.mux.meta}, Peers: cfg.Peers, Logger: c.logger})
	if err != nil {
		return fmt.Errorf("server: the metadata group: %w", err)
	}
	if err := c.meta.Bootstrap(); err != nil {
		return fmt.Errorf("server: starting the metadata group: %w", err)
	}
	return nil
}

func (c *clusterListener) name() string          { return "cluster" }
func (c *clusterListener) addr() net.Addr        { return c.mux.listener.Addr() }
func (c *clusterListener) busy() []time.Duration { return nil }
func (c *clusterListener) serve() error          { return c.mux.serve() }

func (c *clusterListener) shutdown(ctx context.Context) error {
	c.close(ctx)
	return nil
}

// close stops the node's part in the cluster: a metadata leader hands the
// leadership over first, so the group does not wait out an election.
func (c *clusterListener) close(ctx context.Context) {
	select {
	case <-c.stopping:
	default:
		close(c.stopping)
	}
	<-c.reconciled
	if c.host != nil {
		// Partitions this node leads move to a caught-up peer first, so a
		// planned stop costs them a transfer, not an election timeout.
		handover, cancel := context.WithTimeout(ctx, 2*time.Second)
		if leading := c.host.HandOver(handover); leading > 0 {
			c.logger.Warn("some partitions did not hand their leadership over before stopping", "still_leading", leading)
		}
		cancel()
	}
	if c.meta != nil {
		if c.meta.IsLeader() {
			transfer, cancel := context.WithTimeout(ctx, 2*time.Second)
			if err := c.meta.LeadershipTransfer(transfer); err != nil {
				c.logger.Warn("handing the metadata leadership over before stopping failed", "error", err)
			}
			cancel()
		}
		_ = c.meta.Close()
	}
	if c.host != nil {
		c.host.Close()
	}
	if c.link != nil {
		_ = c.link.Close()
	}
	c.mux.close()
}

// clusterProducerID derives a producer's id from its (scoped) name, the
// same on every node, so a partition's new leader recognises the records
// an idempotent producer sent through the old one. The top bit keeps
// these ids apart from those a single node issues in sequence.
func clusterProducerID(name string) uint64 { return xxh3.HashString(name) | 1<<63 }

// clusterView answers the sessions' ClusterInfo once the cluster door is
// open: the sessions' handler is built before the door, which needs the
// client address the wire listener bound.
type clusterView struct {
	listener atomic.Pointer[clusterListener]
}

func (v *clusterView) ClusterState(ctx context.Context, partitions bool, stream string) (*wire.ClusterState, error) {
	c := v.listener.Load()
	if c == nil {
		return nil, wire.NewError(wire.CodeShuttingDown, "the cluster door is not open yet")
	}
	return c.ClusterState(ctx, partitions, stream)
}

func (v *clusterView) CreateStream(ctx context.Context, name string, partitions uint32, replicas int) error {
	c := v.listener.Load()
	if c == nil {
		return wire.NewError(wire.CodeShuttingDown, "the cluster door is not open yet")
	}
	return c.CreateStream(ctx, name, partitions, replicas)
}

// ClusterState answers ClusterInfo from this node's view: the nodes the
// metadata group knows (and whether the peer link reaches them), and the
// replicated partitions with their replica sets, leaders from the replicas
// this node runs.
func (c *clusterListener) ClusterState(ctx context.Context, partitions bool, stream string) (*wire.ClusterState, error) {
	state := c.meta.State()
	leader, _ := c.meta.Leader()
	answer := &wire.ClusterState{ClusterID: []byte(c.config.ClusterName), Node: c.config.NodeID, MetaLeader: leader}
	links := map[uint32]peerlink.PeerStatus{}
	for _, p := range c.link.Status().Peers {
		links[uint32(p.Node)] = p
	}
	for _, id := range slices.Sorted(maps.Keys(state.Nodes)) {
		n := state.Nodes[id]
		node := wire.ClusterNode{ID: n.ID, Incarnation: n.Incarnation, ClientAddr: []byte(n.ClientAddr),
			ClusterAddr: []byte(n.ClusterAddr), State: wire.NodeUnknown, LastSeenMs: wire.NeverSeen}
		switch link, known := links[id]; {
		case id == c.config.NodeID:
			node.State, node.LastSeenMs = wire.NodeUp, 0
		case n.State == raftmeta.NodeRemoving:
			node.State = wire.NodeRemoving
		case known && link.Connected:
			node.State, node.LastSeenMs = wire.NodeUp, 0
		case known && (link.Disconnects > 0 || link.DialFailures > 0 || link.HandshakeFailures > 0):
			node.State = wire.NodeDown
		}
		answer.Nodes = append(answer.Nodes, node)
	}
	if !partitions {
		return answer, nil
	}
	for _, name := range slices.Sorted(maps.Keys(state.Streams)) {
		if stream != "" && name != stream {
			continue
		}
		for index, p := range state.Streams[name].Partitions {
			answer.Partitions = append(answer.Partitions, c.partitionState(ctx, name, uint32(index), p))
		}
	}
	return answer, nil
}

func (c *clusterListener) partitionState(ctx context.Context, stream string, index uint32, p raftmeta.Partition) wire.ClusterPartition {
	out := wire.ClusterPartition{Stream: []byte(stream), Partition: index, Group: uint64(p.Group)}
	status, err := c.host.Status(ctx, p.Group)
	if err == nil {
		out.Leader, out.Term, out.Commit, out.Watermark = status.Leader.Node(), status.Term, status.Commit, status.Watermark
	}
	for _, id := range p.Replicas {
		r := wire.ClusterReplica{Node: id.Node(), Incarnation: id.Incarnation(), Role: wire.RoleVoter}
		if err == nil {
			switch {
			case slices.Contains(status.Config.Learners, id):
				r.Role = wire.RoleLearner
			case slices.Contains(status.Config.VotersOutgoing, id) && !slices.Contains(status.Config.Voters, id):
				r.Role = wire.RoleOutgoing
			}
			r.Match = status.Match[id]
			if id == status.ID && status.Damaged != nil {
				r.Flags |= wire.ReplicaDamaged
			}
			if id == status.ID && status.Latched != nil {
				r.Flags |= wire.ReplicaLatched
			}
		}
		out.Replicas = append(out.Replicas, r)
	}
	return out
}
