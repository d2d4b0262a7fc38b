package health_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/broker/health"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/vfs"
)

// get fetches one endpoint over real HTTP and returns the status and body.
func get(t *testing.T, server *health.Server, endpoint string) (int, string) {
	t.Helper()
	response, err := http.Get("http://" + server.Addr() + endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer response.Body.Close()
	body, err := io.ReadAll(response.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response.StatusCode, strings.TrimSpace(string(body))
}

func listen(t *testing.T, opts health.Options) *health.Server {
	t.Helper()
	server, err := health.Listen("127.0.0.1:0", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Close(context.Background()) })
	return server
}

func TestListenRefusesOtherHosts(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:7778", "192.0.2.1:7778", ":7778"} {
		if _, err := health.Listen(addr, health.Options{}); !errors.Is(err, health.ErrNotLoopback) {
			t.Errorf("Listen(%q) = %v, want ErrNotLoopback", addr, err)
		}
	}
	if _, err := health.Listen("no-port", health.Options{}); !errors.Is(err, health.ErrAddress) {
		t.Errorf("Listen without a port: %v, want ErrAddress", err)
	}
}

func TestRecoveringUntilAttached(t *testing.T) {
	server := listen(t, health.Options{})
	if status, body := get(t, server, "/readyz"); status != http.StatusServiceUnavailable || body != health.ReasonRecovering {
		t.Fatalf("/readyz before Attach: %d %q, want 503 recovering", status, body)
	}
	if status, _ := get(t, server, "/healthz"); status != http.StatusOK {
		t.Fatalf("/healthz while recovering: %d, want 200 (recovery is progress)", status)
	}
	status, body := get(t, server, "/admin")
	var doc health.Admin
	if err := json.Unmarshal([]byte(body), &doc); err != nil || status != http.StatusServiceUnavailable ||
		doc.Schema != health.AdminSchema || doc.Readiness.Reason != health.ReasonRecovering {
		t.Fatalf("/admin while recovering: %d %s (%v)", status, body, err)
	}
	b, err := broker.Open(broker.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	server.Attach(b)
	if status, body := get(t, server, "/readyz"); status != http.StatusOK {
		t.Fatalf("/readyz once attached: %d %q", status, body)
	}
	b.Drain()
	if status, body := get(t, server, "/readyz"); status != http.StatusServiceUnavailable || body != "draining" {
		t.Fatalf("/readyz while draining: %d %q, want 503 draining", status, body)
	}
}

func TestFailedProbeIsStuck(t *testing.T) {
	server := listen(t, health.Options{ProbeTimeout: time.Second})
	server.AddProbe(health.Probe{Name: "network loop", Check: func(ctx context.Context) error {
		<-ctx.Done() // a reactor that never answers
		return ctx.Err()
	}})
	status, body := get(t, server, "/healthz")
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "network loop") {
		t.Fatalf("/healthz with a hanging probe: %d %q", status, body)
	}
}

