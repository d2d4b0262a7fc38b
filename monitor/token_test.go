package monitor

import (
	"context"
	"errors"
	"testing"

	"github.com/ironbus/ironbus/broker/health"
)

// TestFetchSendsTheToken: endpoints behind a token answer Fetch with the
// token, and refuse it (ErrUnauthorized) without or with a wrong one.
func TestFetchSendsTheToken(t *testing.T) {
	const token = "ibt_monitor-test-token-0123456789"
	server, err := health.Listen("127.0.0.1:0", health.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close(context.Background())
	ctx := context.Background()
	doc, err := Fetch(ctx, Endpoint{Addr: server.Addr(), Token: token})
	if err != nil || doc.Readiness.Reason != health.ReasonRecovering {
		t.Fatalf("with the token: %+v, %v", doc, err)
	}
	for _, wrong := range []string{"", "ibt_wrong"} {
		if _, err := Fetch(ctx, Endpoint{Addr: server.Addr(), Token: wrong}); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("token %q: %v, want %v", wrong, err, ErrUnauthorized)
		}
	}
	if _, err := Fetch(ctx, Endpoint{Addr: server.Addr(), Token: "a\r\nX-Injected: 1"}); !errors.Is(err, ErrToken) {
		t.Fatalf("a token with a line break: %v", err)
	}
}
