package security

import (
	"errors"
	"strings"
	"testing"
)

func TestNamespaceStreams(t *testing.T) {
	acme, plain, operator := NamespaceOf("acme"), NamespaceOf(""), NamespaceOf(OperatorAccount)
	for _, c := range []struct {
		names    Namespace
		external string
		engine   string
	}{
		{plain, "orders", "orders"},
		{plain, ".dlq.orders", ".dlq.orders"},
		{acme, "orders", "__acme.orders"},
		{acme, "orders.eu", "__acme.orders.eu"},
		{acme, ".dlq.orders", ".dlq.__acme.orders"},
		{operator, "orders", "orders"},
		{operator, "acme/orders", "__acme.orders"},
		{operator, ".dlq.acme/orders", ".dlq.__acme.orders"},
		{operator, "default/orders", "orders"},
	} {
		got, err := c.names.Stream(c.external)
		if err != nil || got != c.engine {
			t.Errorf("%s: Stream(%q) = %q, %v; want %q", c.names.Account(), c.external, got, err, c.engine)
		}
		appended, err := c.names.AppendStream([]byte("x"), []byte(c.external))
		if err != nil || string(appended) != "x"+c.engine {
			t.Errorf("%s: AppendStream(%q) = %q, %v", c.names.Account(), c.external, appended, err)
		}
		if c.external == "default/orders" {
			continue
		}
		if back, ok := c.names.External(c.engine); !ok || back != c.external {
			t.Errorf("%s: External(%q) = %q, %v; want %q", c.names.Account(), c.engine, back, ok, c.external)
		}
	}
	// Another account's engine names are not the account's, and it cannot
	// name them.
	for _, foreign := range []string{"__beta.orders", ".dlq.__beta.orders", "__acme"} {
		if name, ok := acme.External(foreign); ok && foreign != "__acme" {
			t.Errorf("acme sees %q as %q", foreign, name)
		}
		if name, ok := plain.External(foreign); ok {
			t.Errorf("the default account sees %q as %q", foreign, name)
		}
	}
	if _, ok := acme.External("orders"); ok {
		t.Error("acme sees the default account's orders")
	}
	for names, refused := range map[*Namespace][]string{
		&plain:    {"__acme.orders", ".dlq.__acme.orders"},
		&acme:     {"__beta.orders", ".dlq.__x"},
		&operator: {"operator/orders", "bad account/orders", "__x/orders", "acme/__beta.orders"},
	} {
		for _, name := range refused {
			if got, err := names.Stream(name); !errors.Is(err, ErrForeignName) {
				t.Errorf("%s: Stream(%q) = %q, %v; want ErrForeignName", names.Account(), name, got, err)
			}
		}
	}
}

func TestNamespaceSubjectsAndRouting(t *testing.T) {
	acme, plain := NamespaceOf("acme"), NamespaceOf(DefaultAccount)
	if got, err := acme.Subject("orders.>"); err != nil || got != "__acme.orders.>" {
		t.Fatalf("acme's pattern: %q %v", got, err)
	}
	if got, err := plain.Subject(">"); err != nil || got != ">" {
		t.Fatalf("the default account's pattern: %q %v", got, err)
	}
	if _, err := plain.Subject("__acme.orders.eu"); !errors.Is(err, ErrForeignName) {
		t.Fatalf("the default account routed into acme: %v", err)
	}
	operator := NamespaceOf(OperatorAccount)
	for written, engine := range map[string]string{"acme/orders.>": "__acme.orders.>", "orders.>": "orders.>", "default/x": "x"} {
		if got, err := operator.Subject(written); err != nil || got != engine {
			t.Errorf("the operator's %q: %q %v, want %q", written, got, err, engine)
		}
		if back, ok := operator.ExternalPattern(engine); written != "default/x" && (!ok || back != written) {
			t.Errorf("the operator's %q reads back as %q", engine, back)
		}
	}
	if _, err := operator.Subject("operator/x"); !errors.Is(err, ErrForeignName) {
		t.Errorf("the operator account's own subjects: %v", err)
	}
	if got, ok := acme.ExternalPattern("__acme.orders.>"); !ok || got != "orders.>" {
		t.Fatalf("ExternalPattern: %q %v", got, ok)
	}
	for name, want := range map[string]int{"orders.eu": 0, ">": 0, "__acme.orders": 6, "__acme": 6, "_x.y": 0} {
		if got := RoutingDomain([]byte(name)); got != want {
			t.Errorf("RoutingDomain(%q) = %d, want %d", name, got, want)
		}
	}
}

func TestNamespaceHide(t *testing.T) {
	message := `broker: no such stream "__acme.orders" (dead letters ".dlq.__acme.orders")`
	if got := NamespaceOf("acme").Hide(message); strings.Contains(got, "__") || !strings.Contains(got, `"orders"`) || !strings.Contains(got, `".dlq.orders"`) {
		t.Fatalf("acme: %q", got)
	}
	if got := NamespaceOf(OperatorAccount).Hide(message); !strings.Contains(got, `"acme/orders"`) || !strings.Contains(got, `".dlq.acme/orders"`) {
		t.Fatalf("operator: %q", got)
	}
	if got := NamespaceOf("").Hide(message); got != message {
		t.Fatalf("the default account's messages are its own: %q", got)
	}
}

func TestIdentityAccount(t *testing.T) {
	file := AuthFile{Identities: []IdentityEntry{
		{Name: "a", TokenSHA256: strings.Repeat("0", 64), Account: "acme"},
		{Name: "b", TokenSHA256: strings.Repeat("1", 64)},
		{Name: "c", TokenSHA256: strings.Repeat("2", 64), Account: OperatorAccount},
	}}
	snap, err := compile(file)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a": "acme", "b": DefaultAccount, "c": OperatorAccount} {
		if got := snap.byName[name].Account(); got != want {
			t.Errorf("%s: account %q, want %q", name, got, want)
		}
	}
	for _, bad := range []string{"__acme", "a.b", "a/b", strings.Repeat("x", 33), "sp ace"} {
		file.Identities[0].Account = bad
		if _, err := compile(file); !errors.Is(err, ErrAuthConfig) {
			t.Errorf("account %q: %v", bad, err)
		}
	}
}

// A stream counts against the account its engine name carries, its
// dead-letter queue too; anything else is the default account's.
func TestStreamAccount(t *testing.T) {
	for name, want := range map[string]string{
		"orders": DefaultAccount, ".dlq.orders": DefaultAccount,
		"__acme.orders": "acme", ".dlq.__acme.orders": "acme",
		"__": DefaultAccount, "__.x": DefaultAccount, "__acme": DefaultAccount,
	} {
		if got := StreamAccount(name); got != want {
			t.Errorf("StreamAccount(%q) = %q, want %q", name, got, want)
		}
	}
}
