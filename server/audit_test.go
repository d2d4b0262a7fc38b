package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/security"
)

// TestAuditKeepsTheConfiguredFiles: rotation keeps audit_keep old files,
// no more, and /metrics counts the audit events dropped.
func TestAuditKeepsTheConfiguredFiles(t *testing.T) {
	cfg := testConfig(t, nil)
	cfg.AuditLog = filepath.Join(t.TempDir(), "audit.jsonl")
	cfg.AuditMaxBytes, cfg.AuditKeep = 4<<10, 5
	secured, err := openSecurity(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 400 {
		secured.audit.Record(security.AuditEvent{Peer: "10.0.0.1:1", Action: "auth", Outcome: "failed", Username: fmt.Sprint("user", i)})
	}
	if err := secured.audit.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		if _, err := os.Stat(fmt.Sprintf("%s.%d", cfg.AuditLog, i)); err != nil {
			t.Fatalf("rotated file %d of 5: %v", i, err)
		}
	}
	if _, err := os.Stat(cfg.AuditLog + ".6"); err == nil {
		t.Fatal("more rotated files than audit_keep")
	}
}

func TestAuditDropsAreAMetric(t *testing.T) {
	cfg := testConfig(t, nil)
	cfg.AuditLog = filepath.Join(t.TempDir(), "audit.jsonl")
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	response, err := http.Get("http://" + s.HealthAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer response.Body.Close()
	body, _ := io.ReadAll(response.Body)
	if !strings.Contains(string(body), "ironbus_audit_events_dropped_total 0") {
		t.Fatalf("/metrics has no audit drop counter:\n%.2000s", body)
	}
}

// TestHealthHostsAreServed: the health endpoints answer the configured
// host names besides loopback, and refuse any other Host (DNS rebinding).
func TestHealthHostsAreServed(t *testing.T) {
	cfg := testConfig(t, nil)
	cfg.HealthHosts = []string{"broker.internal"}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	for host, want := range map[string]int{"broker.internal": http.StatusOK, "localhost": http.StatusOK, "evil.example": http.StatusMisdirectedRequest} {
		request, err := http.NewRequest(http.MethodGet, "http://"+s.HealthAddr()+"/healthz", nil)
		if err != nil {
			t.Fatal(err)
		}
		request.Host = host
		response, err := http.DefaultClient.Do(request)
		if err != nil {
			t.Fatal(err)
		}
		_ = response.Body.Close()
		if response.StatusCode != want && !(want == http.StatusOK && response.StatusCode == http.StatusServiceUnavailable) {
			t.Errorf("Host %q: %d, want %d", host, response.StatusCode, want)
		}
	}
	bad := testConfig(t, nil)
	bad.HealthHosts = []string{"with space"}
	if err := bad.Validate(); err == nil {
		t.Fatal("a health host with a space validated")
	}
}
