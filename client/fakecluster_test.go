package client_test

import (
	"net"
	"slices"
	"testing"
	"time"

	"github.com/ironbus/ironbus/wire"
)

// fakeCluster makes one fakeBroker a cluster of nodes: each node is a
// listener of its own, and the broker's state (logs, producer table) is
// shared, as a replicated partition's would be. Each partition has a
// leading node (node 0 unless moved); a produce on another node is
// answered not_leader naming the leader, and every produce no_leader
// while the cluster has none. Epochs fence per partition, as in a
// cluster whose producer tables live in the partitions: a record's epoch
// must be the one its connection announced, and never older than one
// the partition has seen.
type fakeCluster struct {
	b   *fakeBroker
	lns []net.Listener

	// Guarded by b.mu.
	addrs     []string
	dead      []bool
	leaders   map[string]int // logKey → leading node; absent: node 0
	noLeader  bool           // answer no_leader to every produce
	anonymous bool           // not_leader names no address
	loop      bool           // every node names the next one as the leader
	// lagRefusals: a follower answers the produces it refuses late, one
	// at a time, the newest first, so later records come back refused
	// while earlier ones are still unanswered.
	lagRefusals bool
	// adminNode, when not negative, is the only node that answers admin
	// requests (the metadata leader's role); the others say not_leader.
	adminNode  int
	redirects  int // not_leader answers sent
	noLeaders  int // no_leader answers sent
	connEpochs map[*fakeConn]map[uint64]uint32
	partEpochs map[fakeSeqKey]uint32
}

func startFakeCluster(tb testing.TB, nodes int, configure func(*fakeBroker)) (*fakeBroker, *fakeCluster) {
	c := &fakeCluster{adminNode: -1, leaders: map[string]int{}, connEpochs: map[*fakeConn]map[uint64]uint32{},
		partEpochs: map[fakeSeqKey]uint32{}, dead: make([]bool, nodes)}
	lns := make([]net.Listener, nodes)
	for i := 1; i < nodes; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		lns[i] = ln
	}
	b := startFake(tb, func(b *fakeBroker) {
		b.welcome.Capabilities |= wire.CapCluster
		b.cluster, c.b = c, b
		if configure != nil {
			configure(b)
		}
	})
	lns[0] = b.ln
	b.locked(func() {
		c.lns = lns
		for _, ln := range lns {
			c.addrs = append(c.addrs, ln.Addr().String())
		}
	})
	for i := 1; i < nodes; i++ {
		go b.acceptOn(lns[i], i)
	}
	return b, c
}

func (c *fakeCluster) addr(node int) string {
	var addr string
	c.b.locked(func() { addr = c.addrs[node] })
	return addr
}

func (c *fakeCluster) stop() {
	for _, ln := range c.lns[1:] {
		ln.Close()
	}
}

// move makes node lead a partition.
func (c *fakeCluster) move(stream string, partition uint32, node int) {
	c.b.locked(func() { c.leaders[logKey([]byte(stream), partition)] = node })
}

// kill stops a node: its listener and its connections close.
func (c *fakeCluster) kill(node int) {
	b := c.b
	b.mu.Lock()
	c.dead[node] = true
	ln := c.lns[node]
	var conns []*fakeConn
	for _, fc := range b.conns {
		if fc.node == node {
			conns = append(conns, fc)
		}
	}
	b.mu.Unlock()
	ln.Close()
	for _, fc := range conns {
		fc.conn.Close()
	}
}

func (c *fakeCluster) setNoLeader(on bool) { c.b.locked(func() { c.noLeader = on }) }

// leads answers nil when fc's node leads the partition, else the error
// a follower sends. b.mu is held.
func (c *fakeCluster) leads(fc *fakeConn, stream []byte, partition uint32) *wire.Error {
	if c.noLeader {
		c.noLeaders++
		werr := wire.NewError(wire.CodeNoLeader, "fake: an election")
		werr.RetryAfter = 20 * time.Millisecond
		return werr
	}
	leader := c.leaders[logKey(stream, partition)]
	if c.loop {
		leader = (fc.node + 1) % len(c.addrs)
	}
	if fc.node == leader {
		return nil
	}
	c.redirects++
	werr := wire.NewError(wire.CodeNotLeader, "fake: node %d does not lead %s/%d", fc.node+1, stream, partition)
	werr.HasValue, werr.Value = true, uint64(leader+1)
	if !c.anonymous {
		werr.Leader = c.addrs[leader]
	}
	return werr
}

