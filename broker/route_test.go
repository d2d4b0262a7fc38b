package broker

import (
	"errors"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/subject"
)

// TestRoutingDomains: a default-domain wildcard binding neither conflicts
// with another domain's bindings nor routes its subjects, and the split
// survives a restart (the routers are rebuilt from the catalog).
func TestRoutingDomains(t *testing.T) {
	domain := func(name []byte) int {
		if !strings.HasPrefix(string(name), "__") {
			return 0
		}
		if at := strings.IndexByte(string(name), '.'); at >= 0 {
			return at
		}
		return len(name)
	}
	dir := t.TempDir()
	check := func(b *Broker) {
		t.Helper()
		var cache subject.Cache
		for subj, want := range map[string]string{"orders.eu": "all", "__a.orders.eu": "__a.orders", "__b.orders.eu": "__b.orders"} {
			if got, err := b.Route(&cache, []byte(subj)); err != nil || got != want {
				t.Fatalf("Route(%q) = %q, %v; want %q", subj, got, err, want)
			}
		}
		if _, err := b.Route(&cache, []byte("__c.orders.eu")); !errors.Is(err, ErrNoRoute) {
			t.Fatalf("a domain without bindings routed: %v", err)
		}
	}
	b := openTestBroker(t, Config{DataDir: dir, RoutingDomain: domain})
	for _, name := range []string{"all", "__a.orders", "__b.orders"} {
		if _, _, err := b.CreateStream(StreamSettings{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	for pattern, stream := range map[string]string{">": "all", "__a.>": "__a.orders", "__b.orders.>": "__b.orders"} {
		if _, err := b.Bind(pattern, stream, nil); err != nil {
			t.Fatalf("Bind(%q): %v", pattern, err)
		}
	}
	if _, err := b.Bind("__a.orders.eu", "__b.orders", nil); !errors.Is(err, ErrConflict) {
		t.Fatalf("an overlap inside a domain: %v", err)
	}
	check(b)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	check(openTestBroker(t, Config{DataDir: dir, RoutingDomain: domain}))
}
