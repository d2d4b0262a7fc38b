package peerlink

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/internal/faultproxy"
)

func (u *unreachables) count(node NodeID) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, reported := range u.nodes {
		if reported == node {
			n++
		}
	}
	return n
}

// TestLinkSurvivesProxyFaults runs a pair through the nemesis tests' fault
// proxy: node 1 dials node 2 through it (only the lower id dials, so this
// one proxy carries the pair's traffic). A partition is noticed on both
// sides by the idle timeout, a reset at once, and the link comes back
// after each.
func TestLinkSurvivesProxyFaults(t *testing.T) {
	short := func(config Config) Config {
		config.IdleTimeout, config.HandshakeTimeout = 500*time.Millisecond, 500*time.Millisecond
		return config
	}
	listener := listen(t, "127.0.0.1:0")
	proxy, err := faultproxy.Listen("127.0.0.1:0", listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	two := startNode(t, short(testConfig("test", 2, listener, map[NodeID]string{1: ""})))
	one := startNode(t, short(testConfig("test", 1, listen(t, "127.0.0.1:0"), map[NodeID]string{2: proxy.Addr()})))
	exchange(t, one, two, 1)
	exchange(t, two, one, 1)

	t.Run("partition", func(t *testing.T) {
		before1, before2 := one.unreachable.count(2), two.unreachable.count(1)
		proxy.Blackhole(faultproxy.Both)
		eventually(t, "both sides notice", func() bool {
			return one.unreachable.count(2) > before1 && two.unreachable.count(1) > before2
		})
		if err := peerStatus(two.link, 1).LastError; !errors.Is(err, ErrIdle) {
			t.Fatalf("node 2 lost node 1 with %v, want ErrIdle", err)
		}
		proxy.Pass()
		exchange(t, one, two, 2)
		exchange(t, two, one, 2)
	})
	t.Run("one direction", func(t *testing.T) {
		before := two.unreachable.count(1)
		proxy.Blackhole(faultproxy.Forward) // node 1 is heard by nobody
		eventually(t, "node 2 notices node 1 went silent", func() bool { return two.unreachable.count(1) > before })
		proxy.Pass()
		exchange(t, one, two, 3)
		exchange(t, two, one, 3)
	})
	t.Run("reset", func(t *testing.T) {
		before := one.unreachable.count(2)
		proxy.Reset()
		eventually(t, "node 1 notices the reset", func() bool { return one.unreachable.count(2) > before })
		proxy.Pass()
		exchange(t, one, two, 4)
		exchange(t, two, one, 4)
	})
	t.Run("delay and throttle", func(t *testing.T) {
		proxy.Delay(20 * time.Millisecond)
		proxy.Throttle(1 << 20)
		exchange(t, one, two, 5)
		exchange(t, two, one, 5)
		proxy.Pass()
	})
}

// TestConcurrentSendersWhileConnectionsBreak sends from several goroutines
// while the proxy resets the pair's connection again and again: nothing
// may panic or race, no message may arrive twice, and messages flow again
// once the faults stop.
func TestConcurrentSendersWhileConnectionsBreak(t *testing.T) {
	listener := listen(t, "127.0.0.1:0")
	proxy, err := faultproxy.Listen("127.0.0.1:0", listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	two := startNode(t, testConfig("test", 2, listener, map[NodeID]string{1: ""}))
	one := startNode(t, testConfig("test", 1, listen(t, "127.0.0.1:0"), map[NodeID]string{2: proxy.Addr()}))
	exchange(t, one, two, 99)

	const senders, perSender = 4, 2000
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				proxy.Pass()
				return
			case <-time.After(15 * time.Millisecond):
			}
			proxy.Reset()
			time.Sleep(5 * time.Millisecond)
			proxy.Pass()
		}
	})
	for sender := range uint64(senders) {
		wg.Go(func() {
			for sequence := range uint64(perSender) {
				one.link.Send(2, sender, sequencePayload(sequence, 32))
				two.link.Send(1, sender, sequencePayload(sequence, 32))
				if sequence%100 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	for _, node := range []*testNode{one, two} {
		from := NodeID(3) - node.id
		for sender := range uint64(senders) {
			seen := map[uint64]bool{}
			for _, sequence := range node.received.sequence(from, sender) {
				if seen[sequence] {
					t.Fatalf("node %d got message %d of sender %d twice", node.id, sequence, sender)
				}
				seen[sequence] = true
			}
		}
	}
	exchange(t, one, two, 100)
	exchange(t, two, one, 100)
	status := peerStatus(one.link, 2)
	t.Logf("node 1 to node 2: %d connects, %d sent, %d dropped", status.Connects, status.MessagesSent, status.MessagesDropped)
}
