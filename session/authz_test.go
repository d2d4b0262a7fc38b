package session

import (
	"bufio"
	"context"
	"crypto/tls"
	"slices"
	"testing"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/wire"
)

// Authorization beyond one stream name per request: admin verbs that
// reach other streams through bindings or lists, group ACLs, lease
// tokens and the subject rule (docs/SECURITY.md).

var authzIdentities = []security.IdentityEntry{
	{Name: "ops", TokenSHA256: security.TokenDigest("ops-token"), Admin: []string{">"}, Publish: []string{">"}, Subscribe: []string{">"}},
	{Name: "orders-admin", TokenSHA256: security.TokenDigest("orders-admin-token"), Admin: []string{"orders.x"}, Subscribe: []string{"orders.x"}},
	{Name: "star-admin", TokenSHA256: security.TokenDigest("star-admin-token"), Admin: []string{"*"}},
	{Name: "dlq-admin", TokenSHA256: security.TokenDigest("dlq-admin-token"), Admin: []string{"orders.x", ".dlq.orders.x"}},
}

func (s *securedBroker) dialAs(t *testing.T, name string) *client.Client {
	t.Helper()
	c, err := s.dial(t, client.TokenAuth(name+"-token"))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawAs opens a raw wire connection over TLS that authenticates as name
// with its token, for requests the client never builds.
func (s *securedBroker) rawAs(t *testing.T, name string) *rawClient {
	t.Helper()
	certFile, keyFile := s.clientCert(t, "raw-"+name, "")
	config, err := security.ClientTLSConfig(security.ClientTLSOptions{CAFile: s.caFile, CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", s.addr, config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := &rawClient{t: t, conn: conn, in: bufio.NewReaderSize(conn, 1<<20)}
	c.send(0, &wire.Hello{MinVersion: 1, MaxVersion: 1, Capabilities: wire.Capabilities, MaxFrame: wire.DefaultMaxFrame, Window: 1024,
		ClientName: "raw", AuthMechanism: wire.AuthToken, AuthMaterial: []byte(name + "-token")})
	if frame := c.read(); frame.Type != wire.TypeWelcome {
		t.Fatalf("%s: handshake answered %v", name, frame.Type)
	}
	return c
}

// streamAdmin sends a StreamAdmin and returns the error answering it, nil
// for a StreamList.
func (c *rawClient) streamAdmin(id uint32, m wire.StreamAdmin) *wire.Error {
	c.t.Helper()
	c.send(id, &m)
	frame := c.read()
	if frame.Type == wire.TypeError {
		e, _ := wire.DecodeError(frame.Body)
		return e
	}
	if frame.Type != wire.TypeStreamList {
		c.t.Fatalf("StreamAdmin answered %v", frame.Type)
	}
	return nil
}

// TestAdminScopeStaysOnItsStreams: an identity with admin on orders.x
// cannot move another stream's subjects into its own (unbind, then
// rebind), and lists show it only the streams its scope names. A "*"
// pattern does not stand for the empty name of the broker-wide lists.
func TestAdminScopeStaysOnItsStreams(t *testing.T) {
	s := startSecured(t, authzIdentities, security.GateOptions{})
	ctx := context.Background()
	ops := s.dialAs(t, "ops")
	for _, name := range []string{"orders.x", "payments"} {
		if _, err := ops.CreateStream(ctx, name, client.StreamSettings{}); err != nil {
			t.Fatal(err)
		}
		if _, err := ops.OpenGroup(ctx, name, "billing", client.GroupOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ops.Bind(ctx, "payments.>", "payments"); err != nil {
		t.Fatal(err)
	}

	attacker := s.dialAs(t, "orders-admin")
	if _, err := attacker.Unbind(ctx, "payments.>"); code(err) != wire.CodePermissionDenied {
		t.Errorf("unbinding another stream's subjects: %v, want permission_denied", err)
	}
	// The request names the stream the scope covers; the unbind acts on
	// another one.
	raw := s.rawAs(t, "orders-admin")
	if e := raw.streamAdmin(1, wire.StreamAdmin{Op: wire.StreamOpUnbind, Stream: []byte("orders.x"), Pattern: []byte("payments.>")}); e == nil || e.Code != wire.CodePermissionDenied {
		t.Errorf("unbinding payments.> in a request naming orders.x: %+v, want permission_denied", e)
	}
	if e := raw.streamAdmin(2, wire.StreamAdmin{Op: wire.StreamOpList, Stream: []byte("orders.x")}); e != nil {
		t.Errorf("a list naming orders.x: %+v", e)
	}
	if _, err := attacker.Bind(ctx, "payments.>", "orders.x"); err == nil {
		t.Errorf("binding another stream's subjects to orders.x was allowed")
	}
	if _, err := attacker.Bind(ctx, "orders.x.>", "orders.x"); err != nil {
		t.Errorf("binding subjects to its own stream: %v", err)
	}
	streams, err := attacker.Streams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, stream := range streams {
		if stream.Name != "orders.x" {
			t.Errorf("the stream list shows %q to an admin of orders.x", stream.Name)
		}
	}
	bindings, err := attacker.Bindings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, binding := range bindings {
		if binding.Stream != "orders.x" {
			t.Errorf("the binding list shows %q → %q to an admin of orders.x", binding.Pattern, binding.Stream)
		}
	}
	if len(bindings) != 1 {
		t.Errorf("bindings seen by the admin of orders.x: %+v, want its own one", bindings)
	}
	routes, err := ops.Bindings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(routes, func(b client.Binding) bool { return b.Pattern == "payments.>" && b.Stream == "payments" }) {
		t.Errorf("payments.> no longer routes to payments: %+v", routes)
	}

	star := s.dialAs(t, "star-admin")
	groups, err := star.ListGroups(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, group := range groups {
		if group.Stream != "payments" {
			t.Errorf("the group list shows stream %q to an admin of \"*\"", group.Stream)
		}
	}
	if len(groups) != 1 {
		t.Errorf("groups seen by an admin of \"*\": %+v, want payments' one", groups)
	}
	if _, err := star.ListGroups(ctx, "orders.x", 0); code(err) != wire.CodePermissionDenied {
		t.Errorf("an admin of \"*\" listing orders.x's groups: %v, want permission_denied", err)
	}
}

// TestRedriveNeedsAdminOnQueueAndStream: a redrive reads the dead-letter
// queue and republishes into the stream, so admin on the stream alone is
// not enough.
func TestRedriveNeedsAdminOnQueueAndStream(t *testing.T) {
	s := startSecured(t, authzIdentities, security.GateOptions{})
	ctx := context.Background()
	ops := s.dialAs(t, "ops")
	if _, err := ops.CreateStream(ctx, "orders.x", client.StreamSettings{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.dialAs(t, "orders-admin").Redrive(ctx, "orders.x", 0); code(err) != wire.CodePermissionDenied {
		t.Errorf("a redrive by an admin of the stream only: %v, want permission_denied", err)
	}
	if _, err := s.dialAs(t, "dlq-admin").Redrive(ctx, "orders.x", 0); err != nil {
		t.Errorf("a redrive by an admin of the stream and its queue: %v", err)
	}
	if _, err := ops.Redrive(ctx, "orders.x", 0); err != nil {
		t.Errorf("a redrive by an admin of \">\": %v", err)
	}
	queues, err := s.dialAs(t, "star-admin").DeadLetters(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, queue := range queues {
		if queue.Stream == "orders.x" {
			t.Errorf("the dead-letter list shows orders.x to an admin of \"*\"")
		}
	}
}

// TestLeaseTokensCannotBeGuessedAcrossConnections: a member of a work
// group that sees its own lease token cannot settle another member's
// lease by guessing near it.
func TestLeaseTokensCannotBeGuessedAcrossConnections(t *testing.T) {
	addr, _ := testBroker(t, testConfig{})
	victim, thief := connect(t, addr), connect(t, addr)
	produceN(t, victim, "jobs", 2)
	consume := wire.Consume{Stream: []byte("jobs"), Group: []byte("g"), Mode: wire.ModeWork, MaxRecords: 1, LeaseMs: 60_000}
	held := victim.consume(10, consume)
	mine := thief.consume(10, consume)
	if len(held.deliveries) != 1 || len(mine.deliveries) != 1 {
		t.Fatalf("leased %v and %v", offsetsOf(held.deliveries), offsetsOf(mine.deliveries))
	}
	target, known := held.deliveries[0], mine.deliveries[0].Lease
	var guesses []wire.AckEntry
	for delta := uint64(1); delta <= 64; delta++ {
		for _, guess := range []uint64{known + delta, known - delta} {
			guesses = append(guesses, wire.AckEntry{Offset: target.Offset, Lease: guess})
		}
	}
	statuses, e := thief.ackOp(11, "jobs", "g", wire.AckDone, 0, guesses...)
	if e != nil {
		t.Fatal(e)
	}
	for i, status := range statuses {
		if status == wire.AckOK {
			t.Fatalf("the thief settled the victim's lease with token %#x", guesses[i].Lease)
		}
	}
	if statuses, _ := victim.ackOp(11, "jobs", "g", wire.AckDone, 0, wire.AckEntry{Offset: target.Offset, Lease: target.Lease}); !slices.Equal(statuses, []uint8{wire.AckOK}) {
		t.Fatalf("the victim's own ack: %v", statuses)
	}
}
