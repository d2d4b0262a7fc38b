package health_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/broker/health"
)

const testToken = "ibt_health-test-token"

// request sends GET endpoint to addr with the Host header and bearer
// token given ("" for none) and returns the status.
func request(t *testing.T, addr, host, token, endpoint string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+endpoint, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	response, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer response.Body.Close()
	_, _ = io.ReadAll(response.Body)
	return response.StatusCode
}

// nonLoopbackIP is an address of this machine other hosts could reach,
// or nil.
func nonLoopbackIP() net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	for _, addr := range addrs {
		if network, ok := addr.(*net.IPNet); ok && !network.IP.IsLoopback() && network.IP.To4() != nil && !network.IP.IsLinkLocalUnicast() {
			return network.IP
		}
	}
	return nil
}

// TestBeyondLoopbackNeedsAToken: an address beyond loopback is refused
// without a token and served with one, and then every endpoint answers
// 401 to a request without the token or with a wrong one, and serves one
// with it.
func TestBeyondLoopbackNeedsAToken(t *testing.T) {
	addrs := []string{"0.0.0.0:0"}
	if ip := nonLoopbackIP(); ip != nil {
		addrs = append(addrs, net.JoinHostPort(ip.String(), "0"))
	}
	for _, addr := range addrs {
		if _, err := health.Listen(addr, health.Options{}); !errors.Is(err, health.ErrNotLoopback) {
			t.Fatalf("Listen(%q) without a token: %v, want ErrNotLoopback", addr, err)
		}
		server, err := health.Listen(addr, health.Options{Token: testToken, AllowedHosts: []string{"broker.internal"}})
		if err != nil {
			t.Fatalf("Listen(%q) with a token: %v", addr, err)
		}
		t.Cleanup(func() { _ = server.Close(context.Background()) })
		_, port, _ := net.SplitHostPort(server.Addr())
		host, _, _ := net.SplitHostPort(addr)
		dial := net.JoinHostPort(host, port)
		if host == "0.0.0.0" {
			dial = net.JoinHostPort("127.0.0.1", port)
		}
		// Behind a token, any IP literal is a Host the endpoints serve: it
		// involves no DNS name to rebind.
		names := []string{"broker.internal:" + port, "127.0.0.1:" + port, "192.0.2.7:" + port, "[2001:db8::1]:" + port}
		if host != "0.0.0.0" {
			names = append(names, dial)
		}
		for _, endpoint := range []string{"/healthz", "/readyz", "/metrics", "/admin"} {
			for _, name := range names {
				for _, wrong := range []string{"", "ibt_wrong", testToken + "x", strings.ToUpper(testToken)} {
					if status := request(t, dial, name, wrong, endpoint); status != http.StatusUnauthorized {
						t.Errorf("%s %s (Host %s) with token %q: %d, want 401", addr, endpoint, name, wrong, status)
					}
				}
				if status := request(t, dial, name, testToken, endpoint); status == http.StatusUnauthorized || status == http.StatusMisdirectedRequest {
					t.Errorf("%s %s (Host %s) with the token: %d", addr, endpoint, name, status)
				}
			}
			if status := request(t, dial, "evil.example:"+port, testToken, endpoint); status != http.StatusMisdirectedRequest {
				t.Errorf("%s %s with a foreign Host and the token: %d, want 421", addr, endpoint, status)
			}
		}
	}
}

// TestTokenOnLoopback: a token may guard a loopback address too.
func TestTokenOnLoopback(t *testing.T) {
	server := listen(t, health.Options{Token: testToken})
	if status := request(t, server.Addr(), server.Addr(), "", "/healthz"); status != http.StatusUnauthorized {
		t.Fatalf("no token: %d", status)
	}
	if status := request(t, server.Addr(), server.Addr(), testToken, "/healthz"); status != http.StatusOK {
		t.Fatalf("the token: %d", status)
	}
}
