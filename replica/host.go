package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// ErrUnknownGroup: the host runs no replica of the group named.
var ErrUnknownGroup = errors.New("replica: no replica of this group on this node")

// HostConfig builds a Host.
type HostConfig struct {
	// Send hands a message for a replica of group on node to the
	// transport. It must not block (the transport queues or drops; Raft
	// retries) and must copy message if it keeps it.
	Send func(node uint32, group GroupID, message []byte)
	// TickInterval is Raft's logical clock (default 100 ms): elections
	// happen after Config.ElectionTicks of them without a leader.
	TickInterval time.Duration
	// InboxSize bounds the requests and messages waiting for the loop
	// (default 4,096); a full inbox makes Deliver drop (Raft retries) and
	// Propose wait.
	InboxSize int
	Logger    *slog.Logger
}

// Host runs the replicas of one node on one goroutine: it delivers their
// messages, ticks them, runs their proposals and processes their Readys.
// Everything outside the loop talks to it through its inbox, so its
// methods are safe for concurrent use. Proposals that arrive together are
// processed together: their entries share one journal write and sync.
type Host struct {
	config   HostConfig
	inbox    chan func()
	replicas map[GroupID]*Replica // owned by the loop
	done     chan struct{}
	stop     context.CancelFunc
	wg       sync.WaitGroup
}

