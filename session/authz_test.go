package session

import (
	"bufio"
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	if _, err := attacker.Bind(ctx, "payments.>", "orders.x"); code(err) != wire.CodePermissionDenied || strings.Contains(err.Error(), `"payments"`) {
		t.Errorf("binding another stream's subjects to orders.x: %v, want permission_denied not naming that stream", err)
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

// TestGroupRulesFenceGroupsAndAuditCursorMoves: a [[group]] rule keeps a
// group to the identities it names, per verb; groups no rule covers stay
// open to the stream's scope; commits, resets and redrives are audited.
func TestGroupRulesFenceGroupsAndAuditCursorMoves(t *testing.T) {
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	audit, err := security.OpenAudit(security.AuditOptions{Path: auditPath})
	if err != nil {
		t.Fatal(err)
	}
	defer audit.Close()
	file := security.AuthFile{
		Identities: []security.IdentityEntry{
			{Name: "ops", TokenSHA256: security.TokenDigest("ops-token"), Admin: []string{">"}, Publish: []string{">"}},
			{Name: "billing", TokenSHA256: security.TokenDigest("billing-token"), Subscribe: []string{"orders"}},
			{Name: "intruder", TokenSHA256: security.TokenDigest("intruder-token"), Subscribe: []string{"orders"}, Admin: []string{"orders"}},
		},
		Groups: []security.GroupRule{{Stream: "orders", Group: "billing.>", Join: []string{"billing"}, Commit: []string{"billing"}, Reset: []string{"ops"}}},
	}
	s := startSecuredAudited(t, file, security.GateOptions{}, audit)
	ctx := context.Background()
	ops := s.dialAs(t, "ops")
	for range 3 {
		if _, err := ops.Produce(ctx, "orders", client.Record{Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	billing, intruder := s.dialAs(t, "billing"), s.dialAs(t, "intruder")
	if _, err := billing.Fetch(ctx, "orders", "billing.jobs", client.FetchOptions{}); err != nil {
		t.Fatalf("the group's own identity: %v", err)
	}
	if _, err := intruder.Fetch(ctx, "orders", "billing.jobs", client.FetchOptions{}); code(err) != wire.CodePermissionDenied {
		t.Errorf("joining another identity's group: %v, want permission_denied", err)
	}
	if _, err := intruder.OpenGroup(ctx, "orders", "billing.jobs", client.GroupOptions{}); code(err) != wire.CodePermissionDenied {
		t.Errorf("opening another identity's group: %v, want permission_denied", err)
	}
	if _, err := intruder.Fetch(ctx, "orders", "intruder.own", client.FetchOptions{}); err != nil {
		t.Errorf("a group no rule covers: %v", err)
	}
	if _, err := billing.Commit(ctx, "orders", "billing.positions", 0, 2); err != nil {
		t.Errorf("committing its own group: %v", err)
	}
	if _, err := intruder.Commit(ctx, "orders", "billing.positions", 0, 3); code(err) != wire.CodePermissionDenied {
		t.Errorf("committing another identity's group: %v, want permission_denied", err)
	}
	if _, err := intruder.ResetGroup(ctx, "orders", "billing.positions", 0, client.StartPosition{}); code(err) != wire.CodePermissionDenied {
		t.Errorf("an admin of the stream resetting a group whose rule does not name it: %v, want permission_denied", err)
	}
	if _, err := ops.ResetGroup(ctx, "orders", "billing.positions", 0, client.StartPosition{}); err != nil {
		t.Errorf("the group's reset identity: %v", err)
	}
	if _, err := ops.Redrive(ctx, "orders", 0); err != nil {
		t.Errorf("redrive: %v", err)
	}
	ops.Close()
	billing.Close()
	intruder.Close()
	if err := audit.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"identity":"billing","action":"group.commit","outcome":"ok"`,
		`"identity":"intruder","action":"group.commit","outcome":"denied"`,
		`"identity":"intruder","action":"group.join","outcome":"denied"`,
		`"identity":"ops","action":"group.reset","outcome":"ok"`,
		`"identity":"intruder","action":"group.reset","outcome":"denied"`,
		`"identity":"ops","action":"dlq.redrive","outcome":"ok"`,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the audit trail has no %s:\n%s", want, data)
		}
	}
}

// TestPublishSubjectsLimitRecords: an identity's publish patterns name
// streams; its publish_subjects name the subjects its records may carry,
// whichever way they are routed.
func TestPublishSubjectsLimitRecords(t *testing.T) {
	file := security.AuthFile{Identities: []security.IdentityEntry{
		{Name: "ops", TokenSHA256: security.TokenDigest("ops-token"), Admin: []string{">"}},
		{Name: "device-1", TokenSHA256: security.TokenDigest("device-1-token"), Publish: []string{"telemetry"},
			PublishSubjects: []string{"telemetry.device-1.>"}},
	}}
	s := startSecuredAudited(t, file, security.GateOptions{}, nil)
	ctx := context.Background()
	ops := s.dialAs(t, "ops")
	if _, err := ops.CreateStream(ctx, "telemetry", client.StreamSettings{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ops.Bind(ctx, "telemetry.>", "telemetry"); err != nil {
		t.Fatal(err)
	}
	device := s.dialAs(t, "device-1")
	if _, err := device.ProduceTo(ctx, client.BySubject(), client.Record{Subject: "telemetry.device-1.temp", Payload: []byte("20")}); err != nil {
		t.Errorf("its own subject: %v", err)
	}
	if _, err := device.ProduceTo(ctx, client.BySubject(), client.Record{Subject: "telemetry.device-2.temp", Payload: []byte("99")}); code(err) != wire.CodePermissionDenied {
		t.Errorf("another device's subject: %v, want permission_denied", err)
	}
	if _, err := device.Produce(ctx, "telemetry", client.Record{Subject: "telemetry.device-2.temp", Payload: []byte("99")}); code(err) != wire.CodePermissionDenied {
		t.Errorf("another device's subject, by stream name: %v, want permission_denied", err)
	}
	if _, err := device.Produce(ctx, "telemetry", client.Record{Payload: []byte("no subject")}); code(err) != wire.CodePermissionDenied {
		t.Errorf("a record without a subject: %v, want permission_denied", err)
	}
}
