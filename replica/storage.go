package replica

import (
	"errors"
	"slices"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// storage is raft.Storage over a Journal. Raft panics on any storage error
// it does not expect, so errors are mapped to the two it handles
// (ErrCompacted, ErrUnavailable); a damaged entry is recorded in damage and
// reported as compacted, and the replica stops using the RawNode as soon
// as it sees the record.
type storage struct {
	journal  Journal
	state    State
	snapshot Snapshot // where the journal starts
	damage   error
	// sendable returns the snapshot to send a follower that needs entries
	// the journal no longer has (see Replica.sendableSnapshot).
	sendable func() (Snapshot, error)
}

func (s *storage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	hard := &pb.HardState{Term: proto.Uint64(s.state.Term), Vote: proto.Uint64(uint64(s.state.Vote)),
		Commit: proto.Uint64(s.state.Commit)}
	return hard, confState(s.state.Config), nil
}

func (s *storage) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	entries, err := s.journal.Entries(lo, hi, maxSize)
	if err != nil {
		return nil, s.mapError(err)
	}
	out := make([]*pb.Entry, len(entries))
	for i, e := range entries {
		out[i] = raftEntry(e)
	}
	return out, nil
}

func (s *storage) Term(index uint64) (uint64, error) {
	if index == s.snapshot.Index {
		return s.snapshot.Term, nil
	}
	term, err := s.journal.Term(index)
	if err != nil {
		return 0, s.mapError(err)
	}
	return term, nil
}

func (s *storage) LastIndex() (uint64, error) { return s.journal.LastIndex(), nil }

func (s *storage) FirstIndex() (uint64, error) { return s.journal.FirstIndex(), nil }

func (s *storage) Snapshot() (*pb.Snapshot, error) {
	if s.damage != nil {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	snapshot, err := s.sendable()
	if err != nil {
		if s.damage == nil && errors.Is(err, ErrDamaged) {
			s.damage = err
		}
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	return raftSnapshot(snapshot), nil
}

func (s *storage) mapError(err error) error {
	switch {
	case errors.Is(err, ErrCompacted):
		return raft.ErrCompacted
	case errors.Is(err, ErrUnavailable):
		return raft.ErrUnavailable
	default:
		if s.damage == nil {
			s.damage = err
		}
		return raft.ErrCompacted
	}
}

func raftEntry(e Entry) *pb.Entry {
	kind := pb.EntryType_EntryNormal
	if e.Type == EntryConfChange {
		kind = pb.EntryType_EntryConfChangeV2
	}
	return &pb.Entry{Index: proto.Uint64(e.Index), Term: proto.Uint64(e.Term), Type: kind.Enum(), Data: e.Data}
}

func journalEntry(e *pb.Entry) Entry {
	kind := EntryNormal
	if e.GetType() != pb.EntryType_EntryNormal {
		kind = EntryConfChange
	}
	return Entry{Index: e.GetIndex(), Term: e.GetTerm(), Type: kind, Data: e.GetData()}
}

func confState(m Membership) *pb.ConfState {
	return &pb.ConfState{Voters: ids(m.Voters), Learners: ids(m.Learners),
		VotersOutgoing: ids(m.VotersOutgoing), LearnersNext: ids(m.LearnersNext),
		AutoLeave: proto.Bool(m.AutoLeave)}
}

func membership(cs *pb.ConfState) Membership {
	return Membership{Voters: replicaIDs(cs.GetVoters()), Learners: replicaIDs(cs.GetLearners()),
		VotersOutgoing: replicaIDs(cs.GetVotersOutgoing()), LearnersNext: replicaIDs(cs.GetLearnersNext()),
		AutoLeave: cs.GetAutoLeave()}
}

func raftSnapshot(s Snapshot) *pb.Snapshot {
	return &pb.Snapshot{
		Data: encodeSnapshotData(s),
		Metadata: &pb.SnapshotMetadata{Index: proto.Uint64(s.Index), Term: proto.Uint64(s.Term),
			ConfState: confState(s.Config)},
	}
}

func ids(members []ReplicaID) []uint64 {
	out := make([]uint64, len(members))
	for i, m := range members {
		out[i] = uint64(m)
	}
	return out
}

func replicaIDs(members []uint64) []ReplicaID {
	out := make([]ReplicaID, len(members))
	for i, m := range members {
		out[i] = ReplicaID(m)
	}
	slices.Sort(out)
	return out
}
