package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hostCluster connects hosts through Deliver directly; a stopped host's
// messages go nowhere.
type hostCluster struct {
	hosts   map[uint32]*Host
	stopped map[uint32]*atomic.Bool
}

func newHostCluster(t *testing.T, nodes int, groups int) (*hostCluster, []ReplicaID) {
	t.Helper()
	c := &hostCluster{hosts: map[uint32]*Host{}, stopped: map[uint32]*atomic.Bool{}}
	var ids []ReplicaID
	for n := 1; n <= nodes; n++ {
		ids = append(ids, NewReplicaID(uint32(n), 1))
		c.stopped[uint32(n)] = &atomic.Bool{}
	}
	for n := 1; n <= nodes; n++ {
		from := uint32(n)
		c.hosts[from] = NewHost(HostConfig{TickInterval: 5 * time.Millisecond,
			Send: func(node uint32, group GroupID, message []byte) {
				if c.stopped[from].Load() || c.stopped[node].Load() {
					return
				}
				c.hosts[node].Deliver(group, message)
			}})
	}
	ctx := context.Background()
	for n := 1; n <= nodes; n++ {
		for g := 1; g <= groups; g++ {
			err := c.hosts[uint32(n)].Add(ctx, Config{ID: ids[n-1], Group: GroupID(g), Journal: NewMemoryJournal(),
				Apply: func([]Entry) error { return nil }}, ids)
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() {
		for _, h := range c.hosts {
			h.Close()
		}
	})
	return c, ids
}

// propose sends records to whichever host leads the group, following
// NotLeaderError, until one proposal commits.
func (c *hostCluster) propose(ctx context.Context, group GroupID, value string) (*Proposal, error) {
	node := uint32(1)
	for ctx.Err() == nil {
		if c.stopped[node].Load() {
			node = node%uint32(len(c.hosts)) + 1
			continue
		}
		p, err := c.hosts[node].Propose(ctx, group, testRecords(value))
		var notLeader *NotLeaderError
		switch {
		case errors.As(err, &notLeader):
			if notLeader.Leader != 0 && !c.stopped[notLeader.Leader.Node()].Load() {
				node = notLeader.Leader.Node()
			} else {
				node = node%uint32(len(c.hosts)) + 1
				time.Sleep(5 * time.Millisecond)
			}
			continue
		case errors.Is(err, ErrLeaderNotReady):
			time.Sleep(time.Millisecond)
			continue
		case err != nil:
			return nil, err
		}
		select {
		case <-p.Done():
			if p.Err() == nil {
				return p, nil
			}
		case <-ctx.Done():
		}
	}
	return nil, ctx.Err()
}

func TestHostsCommitConcurrentProposals(t *testing.T) {
	c, _ := newHostCluster(t, 3, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	offsets := make([][]uint64, 4)
	var mu sync.Mutex
	for g := 1; g <= 4; g++ {
		for w := range 3 {
			wg.Go(func() {
				for i := range 20 {
					p, err := c.propose(ctx, GroupID(g), fmt.Sprintf("%d-%d-%d", g, w, i))
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					offsets[g-1] = append(offsets[g-1], p.BaseOffset)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	for g, list := range offsets {
		seen := map[uint64]bool{}
		for _, o := range list {
			if seen[o] {
				t.Fatalf("group %d: offset %d acked twice", g+1, o)
			}
			seen[o] = true
		}
	}
}

func TestHostFailoverKeepsCommitting(t *testing.T) {
	c, _ := newHostCluster(t, 3, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	first, err := c.propose(ctx, 1, "before")
	if err != nil {
		t.Fatal(err)
	}
	var leader uint32
	for n, h := range c.hosts {
		if s, err := h.Status(ctx, 1); err == nil && s.Role == RoleLeader {
			leader = n
		}
	}
	if leader == 0 {
		t.Fatal("no leader after a commit")
	}
	c.stopped[leader].Store(true)
	after, err := c.propose(ctx, 1, "after")
	if err != nil {
		t.Fatal(err)
	}
	if after.BaseOffset != first.BaseOffset+1 {
		t.Fatalf("offsets %d then %d across failover", first.BaseOffset, after.BaseOffset)
	}
}

func TestHostHandOverMovesLeadership(t *testing.T) {
	c, _ := newHostCluster(t, 3, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for g := GroupID(1); g <= 2; g++ {
		if _, err := c.propose(ctx, g, "x"); err != nil {
			t.Fatal(err)
		}
	}
	var leader uint32
	for n, h := range c.hosts {
		if s, err := h.Status(ctx, 1); err == nil && s.Role == RoleLeader {
			leader = n
		}
	}
	if still := c.hosts[leader].HandOver(ctx); still != 0 {
		t.Fatalf("%d groups still led after the hand-over", still)
	}
	if _, err := c.propose(ctx, 1, "after"); err != nil {
		t.Fatal(err)
	}
}
