package security

import (
	"errors"
	"fmt"
	"testing"
)

// halfOpenPeer is a test connection: evicting it marks it evicted, unless
// it is authenticating.
type halfOpenPeer struct {
	name           string
	evicted        bool
	authenticating bool
	admission      *Admission
}

func (p *halfOpenPeer) evict() bool {
	if p.authenticating {
		return false
	}
	p.evicted = true
	return true
}

func admitPeer(t *testing.T, gate *Gate, remote string) *halfOpenPeer {
	t.Helper()
	p := &halfOpenPeer{name: remote}
	admission, err := gate.Admit(remote, p.evict)
	if err != nil {
		t.Fatalf("%s refused: %v", remote, err)
	}
	p.admission = admission
	return p
}

// TestHalfOpenEvictsTheSourcesOldest: a source at its cap evicts its own
// oldest connection, never another source's.
func TestHalfOpenEvictsTheSourcesOldest(t *testing.T) {
	gate := NewGate(GateOptions{MaxHalfOpen: 10, MaxHalfOpenPerSource: 2, ConnectionsPerSecond: -1})
	other := admitPeer(t, gate, "10.0.0.2:1")
	first := admitPeer(t, gate, "10.0.0.1:1")
	second := admitPeer(t, gate, "10.0.0.1:2")
	third := admitPeer(t, gate, "10.0.0.1:3")
	if !first.evicted || second.evicted || third.evicted || other.evicted {
		t.Fatalf("evicted: first %v second %v third %v other source %v; want only the first",
			first.evicted, second.evicted, third.evicted, other.evicted)
	}
	if gate.HalfOpen() != 3 {
		t.Fatalf("%d half-open, want 3", gate.HalfOpen())
	}
	first.admission.Release() // after its eviction: a no-op
	second.admission.Release()
	second.admission.Release()
	if gate.HalfOpen() != 2 {
		t.Fatalf("%d half-open after releases, want 2", gate.HalfOpen())
	}
}

// TestHalfOpenEvictsTheOldestWhenFull: a full table evicts its oldest
// connection, passing over one that is authenticating; with none
// evictable the newcomer is refused.
func TestHalfOpenEvictsTheOldestWhenFull(t *testing.T) {
	gate := NewGate(GateOptions{MaxHalfOpen: 3, MaxHalfOpenPerSource: -1, ConnectionsPerSecond: -1})
	var peers []*halfOpenPeer
	for i := range 3 {
		peers = append(peers, admitPeer(t, gate, fmt.Sprintf("10.0.0.%d:1", i+1)))
	}
	peers[0].authenticating = true
	admitPeer(t, gate, "10.0.1.1:1")
	if peers[0].evicted || !peers[1].evicted || peers[2].evicted {
		t.Fatalf("evicted %v %v %v; want the oldest that was not authenticating", peers[0].evicted, peers[1].evicted, peers[2].evicted)
	}
	gate2 := NewGate(GateOptions{MaxHalfOpen: 1, MaxHalfOpenPerSource: -1, ConnectionsPerSecond: -1})
	busy := admitPeer(t, gate2, "10.0.0.1:1")
	busy.authenticating = true
	if _, err := gate2.Admit("10.0.0.2:1", func() bool { return true }); !errors.Is(err, ErrHalfOpenFull) {
		t.Fatalf("with nothing evictable: %v", err)
	}
	busy.admission.Release()
	admitPeer(t, gate2, "10.0.0.2:1")
}

// TestHalfOpenSourceCapRefusesWhenNothingEvictable: a source whose
// half-open connections are all authenticating is refused at its cap.
func TestHalfOpenSourceCapRefusesWhenNothingEvictable(t *testing.T) {
	gate := NewGate(GateOptions{MaxHalfOpenPerSource: 1, ConnectionsPerSecond: -1})
	admitPeer(t, gate, "10.0.0.1:1").authenticating = true
	if _, err := gate.Admit("10.0.0.1:2", nil); !errors.Is(err, ErrSourceHalfOpenFull) {
		t.Fatalf("at the source cap with nothing evictable: %v", err)
	}
	admitPeer(t, gate, "10.0.0.2:1")
}

// TestRateLimitedSourceEvictsNothing: a connection over the source's rate
// is refused before it can evict anyone.
func TestRateLimitedSourceEvictsNothing(t *testing.T) {
	gate := NewGate(GateOptions{MaxHalfOpenPerSource: 1, ConnectionsPerSecond: 1, ConnectionBurst: 1})
	p := admitPeer(t, gate, "10.0.0.1:1")
	if _, err := gate.Admit("10.0.0.1:2", nil); !errors.Is(err, ErrRateLimited) || p.evicted {
		t.Fatalf("over the rate: %v, evicted %v", err, p.evicted)
	}
}
