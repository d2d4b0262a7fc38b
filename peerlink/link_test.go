package peerlink

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder keeps what a node's Handler received: the sequence numbers
// per (sender, channel), in arrival order.
type recorder struct {
	mu  sync.Mutex
	got map[recordKey][]uint64
}

type recordKey struct {
	from    NodeID
	channel uint64
}

func newRecorder() *recorder { return &recorder{got: map[recordKey][]uint64{}} }

func (r *recorder) handle(from NodeID, channel uint64, payload []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := recordKey{from, channel}
	r.got[key] = append(r.got[key], le.Uint64(payload))
}

func (r *recorder) sequence(from NodeID, channel uint64) []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got[recordKey{from, channel}])
}

func (r *recorder) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, sequence := range r.got {
		n += len(sequence)
	}
	return n
}

// syncBuffer is a log destination safe for the link's goroutines.
type syncBuffer struct {
	mu     sync.Mutex
	buffer bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buffer.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buffer.String()
}

// unreachables records Unreachable calls.
type unreachables struct {
	mu    sync.Mutex
	nodes []NodeID
}

func (u *unreachables) report(node NodeID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.nodes = append(u.nodes, node)
}

func (u *unreachables) saw(node NodeID) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Contains(u.nodes, node)
}

// testNode is one link with its recorder.
type testNode struct {
	id          NodeID
	link        *Link
	received    *recorder
	unreachable *unreachables
}

func listen(t testing.TB, address string) net.Listener {
	t.Helper()
	listener, err := net.Listen("tcp", address)
	if err != nil {
		t.Fatal(err)
	}
	return listener
}

// testConfig has timeouts short enough for tests and long enough for a
// loaded machine.
func testConfig(cluster string, id NodeID, listener net.Listener, peers map[NodeID]string) Config {
	return Config{Cluster: cluster, Node: id, Listener: listener, Peers: peers,
		HeartbeatInterval: 50 * time.Millisecond, IdleTimeout: 3 * time.Second,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond}
}

func startNode(t testing.TB, config Config) *testNode {
	t.Helper()
	node := &testNode{id: config.Node, received: newRecorder(), unreachable: &unreachables{}}
	if config.Handler == nil {
		config.Handler = node.received.handle
	}
	config.Unreachable = node.unreachable.report
	link, err := New(config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { link.Close() })
	node.link = link
	return node
}

// startCluster starts n nodes (ids 1..n) that all know each other.
func startCluster(t testing.TB, n int, adjust func(*Config)) []*testNode {
	t.Helper()
	listeners := map[NodeID]net.Listener{}
	addresses := map[NodeID]string{}
	for id := NodeID(1); id <= NodeID(n); id++ {
		listeners[id] = listen(t, "127.0.0.1:0")
		addresses[id] = listeners[id].Addr().String()
	}
	var nodes []*testNode
	for id := NodeID(1); id <= NodeID(n); id++ {
		peers := map[NodeID]string{}
		for other, address := range addresses {
			if other != id {
				peers[other] = address
			}
		}
		config := testConfig("test", id, listeners[id], peers)
		if adjust != nil {
			adjust(&config)
		}
		nodes = append(nodes, startNode(t, config))
	}
	return nodes
}