// announced records the epoch a connection's ProducerInit gave. b.mu is
// held.
func (c *fakeCluster) announced(fc *fakeConn, id uint64, epoch uint32) {
	if c.connEpochs[fc] == nil {
		c.connEpochs[fc] = map[uint64]uint32{}
	}
	c.connEpochs[fc][id] = epoch
}

// fenced checks a stamped record's epoch. b.mu is held.
func (c *fakeCluster) fenced(fc *fakeConn, key fakeSeqKey, epoch uint32) bool {
	if c.connEpochs[fc][key.producer] != epoch || epoch < c.partEpochs[key] {
		return true
	}
	c.partEpochs[key] = epoch
	return false
}

// clusterInfo answers ClusterInfo: the nodes, and every configured
// stream's partitions with their leaders.
func (fc *fakeConn) clusterInfo(f wire.Frame) {
	b := fc.b
	m, err := wire.DecodeClusterInfo(f.Body)
	if err != nil || b.cluster == nil {
		b.problem("ClusterInfo: %v (cluster %v)", err, b.cluster != nil)
		return
	}
	c := b.cluster
	b.mu.Lock()
	state := &wire.ClusterState{ClusterID: []byte("fake"), Node: uint32(fc.node + 1), MetaLeader: 1}
	for i, addr := range c.addrs {
		node := wire.ClusterNode{ID: uint32(i + 1), Incarnation: 40 + uint32(i), ClientAddr: []byte(addr),
			ClusterAddr: []byte("peer-" + addr), State: wire.NodeUp, LastSeenMs: 12}
		if c.dead[i] {
			node.State, node.LastSeenMs = wire.NodeDown, wire.NeverSeen
		}
		state.Nodes = append(state.Nodes, node)
	}
	if m.Flags&wire.ClusterInfoPartitions != 0 {
		var streams []string
		for stream := range b.partitions {
			if len(m.Stream) == 0 || string(m.Stream) == stream {
				streams = append(streams, stream)
			}
		}
		slices.Sort(streams)
		for _, stream := range streams {
			for p := range b.partitions[stream] {
				leader := c.leaders[logKey([]byte(stream), p)]
				partition := wire.ClusterPartition{Stream: []byte(stream), Partition: p, Group: uint64(100 + p),
					Leader: uint32(leader + 1), Term: 3, Commit: 9, Watermark: 7}
				for i := range c.addrs {
					partition.Replicas = append(partition.Replicas, wire.ClusterReplica{Node: uint32(i + 1),
						Incarnation: 40 + uint32(i), Role: wire.RoleVoter, Match: 9 - uint64(i)})
				}
				if c.noLeader {
					partition.Leader = 0
				}
				state.Partitions = append(state.Partitions, partition)
			}
		}
	}
	b.mu.Unlock()
	fc.out = wire.Append(fc.out, f.RequestID, state)
}

// followerRefusal is leads for the consumer requests of a cluster node:
// nil on a single broker.
func (fc *fakeConn) followerRefusal(stream []byte, partition uint32) *wire.Error {
	if fc.b.cluster == nil {
		return nil
	}
	var werr *wire.Error
	fc.b.locked(func() { werr = fc.b.cluster.leads(fc, stream, partition) })
	return werr
}

// answerLate writes refusals one by one, newest first, a moment apart,
// behind whatever the connection answers meanwhile.
func (fc *fakeConn) answerLate(replies []reply) {
	replies = slices.Clone(replies)
	slices.Reverse(replies)
	fc.b.lateAnswers.Add(1)
	go func() {
		defer fc.b.lateAnswers.Done()
		for _, r := range replies {
			time.Sleep(500 * time.Microsecond)
			fc.writeReplies([]reply{r})
		}
	}()
}

// adminRefusal is the not_leader a node that does not answer admin
// requests sends; nil on a single broker.
func (fc *fakeConn) adminRefusal() *wire.Error {
	c := fc.b.cluster
	if c == nil {
		return nil
	}
	var werr *wire.Error
	fc.b.locked(func() {
		if c.adminNode >= 0 && c.adminNode != fc.node {
			c.redirects++
			werr = wire.NewError(wire.CodeNotLeader, "fake: node %d does not lead the metadata", fc.node+1)
			werr.Leader = c.addrs[c.adminNode]
		}
	})
	return werr
}
