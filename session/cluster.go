package session

import (
	"context"

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