func eventually(t testing.TB, what string, condition func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !condition() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func peerStatus(link *Link, id NodeID) PeerStatus {
	for _, p := range link.Status().Peers {
		if p.Node == id {
			return p
		}
	}
	return PeerStatus{}
}

func allConnected(nodes []*testNode) func() bool {
	return func() bool {
		for _, node := range nodes {
			for _, p := range node.link.Status().Peers {
				if !p.Connected {
					return false
				}
			}
		}
		return true
	}
}

func sequencePayload(sequence uint64, size int) []byte {
	payload := make([]byte, max(size, 8))
	le.PutUint64(payload, sequence)
	return payload
}

func TestThreeNodesExchangeMessagesForManyChannels(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	eventually(t, "every pair is connected", allConnected(nodes))

	const channels, perChannel = 64, 40
	for sequence := range uint64(perChannel) {
		for _, from := range nodes {
			for _, to := range nodes {
				if from == to {
					continue
				}
				for channel := range uint64(channels) {
					if !from.link.Send(to.id, channel<<32|uint64(to.id), sequencePayload(sequence, 100)) {
						t.Fatalf("node %d could not queue to node %d", from.id, to.id)
					}
				}
			}
		}
	}
	want := 2 * channels * perChannel
	for _, node := range nodes {
		eventually(t, fmt.Sprintf("node %d received %d messages", node.id, want), func() bool { return node.received.total() == want })
	}
	inOrder := make([]uint64, perChannel)
	for i := range inOrder {
		inOrder[i] = uint64(i)
	}
	for _, to := range nodes {
		for _, from := range nodes {
			if from == to {
				continue
			}
			for channel := range uint64(channels) {
				if got := to.received.sequence(from.id, channel<<32|uint64(to.id)); !slices.Equal(got, inOrder) {
					t.Fatalf("node %d from node %d channel %d: got %v", to.id, from.id, channel, got)
				}
			}
		}
	}
	// One connection per pair, made once, by the lower id.
	for _, node := range nodes {
		for _, p := range node.link.Status().Peers {
			if p.Connects != 1 || p.Dials != (node.id < p.Node) || p.MessagesDropped != 0 {
				t.Errorf("node %d peer %d: %+v", node.id, p.Node, p)
			}
			if p.MessagesSent != channels*perChannel || p.MessagesReceived != channels*perChannel {
				t.Errorf("node %d peer %d: sent %d received %d", node.id, p.Node, p.MessagesSent, p.MessagesReceived)
			}
		}
	}
}

// exchange sends until node to has received one message from node from
// on channel, then returns; messages may be dropped while a connection is
// being remade.
func exchange(t *testing.T, from, to *testNode, channel uint64) {
	t.Helper()
	eventually(t, fmt.Sprintf("node %d hears node %d on channel %d", to.id, from.id, channel), func() bool {
		from.link.Send(to.id, channel, sequencePayload(0, 8))
		time.Sleep(5 * time.Millisecond)
		return len(to.received.sequence(from.id, channel)) > 0
	})
}

func TestReconnectAfterEitherSideRestarts(t *testing.T) {
	nodes := startCluster(t, 2, nil)
	one, two := nodes[0], nodes[1]
	exchange(t, one, two, 1)
	exchange(t, two, one, 1)

	// The higher node (the acceptor) restarts on the same address.
	address := two.link.Addr().String()
	two.link.Close()
	eventually(t, "node 1 reports node 2 unreachable", func() bool { return one.unreachable.saw(2) })
	two = startNode(t, testConfig("test", 2, listen(t, address), map[NodeID]string{1: ""}))
	exchange(t, one, two, 2)
	exchange(t, two, one, 2)

	// The lower node (the dialer) restarts: its new connection replaces
	// the one node 2 still holds.
	oneAddress := one.link.Addr().String()
	one.link.Close()
	one = startNode(t, testConfig("test", 1, listen(t, oneAddress), map[NodeID]string{2: address}))
	exchange(t, one, two, 3)
	exchange(t, two, one, 3)
	if status := peerStatus(two.link, 1); status.Connects < 2 || !status.Connected {
		t.Fatalf("node 2's view of node 1: %+v", status)
	}
}

func TestHandshakeRefusesAnotherClusterAndAnotherNode(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	eventually(t, "every pair is connected", allConnected(nodes))

	t.Run("another cluster", func(t *testing.T) {
		var logged syncBuffer
		config := testConfig("other", 1, listen(t, "127.0.0.1:0"), map[NodeID]string{2: nodes[1].link.Addr().String()})
		config.Logger = slog.New(slog.NewTextHandler(&logged, nil))
		stranger := startNode(t, config)
		eventually(t, "the stranger is refused", func() bool {
			err := peerStatus(stranger.link, 2).LastError
			return errors.Is(err, ErrRefused) && errors.Is(err, ErrWrongCluster)
		})
		if !stranger.unreachable.saw(2) || nodes[1].link.Status().InboundRefused == 0 ||
			peerStatus(stranger.link, 2).HandshakeFailures == 0 {
			t.Fatalf("refusal not counted on both sides")
		}
		if text := logged.String(); !strings.Contains(text, "another cluster") || !strings.Contains(text, "level=WARN") {
			t.Fatalf("refusal not logged: %s", text)
		}
	})
	t.Run("an address that now belongs to another node", func(t *testing.T) {
		// Node 1 of the same cluster believes node 2 lives at node 3's
		// address: node 3 refuses it, and no message reaches node 3.
		confused := startNode(t, testConfig("test", 1, listen(t, "127.0.0.1:0"), map[NodeID]string{2: nodes[2].link.Addr().String()}))
		confused.link.Send(2, 5, sequencePayload(0, 8))
		eventually(t, "the confused dialer is refused", func() bool {
			err := peerStatus(confused.link, 2).LastError
			return errors.Is(err, ErrRefused) && errors.Is(err, ErrWrongNode)
		})
		if got := nodes[2].received.sequence(1, 5); len(got) != 0 {
			t.Fatalf("node 3 received %v meant for node 2", got)
		}
	})
}

// greet dials address as a raw client, sends greeting and returns the
// answer (or the error reading it).
func greet(t *testing.T, address string, greeting []byte) (hello, error) {
	t.Helper()
	conn, err := net.Dial("tcp", address)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(greeting); err != nil {
		t.Fatal(err)
	}
	return readHello(conn)
}

func TestAcceptorRefusesWrongDialers(t *testing.T) {
	nodes := startCluster(t, 2, nil)
	address := nodes[1].link.Addr().String() // node 2
	cases := []struct {
		name     string
		greeting hello
		want     refusal
	}{
		{"higher id dials", hello{version: protocolVersion, sender: 3, receiver: 2, cluster: "test"}, refusalDialDirection},
		{"self", hello{version: protocolVersion, sender: 2, receiver: 2, cluster: "test"}, refusalDialDirection},
		{"unknown lower node", hello{version: protocolVersion, sender: 1, receiver: 2, cluster: "test"}, refusalUnknownNode},
		{"wrong receiver", hello{version: protocolVersion, sender: 1, receiver: 9, cluster: "test"}, refusalWrongNode},
		{"another version", hello{version: protocolVersion + 1, sender: 1, receiver: 2, cluster: "test"}, refusalVersion},
	}
	nodes[1].link.RemovePeer(1) // node 1 becomes unknown to node 2
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			answer, err := greet(t, address, c.greeting.encode())
			if err != nil {
				t.Fatal(err)
			}
			if answer.refusal != c.want || answer.sender != 2 {
				t.Fatalf("answer %+v, want refusal %d", answer, c.want)
			}
		})
	}
	t.Run("not a peer link", func(t *testing.T) {
		before := nodes[1].link.Status().InboundRefused
		if _, err := greet(t, address, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err == nil {
			t.Fatal("an HTTP request got a greeting back")
		}
		eventually(t, "the refusal is counted", func() bool { return nodes[1].link.Status().InboundRefused > before })
	})
}

