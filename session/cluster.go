package session

import (
	"context"
	"fmt"

	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/wire"
)

// ClusterView answers ClusterInfo for a broker that is a cluster member.
// Any goroutine.
type ClusterView interface {
	ClusterState(ctx context.Context, partitions bool, stream string) (*wire.ClusterState, error)
	// CreateStream creates a replicated stream through the metadata
	// group and returns once this node serves it; the same stream again
	// is not an error.
	CreateStream(ctx context.Context, name string, partitions uint32, replicas int) error
	// TransferLeadership moves a replicated partition's leadership to
	// node to, on the node leading it, and returns once that node leads
	// and takes appends. Errors: *broker.NotLeaderError naming the
	// leader, broker.ErrNoLeader (retryable), broker.ErrInvalidArgument
	// for a stream that is not replicated, a partition it does not have
	// or a node that is not a voter of it, broker.ErrNoSuchStream.
	TransferLeadership(ctx context.Context, stream string, partition uint32, to uint32) (*wire.LeaderTransferred, error)
}

// clusterInfo serves a ClusterInfo request: the nodes to every
// authenticated client (an SDK needs them to reach a partition's leader),
// the partitions of the streams the identity may publish to, consume or
// administer.
func (s *session) clusterInfo(frame wire.Frame) error {
	if s.capabilities&wire.CapCluster == 0 || s.cfg.Cluster == nil {
		s.reply(frame.RequestID, wire.NewError(wire.CodeInvalidRequest, "ClusterInfo is served only by cluster members, on connections with the cluster capability"))
		return nil
	}
	m, err := wire.DecodeClusterInfo(frame.Body)
	if err != nil {
		return s.malformed(frame, err)
	}
	identity, refused, err := s.admitRequester(security.ScopeSubscribe, frame.RequestID)
	if refused {
		return err
	}
	stream := string(m.Stream)
	partitions := m.Flags&wire.ClusterInfoPartitions != 0
	s.consumers.Add(1)
	go func() {
		defer s.consumers.Done()
		state, err := s.cfg.Cluster.ClusterState(s.ctx, partitions, stream)
		if err != nil {
			s.out.frame(wire.Append(nil, frame.RequestID, wireError(err)))
			return
		}
		visible := state.Partitions[:0]
		for _, p := range state.Partitions {
			name := string(p.Stream)
			if sees(identity, security.ScopePublish, name) || sees(identity, security.ScopeSubscribe, name) ||
				sees(identity, security.ScopeAdmin, name) {
				visible = append(visible, p)
			}
		}
		state.Partitions = visible
		s.out.frame(wire.Append(nil, frame.RequestID, state))
	}()
	return nil
}

// leaderTransfer serves a LeaderTransfer request: the stream's admin
// scope moves its partitions' leaders. The wait for the new leader runs
// off the reader, like an admin request.
func (s *session) leaderTransfer(frame wire.Frame) error {
	if s.capabilities&wire.CapCluster == 0 || s.cfg.Cluster == nil {
		s.reply(frame.RequestID, wire.NewError(wire.CodeInvalidRequest, "LeaderTransfer is served only by cluster members, on connections with the cluster capability; a single node has no leaders to move"))
		return nil
	}
	m, err := wire.DecodeLeaderTransfer(frame.Body)
	if err != nil {
		return s.malformed(frame, err)
	}
	if refused, err := s.refused(security.ScopeAdmin, m.Stream, frame.RequestID); refused {
		return err
	}
	if m.To == 0 {
		s.reply(frame.RequestID, wire.NewError(wire.CodeInvalidRequest, "LeaderTransfer names node 0; node ids start at 1"))
		return nil
	}
	s.auditAdmin("admin.cluster.transfer", fmt.Sprintf("stream %q partition %d to node %d", m.Stream, m.Partition, m.To))
	external := clone(m.Stream)
	engine, err := s.engineName(m.Stream, frame.RequestID)
	if err != nil {
		return nil
	}
	name := string(engine)
	s.consumers.Add(1)
	go func() {
		defer s.consumers.Done()
		answer, err := s.cfg.Cluster.TransferLeadership(s.ctx, name, m.Partition, m.To)
		if err != nil {
			s.out.frame(wire.Append(nil, frame.RequestID, s.hide(wireError(err))))
			return
		}
		answer.Stream = external
		s.out.frame(wire.Append(nil, frame.RequestID, answer))
	}()
	return nil
}
