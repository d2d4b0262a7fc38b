package session

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/wire"
)

// Deny rules and quotas as served over TCP (docs/SECURITY.md).

// quotaRefused checks err is quota_exceeded with a retry hint naming the
// quota.
func quotaRefused(t *testing.T, what string, err error, quota string) {
	t.Helper()
	var e *wire.Error
	if !errors.As(err, &e) || e.Code != wire.CodeQuotaExceeded || !e.Retryable || e.RetryAfter <= 0 || !strings.Contains(e.Message, quota) {
		t.Fatalf("%s: %v, want quota_exceeded on %s with a retry hint", what, err, quota)
	}
}

// incompressible returns n bytes the client's compression cannot shrink.
func incompressible(n int) []byte {
	out := make([]byte, n)
	_, _ = rand.Read(out)
	return out
}

// TestDenyRulesWin: deny patterns refuse what the allow patterns of the
// same scope grant, for every verb of the scope, lists included.
func TestDenyRulesWin(t *testing.T) {
	file := security.AuthFile{Identities: []security.IdentityEntry{
		{Name: "ops", TokenSHA256: security.TokenDigest("ops-token"), Admin: []string{">"}, Publish: []string{">"}},
		{Name: "most", TokenSHA256: security.TokenDigest("most-token"), Publish: []string{">"}, Subscribe: []string{">"}, Admin: []string{">"},
			DenyPublish: []string{"secret.>"}, DenySubscribe: []string{"secret.>"}, DenyAdmin: []string{"secret.>"},
			DenyPublishSubjects: []string{"orders.*.card"}},
	}}
	s := startSecuredAudited(t, file, security.GateOptions{}, nil)
	ctx := context.Background()
	ops := s.dialAs(t, "ops")
	for _, name := range []string{"secret.a", "orders"} {
		if _, err := ops.CreateStream(ctx, name, client.StreamSettings{}); err != nil {
			t.Fatal(err)
		}
		if _, err := ops.Produce(ctx, name, client.Record{Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	most := s.dialAs(t, "most")
	if _, err := most.Produce(ctx, "orders", client.Record{Subject: "orders.eu.created", Payload: []byte("x")}); err != nil {
		t.Fatalf("allowed publish: %v", err)
	}
	if _, err := most.Produce(ctx, "secret.a", client.Record{Payload: []byte("x")}); code(err) != wire.CodePermissionDenied {
		t.Errorf("denied stream publish: %v", err)
	}
	if _, err := most.Produce(ctx, "orders", client.Record{Subject: "orders.eu.card", Payload: []byte("x")}); code(err) != wire.CodePermissionDenied {
		t.Errorf("denied subject publish: %v", err)
	}
	if _, err := most.Fetch(ctx, "secret.a", "g", client.FetchOptions{MaxRecords: 1}); code(err) != wire.CodePermissionDenied {
		t.Errorf("denied subscribe: %v", err)
	}
	if _, err := most.CreateStream(ctx, "secret.b", client.StreamSettings{}); code(err) != wire.CodePermissionDenied {
		t.Errorf("denied admin create: %v", err)
	}
	if _, err := most.Bind(ctx, "paid.>", "secret.a"); code(err) != wire.CodePermissionDenied {
		t.Errorf("denied admin bind: %v", err)
	}
	if _, err := most.Bind(ctx, "orders.>", "orders"); err != nil {
		t.Errorf("allowed bind: %v", err)
	}
	streams, err := most.Streams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(streams) != 1 || streams[0].Name != "orders" {
		t.Errorf("the list shows a denied stream: %+v", streams)
	}
}

// TestSubscribeSubjectsOverTCP: with subscribe subject rules a consumer
// names a filter within them; one partly outside is refused.
func TestSubscribeSubjectsOverTCP(t *testing.T) {
	file := security.AuthFile{Identities: []security.IdentityEntry{
		{Name: "ops", TokenSHA256: security.TokenDigest("ops-token"), Admin: []string{">"}, Publish: []string{">"}},
		{Name: "eu", TokenSHA256: security.TokenDigest("eu-token"), Subscribe: []string{"orders"},
			SubscribeSubjects: []string{"orders.eu.>"}, DenySubscribeSubjects: []string{"orders.eu.card"}},
	}}
	s := startSecuredAudited(t, file, security.GateOptions{}, nil)
	ctx := context.Background()
	ops := s.dialAs(t, "ops")
	for _, subject := range []string{"orders.eu.created", "orders.us.created", "orders.eu.card"} {
		if _, err := ops.Produce(ctx, "orders", client.Record{Subject: subject, Payload: []byte(subject)}); err != nil {
			t.Fatal(err)
		}
	}
	eu := s.rawAs(t, "eu")
	for i, filter := range []string{"", "orders.>", "orders.eu.>", "orders.us.created"} {
		got := eu.consume(uint32(i+1), wire.Consume{Stream: []byte("orders"), Group: []byte("g"), Mode: wire.ModeStreaming, MaxRecords: 10, Filter: []byte(filter)})
		if got.err == nil || got.err.Code != wire.CodePermissionDenied {
			t.Errorf("filter %q: %+v, want permission_denied", filter, got.err)
		}
	}
	got := eu.consume(9, wire.Consume{Stream: []byte("orders"), Group: []byte("g"), Mode: wire.ModeStreaming, MaxRecords: 10, Filter: []byte("orders.eu.created")})
	if got.err != nil || len(got.deliveries) != 1 {
		t.Fatalf("an allowed filter: %+v, %d deliveries", got.err, len(got.deliveries))
	}
}

// TestConnectionQuota: the connection past max_connections is refused
// with quota_exceeded and a retry hint; closing one makes room.
func TestConnectionQuota(t *testing.T) {
	s := startSecured(t, []security.IdentityEntry{
		{Name: "one", TokenSHA256: security.TokenDigest("one-token"), Publish: []string{">"}, MaxConnections: 1},
	}, security.GateOptions{})
	first, err := s.dial(t, client.TokenAuth("one-token"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.dial(t, client.TokenAuth("one-token"))
	quotaRefused(t, "second connection", err, "max_connections")
	first.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		again, err := s.dial(t, client.TokenAuth("one-token"))
		if err == nil {
			again.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the first closed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStreamQuotas: streams, partitions and stored bytes (preallocated
// segments included) count against the creator and its account, by admin
// create and by a first publish.
func TestStreamQuotas(t *testing.T) {
	prealloc := int64(segment.DefaultSegmentSize)
	file := security.AuthFile{Identities: []security.IdentityEntry{
		{Name: "maker", TokenSHA256: security.TokenDigest("maker-token"), Admin: []string{">"}, Publish: []string{">"},
			MaxStreams: 2, MaxPartitions: 3, MaxStoredBytes: 3*prealloc + 1000},
		{Name: "other", TokenSHA256: security.TokenDigest("other-token"), Admin: []string{">"}, Publish: []string{">"}},
	}, Accounts: []security.AccountQuota{{Account: "", MaxStreams: 3}}}
	s := startSecuredAudited(t, file, security.GateOptions{}, nil)
	ctx := context.Background()
	maker := s.dialAs(t, "maker")
	_, err := maker.CreateStream(ctx, "wide", client.StreamSettings{Partitions: 4})
	quotaRefused(t, "4 partitions", err, "max_partitions")
	if _, err := maker.CreateStream(ctx, "a", client.StreamSettings{Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := maker.CreateStream(ctx, "a", client.StreamSettings{Partitions: 2}); err != nil {
		t.Fatalf("the same create again creates nothing: %v", err)
	}
	if _, err := maker.Produce(ctx, "b", client.Record{Payload: []byte("x")}); err != nil {
		t.Fatalf("a first publish within the quotas: %v", err)
	}
	// Three preallocated segments are charged; 1,000 bytes are left.
	if _, err := maker.Produce(ctx, "a", client.Record{Payload: incompressible(500)}); err != nil {
		t.Fatal(err)
	}
	_, err = maker.Produce(ctx, "a", client.Record{Payload: incompressible(1500)})
	quotaRefused(t, "past the stored bytes", err, "max_stored_bytes")
	_, err = maker.Produce(ctx, "c", client.Record{Payload: []byte("x")})
	quotaRefused(t, "a third stream by publish", err, "max_streams")
	_, err = maker.CreateStream(ctx, "c", client.StreamSettings{})
	quotaRefused(t, "a third stream by create", err, "max_streams")

	other := s.dialAs(t, "other")
	_, err = other.Produce(ctx, "a", client.Record{Payload: incompressible(1500)})
	quotaRefused(t, "another identity filling the maker's stream", err, `identity "maker" is at its max_stored_bytes`)
	if _, err := other.CreateStream(ctx, "d", client.StreamSettings{Partitions: 8}); err != nil {
		t.Fatalf("another identity: %v", err)
	}
	_, err = other.CreateStream(ctx, "e", client.StreamSettings{})
	quotaRefused(t, "the account's fourth stream", err, "max_streams")
	var e *wire.Error
	if errors.As(err, &e); !strings.Contains(e.Message, "default account") {
		t.Errorf("the refusal does not name the account: %v", e)
	}
	streams, _ := other.Streams(ctx)
	names := []string{}
	for _, stream := range streams {
		names = append(names, stream.Name)
	}
	if !slices.Equal(names, []string{"a", "b", "d"}) {
		t.Errorf("streams %v", names)
	}
}

// TestGroupDenyListsWin: a group rule's deny list takes a verb from an
// identity that another rule grants it, and a rule of deny lists only
// leaves the group open to everyone else.
func TestGroupDenyListsWin(t *testing.T) {
	file := security.AuthFile{
		Identities: []security.IdentityEntry{
			{Name: "ops", TokenSHA256: security.TokenDigest("ops-token"), Publish: []string{">"}},
			{Name: "billing", TokenSHA256: security.TokenDigest("billing-token"), Subscribe: []string{"orders"}},
			{Name: "intern", TokenSHA256: security.TokenDigest("intern-token"), Subscribe: []string{"orders"}},
		},
		Groups: []security.GroupRule{
			{Stream: "orders", Group: "billing", Join: []string{"billing", "intern"}, Commit: []string{"billing", "intern"}},
			{Stream: ">", Group: ">", DenyCommit: []string{"intern"}},
		},
	}
	s := startSecuredAudited(t, file, security.GateOptions{}, nil)
	ctx := context.Background()
	if _, err := s.dialAs(t, "ops").Produce(ctx, "orders", client.Record{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	billing, intern := s.dialAs(t, "billing"), s.dialAs(t, "intern")
	if _, err := intern.Fetch(ctx, "orders", "billing", client.FetchOptions{}); err != nil {
		t.Errorf("a join the deny lists leave: %v", err)
	}
	if _, err := intern.Commit(ctx, "orders", "billing", 0, 1); code(err) != wire.CodePermissionDenied {
		t.Errorf("a commit one rule grants and another denies: %v, want permission_denied", err)
	}
	if _, err := intern.Commit(ctx, "orders", "own", 0, 1); code(err) != wire.CodePermissionDenied {
		t.Errorf("a commit on a group only the deny rule covers: %v, want permission_denied", err)
	}
	if _, err := billing.Commit(ctx, "orders", "own", 0, 1); err != nil {
		t.Errorf("an identity the deny-only rule does not name: %v", err)
	}
}