func TestPlaintextOnlyOnLoopback(t *testing.T) {
	addresses, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	external := ""
	for _, address := range addresses {
		if ip, ok := address.(*net.IPNet); ok && !ip.IP.IsLoopback() && ip.IP.To4() != nil {
			external = ip.IP.String()
			break
		}
	}
	wildcard := listen(t, "0.0.0.0:0")
	config := testConfig("test", 1, wildcard, nil)
	config.Handler = func(NodeID, uint64, []byte) {}
	if _, err := New(config); !errors.Is(err, ErrNotLoopback) {
		t.Fatalf("plaintext on 0.0.0.0: %v", err)
	}
	node := startNode(t, testConfig("test", 1, listen(t, "127.0.0.1:0"), nil))
	if err := node.link.SetPeer(2, "192.0.2.77:8001"); !errors.Is(err, ErrNotLoopback) {
		t.Fatalf("plaintext peer at a non-loopback IP: %v", err)
	}
	if external == "" {
		t.Skip("no non-loopback IPv4 address to try a real connection on")
	}
	// Nodes that consent to plaintext beyond loopback talk over the
	// external address.
	insecure := testConfig("test", 2, listen(t, external+":0"), map[NodeID]string{1: ""})
	insecure.InsecurePlaintext = true
	far := startNode(t, insecure)
	config = testConfig("test", 1, listen(t, "127.0.0.1:0"), nil)
	config.InsecurePlaintext = true
	consenting := startNode(t, config)
	if err := consenting.link.SetPeer(2, far.link.Addr().String()); err != nil {
		t.Fatal(err)
	}
	exchange(t, consenting, far, 1)
}