// TestFsyncFailureFreezesReadiness makes the data directory's fdatasync
// fail (issue 7: the log freezes read-only): /readyz turns 503 and names
// the log and the cause, and the log's frozen metric says so too.
func TestFsyncFailureFreezesReadiness(t *testing.T) {
	fault := &vfs.Toggle{Match: vfs.KindIs(vfs.OpSyncData), Err: vfs.InjectedEIO}
	mem := vfs.NewMemFS()
	b, err := broker.Open(broker.Config{DataDir: "/data", FS: vfs.Inject(mem, fault)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	server := listen(t, health.Options{})
	server.Attach(b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := produce(ctx, b, "durable"); err != nil {
		t.Fatal(err)
	}
	fault.Set(true)
	if err := produce(ctx, b, "lost"); err == nil {
		t.Fatal("a produce whose fdatasync failed was acknowledged")
	}
	status, body := get(t, server, "/readyz")
	if status != http.StatusServiceUnavailable || !strings.HasPrefix(body, "frozen: orders/0") || !strings.Contains(body, "fdatasync") {
		t.Fatalf("/readyz after a failed fsync: %d %q, want 503 frozen: orders/0 ... fdatasync", status, body)
	}
	_, metrics := get(t, server, "/metrics")
	if !strings.Contains(metrics, `ironbus_log_frozen{stream="orders"} 1`) || !strings.Contains(metrics, "ironbus_ready 0") {
		t.Fatalf("metrics after a failed fsync lack the frozen log:\n%s", metrics)
	}
}

// produce appends one record to stream "orders" through the engine's Go
// API, as every protocol adapter does, and waits until it is durable or
// has failed. No wire is needed: readiness reads the engine.
func produce(ctx context.Context, b *broker.Broker, payload string) error {
	stream, err := b.ProduceStream([]byte("orders"), "")
	if err != nil {
		return err
	}
	partition, err := stream.Partition(0)
	if err != nil {
		return err
	}
	body, err := record.AppendBody(nil, record.Body{Payload: []byte(payload), RawLength: uint32(len(payload))})
	if err != nil {
		return err
	}
	ticket, err := partition.Append(ctx, [][]byte{body}, []uint32{record.Checksum(body)}, record.FrameSize(len(body)))
	if err != nil {
		return err
	}
	select {
	case <-ticket.Done():
		return ticket.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestRequestsAreBounded: with one request in progress and MaxRequests 1,
// another waits a second for its turn and is then refused, so a runaway
// scraper cannot grow the broker's memory.
func TestRequestsAreBounded(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	server := listen(t, health.Options{MaxRequests: 1, ProbeTimeout: 10 * time.Second})
	server.AddProbe(health.Probe{Name: "slow", Check: func(ctx context.Context) error {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}})
	first := make(chan int, 1)
	go func() {
		response, err := http.Get("http://" + server.Addr() + "/healthz")
		if err != nil {
			first <- 0
			return
		}
		response.Body.Close()
		first <- response.StatusCode
	}()
	<-entered // the first request holds the only slot
	status, body := get(t, server, "/readyz")
	close(release)
	if status != http.StatusServiceUnavailable || !strings.HasPrefix(body, "busy") {
		t.Fatalf("a request beyond MaxRequests: %d %q, want 503 busy", status, body)
	}
	if code := <-first; code != http.StatusOK {
		t.Fatalf("the request holding the slot got %d", code)
	}
}

// getAs fetches an endpoint with the Host header given.
func getAs(t *testing.T, server *health.Server, host, endpoint string) int {
	t.Helper()
	request, err := http.NewRequest(http.MethodGet, "http://"+server.Addr()+endpoint, nil)
	if err != nil {
		t.Fatal(err)
	}
	request.Host = host
	response, err := http.DefaultClient.Do(request)
	if err != nil {
		t.Fatal(err)
	}
	defer response.Body.Close()
	_, _ = io.ReadAll(response.Body)
	return response.StatusCode
}

// TestHostHeaderGuardsAgainstRebinding: a page whose name was made to
// resolve to 127.0.0.1 (DNS rebinding) sends its own name as Host; only
// loopback names and the configured ones are served.
func TestHostHeaderGuardsAgainstRebinding(t *testing.T) {
	server := listen(t, health.Options{AllowedHosts: []string{"broker.internal"}})
	_, port, _ := strings.Cut(server.Addr(), ":")
	for _, endpoint := range []string{"/admin", "/metrics", "/healthz", "/readyz"} {
		for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1.evil.example:" + port, "localhost.evil.example"} {
			if status := getAs(t, server, host, endpoint); status != http.StatusMisdirectedRequest {
				t.Errorf("%s with Host %q: %d, want 421", endpoint, host, status)
			}
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST", "[::1]:" + port, "127.0.0.2", "broker.internal:" + port, "broker.internal."} {
		if status := getAs(t, server, host, "/healthz"); status != http.StatusOK {
			t.Errorf("/healthz with Host %q: %d, want 200", host, status)
		}
	}
}
