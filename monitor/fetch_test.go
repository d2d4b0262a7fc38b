package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/broker/health"
)

// endpoints serves an /admin document and a /healthz answer as a broker's
// health server would.
func endpoints(t *testing.T, doc *health.Admin, healthz int) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/admin", func(w http.ResponseWriter, _ *http.Request) { _ = json.NewEncoder(w).Encode(doc) })
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(healthz)
		_, _ = w.Write([]byte("reactor 0 stuck\n"))
	})
	server := httptest.NewServer(mux)
	t.Cleanup(server.Close)
	return strings.TrimPrefix(server.URL, "http://")
}

func TestFetch(t *testing.T) {
	addr := endpoints(t, admin(1, 2, 3, 4, 0), http.StatusOK)
	doc, err := Fetch(context.Background(), Endpoint{Addr: addr})
	if err != nil || doc.Totals.ProducedRecords != 2 {
		t.Fatalf("fetch: %+v %v", doc, err)
	}
	if _, err := Fetch(context.Background(), Endpoint{Addr: "no port"}); !errors.Is(err, ErrAddress) {
		t.Fatalf("a bad address: %v", err)
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := listener.Addr().String()
	_ = listener.Close()
	var refused *net.OpError
	if _, err := Fetch(context.Background(), Endpoint{Addr: closed}); !errors.Is(err, ErrUnreachable) || !errors.As(err, &refused) {
		t.Fatalf("nothing listening: %v", err)
	}
	other := &health.Admin{Schema: "ironbus.admin.v0"}
	if doc, err := Fetch(context.Background(), Endpoint{Addr: endpoints(t, other, http.StatusOK)}); !errors.Is(err, ErrSchema) || doc.Schema != other.Schema {
		t.Fatalf("another schema: %v", err)
	}
}

func TestFetchRefusesWhatIsNotAHealthServer(t *testing.T) {
	server := httptest.NewServer(http.NotFoundHandler())
	defer server.Close()
	if _, err := Fetch(context.Background(), Endpoint{Addr: strings.TrimPrefix(server.URL, "http://")}); !errors.Is(err, ErrStatus) {
		t.Fatalf("a 404: %v", err)
	}
}

// FuzzDecode: any bytes give a document of this schema or a typed error,
// never a panic.
func FuzzDecode(f *testing.F) {
	valid, err := json.Marshal(health.Admin{Schema: health.AdminSchema, Streams: []health.Stream{{Name: "orders"}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add([]byte(`{"schema":"ironbus.admin.v2"}`))
	f.Add([]byte(`{"schema":"ironbus.admin.v1","recovery":[{"report":{"events":[{"reason":"no_such_reason"}]}}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := Decode(data)
		switch {
		case err == nil && doc.Schema != health.AdminSchema:
			t.Fatalf("accepted schema %q", doc.Schema)
		case err != nil && !errors.Is(err, ErrNotAdmin) && !errors.Is(err, ErrSchema):
			t.Fatalf("untyped error %v", err)
		}
	})
}

func TestCheck(t *testing.T) {
	doc := admin(10, 1, 1, 1, 0)
	doc.Groups = []health.Group{{Stream: "orders", Name: "billing", Lag: 50}, {Stream: "orders", Name: "audit", Lag: 5}}
	doc.Storage.FilesystemBytes, doc.Storage.FilesystemUsedPercent = 1<<30, 85
	live := endpoints(t, doc, http.StatusOK)
	for _, test := range []struct {
		thresholds Thresholds
		level      Level
		summary    string
	}{
		{Thresholds{}, OK, "ready, 1 streams, 2 groups, max lag 50, disk 85.0% used"},
		{Thresholds{LagWarn: 10, LagCrit: 100}, Warning, "group orders/billing lags 50 records (warning at 10)"},
		{Thresholds{LagWarn: 10, LagCrit: 50, DiskWarn: 80}, Critical,
			"group orders/billing lags 50 records (critical at 50); disk 85.0% used (warning at 80%)"},
	} {
		result := Check(context.Background(), Endpoint{Addr: live}, doc, test.thresholds)
		if result.Level != test.level || result.Summary != test.summary {
			t.Errorf("%+v: %s %q, want %s %q", test.thresholds, result.Level, result.Summary, test.level, test.summary)
		}
		if len(result.Perfdata) != 5 || !strings.HasPrefix(result.Perfdata[0], "lag=50;") {
			t.Errorf("perfdata %v", result.Perfdata)
		}
	}
	stuck := Check(context.Background(), Endpoint{Addr: endpoints(t, doc, http.StatusServiceUnavailable)}, doc, Thresholds{})
	if stuck.Level != Critical || stuck.Summary != "liveness: reactor 0 stuck" {
		t.Errorf("a stuck broker: %s %q", stuck.Level, stuck.Summary)
	}
	doc.Readiness = health.Readiness{Reason: "frozen: orders/0 fsync failed"}
	if frozen := Check(context.Background(), Endpoint{Addr: live}, doc, Thresholds{}); frozen.Level != Critical {
		t.Errorf("a frozen log: %s %q", frozen.Level, frozen.Summary)
	}
}