func TestQueueFullDropsAndCounts(t *testing.T) {
	// Node 2 knows node 1 but node 1 never dials: everything node 2
	// sends stays queued, up to the bound.
	config := testConfig("test", 2, listen(t, "127.0.0.1:0"), map[NodeID]string{1: ""})
	config.QueueBytes = 1000
	config.MaxPayloadBytes = 500
	node := startNode(t, config)
	queued := 0
	for sequence := range uint64(100) {
		if node.link.Send(1, 1, sequencePayload(sequence, 100)) {
			queued++
		}
	}
	wantQueued := 1000 / frameBytes(100)
	if queued != wantQueued {
		t.Fatalf("queued %d, want %d", queued, wantQueued)
	}
	if node.link.Send(1, ControlChannel, nil) || node.link.Send(1, 2, make([]byte, 501)) || node.link.Send(9, 1, nil) {
		t.Fatal("a reserved channel, an oversized payload or an unknown node was accepted")
	}
	status := node.link.Status()
	p := peerStatus(node.link, 1)
	if p.QueueMessages != wantQueued || p.QueueBytes != wantQueued*frameBytes(100) ||
		p.MessagesDropped != uint64(100-wantQueued+2) || status.DroppedUnknown != 1 {
		t.Fatalf("status %+v, peer %+v", status, p)
	}
}

func TestSilentPeerIsClosedAfterIdleTimeout(t *testing.T) {
	config := testConfig("test", 2, listen(t, "127.0.0.1:0"), map[NodeID]string{1: ""})
	config.IdleTimeout = 300 * time.Millisecond
	node := startNode(t, config)
	// A raw node 1 that greets correctly and then says nothing.
	conn, err := net.Dial("tcp", node.link.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write(hello{version: protocolVersion, sender: 1, receiver: 2, cluster: "test"}.encode())
	if answer, err := readHello(conn); err != nil || answer.refusal != refusalNone {
		t.Fatalf("answer %+v, %v", answer, err)
	}
	eventually(t, "node 2 gives up on the silent node 1", func() bool {
		return errors.Is(peerStatus(node.link, 1).LastError, ErrIdle) && node.unreachable.saw(1)
	})
}

func TestCorruptFrameClosesOnlyThatConnection(t *testing.T) {
	node := startNode(t, testConfig("test", 2, listen(t, "127.0.0.1:0"), map[NodeID]string{1: ""}))
	conn, err := net.Dial("tcp", node.link.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write(hello{version: protocolVersion, sender: 1, receiver: 2, cluster: "test"}.encode())
	if _, err := readHello(conn); err != nil {
		t.Fatal(err)
	}
	good := appendFrame(nil, 4, sequencePayload(1, 8))
	bad := bytes.Clone(good)
	bad[len(bad)-1] ^= 0x80
	conn.Write(append(good, bad...))
	eventually(t, "the corrupt frame closes the connection", func() bool {
		return errors.Is(peerStatus(node.link, 1).LastError, ErrFrameCorrupt)
	})
	if got := node.received.sequence(1, 4); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("received %v, want only the good frame", got)
	}
}

func TestCloseIsPromptAndLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	// A "peer" that completes TCP connects (the kernel's backlog) but
	// never answers a greeting: node 1's handshake with it hangs.
	mute := listen(t, "127.0.0.1:0")
	defer mute.Close()
	var links []*Link
	func() {
		nodes := startCluster(t, 3, func(config *Config) {
			config.HandshakeTimeout = time.Minute
			config.DialTimeout = time.Minute
			if config.Node == 1 {
				config.Peers[4] = mute.Addr().String()
			}
		})
		eventually(t, "nodes 1-3 are connected", func() bool {
			return peerStatus(nodes[0].link, 2).Connected && peerStatus(nodes[0].link, 3).Connected &&
				peerStatus(nodes[1].link, 3).Connected
		})
		for _, node := range nodes {
			node.link.Send(1, 1, sequencePayload(1, 64))
			links = append(links, node.link)
		}
		// An inbound connection stuck before its greeting.
		stuck, err := net.Dial("tcp", nodes[2].link.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stuck.Close() })
		time.Sleep(50 * time.Millisecond)
	}()
	began := time.Now()
	for _, link := range links {
		if err := link.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(began); took > 20*time.Second {
		t.Fatalf("Close took %v with handshakes pending", took)
	}
	eventually(t, "the link's goroutines end", func() bool { return runtime.NumGoroutine() <= before })
	if err := links[0].SetPeer(5, ""); !errors.Is(err, ErrClosed) {
		t.Fatalf("SetPeer after Close: %v", err)
	}
}