// NewHost starts a host's loop. Close stops it.
func NewHost(config HostConfig) *Host {
	if config.TickInterval <= 0 {
		config.TickInterval = 100 * time.Millisecond
	}
	if config.InboxSize <= 0 {
		config.InboxSize = 4096
	}
	if config.Logger == nil {
		config.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, stop := context.WithCancel(context.Background())
	h := &Host{config: config, inbox: make(chan func(), config.InboxSize),
		replicas: map[GroupID]*Replica{}, done: make(chan struct{}), stop: stop}
	h.wg.Add(1)
	go h.loop(ctx)
	return h
}

// Add opens a replica of a group on this host. Config's Send is the
// host's; bootstrap, when not empty, founds a new group with those voters
// (see Replica.Bootstrap).
func (h *Host) Add(ctx context.Context, config Config, bootstrap []ReplicaID) error {
	group := config.Group
	config.Send = func(to ReplicaID, message []byte) { h.config.Send(to.Node(), group, message) }
	if config.Logger == nil {
		config.Logger = h.config.Logger
	}
	return h.call(ctx, func() error {
		if _, ok := h.replicas[group]; ok {
			return fmt.Errorf("replica: group %d already runs here", group)
		}
		r, err := New(config)
		if err != nil {
			return err
		}
		if len(bootstrap) > 0 {
			if err := r.Bootstrap(bootstrap); err != nil {
				return err
			}
		}
		h.replicas[group] = r
		return nil
	})
}

// Remove closes a group's replica (its pending proposals fail with
// ErrClosed). The journal is the caller's.
func (h *Host) Remove(ctx context.Context, group GroupID) error {
	return h.call(ctx, func() error {
		r, ok := h.replicas[group]
		if !ok {
			return ErrUnknownGroup
		}
		r.Close()
		delete(h.replicas, group)
		return nil
	})
}

// Deliver queues a message from a peer for a group's replica. It never
// blocks: when the inbox is full the message is dropped and Raft resends.
func (h *Host) Deliver(group GroupID, message []byte) {
	select {
	case h.inbox <- func() {
		if r, ok := h.replicas[group]; ok {
			if err := r.Step(message); err != nil {
				h.config.Logger.Warn("replica: message refused", "group", group, "error", err)
			}
		}
	}:
	default:
	}
}

// Propose proposes records to a group on this host. It returns once the
// entry is proposed (the proposal's Done closes when it is committed) or
// with *NotLeaderError when this host's replica does not lead.
func (h *Host) Propose(ctx context.Context, group GroupID, records []Record) (*Proposal, error) {
	var p *Proposal
	err := h.call(ctx, func() error {
		r, ok := h.replicas[group]
		if !ok {
			return ErrUnknownGroup
		}
		var err error
		p, err = r.ProposeRecords(records)
		return err
	})
	return p, err
}

// NodeUnreachable tells every replica that its peers on node could not be
// reached (a failed dial, a lost connection), so Raft stops pipelining to
// them until they answer again. It never blocks; when the inbox is full
// the report is dropped (the next failure reports again).
func (h *Host) NodeUnreachable(node uint32) {
	select {
	case h.inbox <- func() {
		for _, r := range h.replicas {
			for _, member := range r.members() {
				if member.Node() == node {
					r.ReportUnreachable(member)
				}
			}
		}
	}:
	default:
	}
}

// Do runs f on the loop with the group's replica, for the calls Host does
// not wrap (membership, transfer, control entries).
func (h *Host) Do(ctx context.Context, group GroupID, f func(*Replica) error) error {
	return h.call(ctx, func() error {
		r, ok := h.replicas[group]
		if !ok {
			return ErrUnknownGroup
		}
		return f(r)
	})
}

// Status reports a group's replica.
func (h *Host) Status(ctx context.Context, group GroupID) (Status, error) {
	var s Status
	err := h.Do(ctx, group, func(r *Replica) error { s = r.Status(); return nil })
	return s, err
}

// Groups lists the groups this host runs.
func (h *Host) Groups(ctx context.Context) ([]GroupID, error) {
	var out []GroupID
	err := h.call(ctx, func() error {
		for g := range h.replicas {
			out = append(out, g)
		}
		return nil
	})
	return out, err
}

// Close stops the loop and closes every replica.
func (h *Host) Close() {
	h.stop()
	h.wg.Wait()
}

func (h *Host) call(ctx context.Context, f func() error) error {
	result := make(chan error, 1)
	select {
	case h.inbox <- func() { result <- f() }:
	case <-h.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-result:
		return err
	case <-h.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *Host) loop(ctx context.Context) {
	defer h.wg.Done()
	defer close(h.done)
	ticker := time.NewTicker(h.config.TickInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			for _, r := range h.replicas {
				r.Close()
			}
			return
		case f := <-h.inbox:
			f()
			h.drain()
		case <-ticker.C:
			for _, r := range h.replicas {
				r.Tick()
			}
		}
		h.processAll()
	}
}

// drain runs what else is already waiting, so that proposals and messages
// that arrived together share one Ready (one write, one sync).
func (h *Host) drain() {
	for range cap(h.inbox) {
		select {
		case f := <-h.inbox:
			f()
		default:
			return
		}
	}
}

// processAll handles every replica's Readys in rounds: each round writes
// every ready replica's entries, syncs their journals in parallel (one
// fdatasync per journal, all in flight together), then finishes them. A
// round's messages can make more Readys; rounds repeat until none is left
// or the bound is reached (the next loop turn picks up the rest).
func (h *Host) processAll() {
	for range 16 {
		type started struct {
			group   GroupID
			replica *Replica
			work    *readyWork
			err     error
		}
		var round []started
		for group, r := range h.replicas {
			if !r.HasReady() {
				continue
			}
			work, err := r.begin()
			if err != nil {
				h.config.Logger.Error("replica: stopped", "group", group, "error", err)
				continue
			}
			if work != nil {
				round = append(round, started{group: group, replica: r, work: work})
			}
		}
		if len(round) == 0 {
			return
		}
		var wg sync.WaitGroup
		for i := range round {
			if !round[i].work.sync {
				continue
			}
			if len(round) == 1 {
				round[i].err = round[i].replica.config.Journal.Sync()
				continue
			}
			wg.Go(func() { round[i].err = round[i].replica.config.Journal.Sync() })
		}
		wg.Wait()
		for _, s := range round {
			if err := s.replica.end(s.work, s.err); err != nil {
				h.config.Logger.Error("replica: stopped", "group", s.group, "error", err)
			}
		}
	}
}

// HandOver asks every replica that leads to hand its leadership to its
// most caught-up peer, and waits until none of them leads or ctx ends:
// a planned stop then pauses each partition for a transfer, not for an
// election timeout. It returns how many still lead.
func (h *Host) HandOver(ctx context.Context) int {
	_ = h.call(ctx, func() error {
		for _, r := range h.replicas {
			if to := r.successor(); to != 0 {
				r.TransferLeadership(to)
			}
		}
		return nil
	})
	ticker := time.NewTicker(10 * time.Millisecond)
	defer ticker.Stop()
	for {
		leading := 0
		_ = h.call(ctx, func() error {
			for _, r := range h.replicas {
				if r.Status().Role == RoleLeader {
					leading++
				}
			}
			return nil
		})
		if leading == 0 || ctx.Err() != nil {
			return leading
		}
		select {
		case <-ctx.Done():
		case <-ticker.C:
		}
	}
}
