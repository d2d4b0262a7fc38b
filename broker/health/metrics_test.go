package health

import (
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// failingCollector is a collector whose every scrape fails.
type failingCollector struct{ desc *prometheus.Desc }

func (c failingCollector) Describe(out chan<- *prometheus.Desc) { out <- c.desc }
func (c failingCollector) Collect(out chan<- prometheus.Metric) {
	out <- prometheus.NewInvalidMetric(c.desc, errors.New("the disk went away"))
}

func testRegistry(t *testing.T) *prometheus.Registry {
	t.Helper()
	registry := prometheus.NewRegistry()
	produced := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "test_produced_total", Help: "Records produced."}, []string{"stream"})
	produced.WithLabelValues("orders").Add(3)
	ready := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_ready", Help: "Ready."})
	ready.Set(1)
	registry.MustRegister(produced, ready)
	return registry
}

func scrape(t *testing.T, gatherer prometheus.Gatherer, target string, header http.Header) *http.Response {
	t.Helper()
	request := httptest.NewRequest(http.MethodGet, target, nil)
	for key, values := range header {
		request.Header[key] = values
	}
	recorder := httptest.NewRecorder()
	writeMetrics(recorder, request, gatherer)
	return recorder.Result()
}

// decodeFamilies reads a scrape in the format its Content-Type names.
func decodeFamilies(t *testing.T, response *http.Response) map[string]*dto.MetricFamily {
	t.Helper()
	body := io.Reader(response.Body)
	if response.Header.Get("Content-Encoding") == "gzip" {
		unzipped, err := gzip.NewReader(body)
		if err != nil {
			t.Fatal(err)
		}
		body = unzipped
	}
	decoder := expfmt.NewDecoder(body, expfmt.Format(response.Header.Get("Content-Type")))
	families := map[string]*dto.MetricFamily{}
	for {
		family := &dto.MetricFamily{}
		if err := decoder.Decode(family); errors.Is(err, io.EOF) {
			return families
		} else if err != nil {
			t.Fatal(err)
		}
		families[family.GetName()] = family
	}
}

func TestMetricsFormats(t *testing.T) {
	registry := testRegistry(t)
	for _, test := range []struct {
		accept, wantType string
	}{
		{"", "text/plain; version=0.0.4"},
		{"application/json", "text/plain; version=0.0.4"},
		{"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3", "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"},
		{"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text", "text/plain; version=0.0.4"},
	} {
		response := scrape(t, registry, "/metrics", http.Header{"Accept": {test.accept}})
		if response.StatusCode != http.StatusOK || !strings.HasPrefix(response.Header.Get("Content-Type"), test.wantType) {
			t.Fatalf("Accept %q: %d %q, want 200 %q", test.accept, response.StatusCode, response.Header.Get("Content-Type"), test.wantType)
		}
		if vary := response.Header.Values("Vary"); len(vary) != 2 {
			t.Fatalf("Accept %q: Vary %q, want Accept and Accept-Encoding", test.accept, vary)
		}
		families := decodeFamilies(t, response)
		if got := families["test_produced_total"].GetMetric()[0].GetCounter().GetValue(); got != 3 || len(families) != 2 {
			t.Fatalf("Accept %q: %d families, counter %v; want 2 and 3", test.accept, len(families), got)
		}
	}
}

func TestMetricsGzipAndNameFilter(t *testing.T) {
	registry := testRegistry(t)
	response := scrape(t, registry, "/metrics?name[]=test_ready", http.Header{"Accept-Encoding": {"gzip"}})
	if response.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("Accept-Encoding gzip answered with Content-Encoding %q", response.Header.Get("Content-Encoding"))
	}
	families := decodeFamilies(t, response)
	if len(families) != 1 || families["test_ready"] == nil {
		t.Fatalf("name[]=test_ready served %d families", len(families))
	}
	response = scrape(t, registry, "/metrics", http.Header{"Accept-Encoding": {"gzip;q=0.5, identity"}})
	if response.Header.Get("Content-Encoding") != "" || len(decodeFamilies(t, response)) != 2 {
		t.Fatal("a scraper preferring identity got a compressed or partial answer")
	}
}

func TestMetricsServeWhatGathered(t *testing.T) {
	registry := testRegistry(t)
	broken := failingCollector{prometheus.NewDesc("test_broken", "Fails.", nil, nil)}
	registry.MustRegister(broken)
	response := scrape(t, registry, "/metrics", nil)
	if families := decodeFamilies(t, response); response.StatusCode != http.StatusOK || len(families) != 2 {
		t.Fatalf("one failing collector: %d with %d families, want 200 with the 2 others", response.StatusCode, len(families))
	}
	alone := prometheus.NewRegistry()
	alone.MustRegister(broken)
	response = scrape(t, alone, "/metrics", nil)
	body, _ := io.ReadAll(response.Body)
	if response.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), "the disk went away") {
		t.Fatalf("nothing gathered: %d %q, want 500 naming the cause", response.StatusCode, body)
	}
}

func TestPrefersGzip(t *testing.T) {
	for _, test := range []struct {
		header []string
		want   bool
	}{
		{nil, false},
		{[]string{"gzip"}, true},
		{[]string{"gzip, deflate, br"}, true},
		{[]string{"*"}, false},
		{[]string{"identity;q=0.5, *;q=0.9"}, false},
		{[]string{"gzip;q=0"}, false},
		{[]string{"gzip;q=0.5, identity"}, false},
		{[]string{"identity;q=0.2", "gzip;q=0.8"}, true},
		{[]string{"gzip;level=9"}, false},
		{[]string{"gzip;q=2"}, false},
	} {
		if got := prefersGzip(test.header); got != test.want {
			t.Errorf("prefersGzip(%q) = %v, want %v", test.header, got, test.want)
		}
	}
}
