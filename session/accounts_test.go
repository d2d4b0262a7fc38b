package session

import (
	"context"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/wire"
)

// Accounts at the door (accounts.go): each account's names are its own,
// and no answer names another account's streams.

func accountIdentities() []security.IdentityEntry {
	all := []string{">"}
	entry := func(name, account string) security.IdentityEntry {
		return security.IdentityEntry{Name: name, Account: account, TokenSHA256: security.TokenDigest(name + "-token"), Publish: all, Subscribe: all, Admin: all}
	}
	return []security.IdentityEntry{entry("acme", "acme"), entry("beta", "beta"), entry("plain", ""), entry("root", security.OperatorAccount)}
}

func streamEnd(t *testing.T, c *client.Client, name string) uint64 {
	t.Helper()
	state, err := c.StreamInfo(context.Background(), name)
	if err != nil {
		t.Fatalf("StreamInfo(%q): %v", name, err)
	}
	if state.Name != name {
		t.Fatalf("StreamInfo(%q) answered %q", name, state.Name)
	}
	var end uint64
	for _, part := range state.Partitions {
		end += part.End
	}
	return end
}

// TestAccountNamesTranslated: two accounts' "orders" are two streams; a
// tenant's engine name is unreachable from the default account; the
// operator reaches both as ACCOUNT/orders.
func TestAccountNamesTranslated(t *testing.T) {
	s := startSecured(t, accountIdentities(), security.GateOptions{})
	ctx := context.Background()
	acme, beta, plain, root := s.dialAs(t, "acme"), s.dialAs(t, "beta"), s.dialAs(t, "plain"), s.dialAs(t, "root")
	for _, c := range []*client.Client{acme, beta, plain} {
		if _, err := c.CreateStream(ctx, "orders", client.StreamSettings{}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := acme.Produce(ctx, "orders", client.Record{Payload: []byte("a")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := beta.Produce(ctx, "orders", client.Record{Payload: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	if got := []uint64{streamEnd(t, acme, "orders"), streamEnd(t, beta, "orders"), streamEnd(t, plain, "orders")}; got[0] != 2 || got[1] != 1 || got[2] != 0 {
		t.Fatalf("records in acme's, beta's and the default account's orders: %v", got)
	}
	if got := []uint64{streamEnd(t, root, "acme/orders"), streamEnd(t, root, "beta/orders"), streamEnd(t, root, "orders")}; got[0] != 2 || got[1] != 1 || got[2] != 0 {
		t.Fatalf("the operator's view: %v", got)
	}
	for _, engineName := range []string{"__acme.orders", ".dlq.__acme.orders"} {
		if _, err := plain.Produce(ctx, engineName, client.Record{Payload: []byte("x")}); code(err) != wire.CodeNotFound {
			t.Errorf("the default account publishing to %s: %v, want not_found", engineName, err)
		}
	}
	if _, err := plain.StreamInfo(ctx, "__acme.orders"); code(err) != wire.CodeNotFound {
		t.Errorf("the default account describing acme's engine name: %v", err)
	}
	if _, err := beta.StreamInfo(ctx, "__acme.orders"); code(err) != wire.CodeNotFound {
		t.Errorf("beta describing acme's engine name: %v", err)
	}
	if streamEnd(t, acme, "orders") != 2 {
		t.Fatal("acme's orders changed")
	}
	// The operator binds inside an account, never across two.
	if _, err := root.Bind(ctx, "acme/orders.>", "acme/orders"); err != nil {
		t.Fatalf("the operator binding acme's subjects: %v", err)
	}
	if _, err := root.Bind(ctx, "acme/x.>", "beta/orders"); code(err) != wire.CodeInvalidRequest {
		t.Fatalf("the operator routing acme's subjects into beta: %v", err)
	}
	if bindings, err := acme.Bindings(ctx); err != nil || len(bindings) != 1 || bindings[0] != (client.Binding{Pattern: "orders.>", Stream: "orders"}) {
		t.Fatalf("acme's bindings: %+v %v", bindings, err)
	}
	if bindings, err := beta.Bindings(ctx); err != nil || len(bindings) != 0 {
		t.Fatalf("beta's bindings: %+v %v", bindings, err)
	}
	// Groups are per stream, so per account: the same group name twice.
	for _, c := range []*client.Client{acme, beta} {
		if _, err := c.OpenGroup(ctx, "orders", "billing", client.GroupOptions{}); err != nil {
			t.Fatal(err)
		}
		groups, err := c.ListGroups(ctx, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(groups) != 1 || groups[0].Stream != "orders" || groups[0].Group != "billing" {
			t.Fatalf("an account's groups: %+v", groups)
		}
	}
}

// TestAccountErrorsDoNotLeak: answers about names an account does not own
// are the answers about names that do not exist, and an account's own
// names come back as it wrote them.
func TestAccountErrorsDoNotLeak(t *testing.T) {
	s := startSecured(t, accountIdentities(), security.GateOptions{})
	ctx := context.Background()
	acme, beta := s.dialAs(t, "acme"), s.dialAs(t, "beta")
	if _, err := acme.CreateStream(ctx, "orders", client.StreamSettings{}); err != nil {
		t.Fatal(err)
	}
	if _, err := acme.Bind(ctx, "orders.>", "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := beta.CreateStream(ctx, "other", client.StreamSettings{}); err != nil {
		t.Fatal(err)
	}
	raw := s.rawAs(t, "beta")
	checks := map[string]error{}
	_, checks["info"] = beta.StreamInfo(ctx, "orders")
	_, checks["bind"] = beta.Bind(ctx, "orders.eu", "orders")
	_, checks["groups"] = beta.ListGroups(ctx, "orders", 0)
	_, checks["routed"] = beta.ProduceTo(ctx, client.BySubject(), client.Record{Subject: "orders.eu", Payload: []byte("x")})
	_, checks["purge"] = beta.PurgeStream(ctx, "orders")
	for what, err := range checks {
		if err == nil {
			t.Errorf("%s on acme's stream from beta succeeded", what)
			continue
		}
		if text := err.Error(); strings.Contains(text, "__") || strings.Contains(text, "acme") {
			t.Errorf("%s leaks: %v", what, err)
		}
	}
	if code(checks["info"]) != wire.CodeNotFound {
		t.Errorf("info: %v, want not_found", checks["info"])
	}
	// A request that fails on the account's own name names it as written.
	e := raw.streamAdmin(1, wire.StreamAdmin{Op: wire.StreamOpPurge, Stream: []byte("other")})
	if e == nil || !strings.Contains(e.Message, `"other"`) || strings.Contains(e.Message, "__") {
		t.Errorf("purge without force: %+v", e)
	}
	if _, err := beta.Bind(ctx, "other.>", "nosuch"); err == nil || strings.Contains(err.Error(), "__") || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("binding to a missing stream: %v", err)
	}
}

// TestAccountChangeCutsTheIdentity: an identity a reload moves to another
// account is cut, like a removed one: its names would mean other streams.
func TestAccountChangeCutsTheIdentity(t *testing.T) {
	identities := accountIdentities()
	s := startSecured(t, identities, security.GateOptions{})
	ctx := context.Background()
	acme := s.dialAs(t, "acme")
	if _, err := acme.Produce(ctx, "orders", client.Record{Payload: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	identities[0].Account = "beta"
	if err := security.SaveAuthFile(s.authPath, security.AuthFile{Identities: identities}); err != nil {
		t.Fatal(err)
	}
	if err := s.auth.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := acme.Produce(ctx, "orders", client.Record{Payload: []byte("a")}); code(err) != wire.CodeNotAuthorized {
		t.Fatalf("an identity moved to another account published: %v", err)
	}
}
