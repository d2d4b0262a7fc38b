package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/ironbus/ironbus/broker/health"
	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/monitor"
	"github.com/ironbus/ironbus/segment/format"
)

// httpGet fetches one endpoint of a broker's health address.
func httpGet(t *testing.T, healthAddr, endpoint string) (int, string) {
	t.Helper()
	response, err := http.Get("http://" + healthAddr + endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer response.Body.Close()
	body, err := io.ReadAll(response.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response.StatusCode, string(body)
}

// metricValue returns the value of the sample whose name and labels are
// exactly series in a Prometheus text scrape, or -1 when absent.
func metricValue(scrape, series string) float64 {
	for _, line := range strings.Split(scrape, "\n") {
		if value, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(value, 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// workload produces n records to orders, then fetches them in group
// workers and acks all but the last, so the group lags by one. The
// consumer stays connected until the test ends, holding that lease.
func workload(t *testing.T, addr string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	for i := range n {
		if _, err := c.Produce(ctx, "orders", client.Record{Payload: []byte("m-" + strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	result, err := c.Fetch(ctx, "orders", "workers", client.FetchOptions{MaxRecords: n, Wait: time.Second})
	if err != nil || len(result.Messages) != n {
		t.Fatalf("fetch: %d messages, %v", len(result.Messages), err)
	}
	if _, err := c.Ack(ctx, "orders", "workers", result.Messages[:n-1]...); err != nil {
		t.Fatal(err)
	}
}

func TestMetricsScrapeIsLintCleanAndMoves(t *testing.T) {
	t.Parallel()
	broker := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0")
	workload(t, broker.Addr(), 10)
	status, scrape := httpGet(t, broker.HealthAddr(), "/metrics")
	if status != http.StatusOK {
		t.Fatalf("/metrics: %d\n%s", status, scrape)
	}
	problems, err := promlint.New(strings.NewReader(scrape)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, problem := range problems {
		t.Errorf("promlint: %s: %s", problem.Metric, problem.Text)
	}
	for series, least := range map[string]float64{
		`ironbus_produced_records_total{stream="orders"}`:                        10,
		`ironbus_log_next_offset{stream="orders"}`:                               10,
		`ironbus_group_delivered_records_total{group="workers",stream="orders"}`: 10,
		`ironbus_group_acked_records_total{group="workers",stream="orders"}`:     9,
		`ironbus_group_lag_records{group="workers",stream="orders"}`:             1,
		`ironbus_group_in_flight_records{group="workers",stream="orders"}`:       1,
		`ironbus_fsync_duration_seconds_count`:                                   1,
		`ironbus_fsync_records_sum`:                                              10,
		`ironbus_connections_accepted_total`:                                     1,
		`ironbus_ready`:                                                          1,
	} {
		if got := metricValue(scrape, series); got < least {
			t.Errorf("%s = %v, want at least %v", series, got, least)
		}
	}
	if got := metricValue(scrape, `ironbus_group_redelivered_records_total{group="workers",stream="orders"}`); got != 0 {
		t.Errorf("redelivered = %v, want 0", got)
	}
}

func TestAdminDocumentCarriesItsSchema(t *testing.T) {
	t.Parallel()
	broker := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0")
	workload(t, broker.Addr(), 3)
	status, body := httpGet(t, broker.HealthAddr(), "/admin")
	if status != http.StatusOK {
		t.Fatalf("/admin: %d\n%s", status, body)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &fields); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"schema", "version", "uptime_seconds", "readiness", "totals", "streams", "groups",
		"storage", "fsync", "memory", "connections", "reactors", "recovery"} {
		if _, ok := fields[name]; !ok {
			t.Errorf("/admin lacks %q", name)
		}
	}
	doc, err := decodeAdmin([]byte(body), broker.HealthAddr())
	if err != nil {
		t.Fatal(err)
	}
	if doc.Schema != health.AdminSchema || !doc.Readiness.Ready || len(doc.Streams) != 1 || doc.Streams[0].NextOffset != 3 ||
		len(doc.Groups) != 1 || doc.Groups[0].Lag != 1 || doc.Fsync.Syncs == 0 || doc.Totals.ProducedRecords != 3 ||
		doc.Memory.BudgetBytes == 0 || len(doc.Recovery) == 0 {
		t.Fatalf("/admin does not describe the workload:\n%s", body)
	}
}

func TestReportAndServerAgainstALiveBroker(t *testing.T) {
	t.Parallel()
	broker := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0")
	workload(t, broker.Addr(), 5)
	addr := broker.HealthAddr()
	for _, section := range []string{"groups", "streams", "storage", "recovery", "connections"} {
		human := runCLI(t, "report", section, "--health-addr", addr)
		expectCode(t, human, exitClean)
		machine := runCLI(t, "report", section, "--health-addr", addr, "--json")
		expectCode(t, machine, exitClean)
		var out map[string]json.RawMessage
		if err := json.Unmarshal([]byte(machine.stdout), &out); err != nil || string(out["schema"]) != `"ironbus.cli.report.`+section+`.v1"` || out[section] == nil {
			t.Errorf("report %s --json: %v\n%s", section, err, machine.stdout)
		}
	}
	if groups := runCLI(t, "report", "groups", "--health-addr", addr); !strings.Contains(groups.stdout, "workers") {
		t.Errorf("report groups does not list the group:\n%s", groups.stdout)
	}
	info := runCLI(t, "server", "info", "--health-addr", addr)
	expectCode(t, info, exitClean)
	if !strings.Contains(info.stdout, "ready") {
		t.Errorf("server info:\n%s", info.stdout)
	}
	for _, check := range []struct {
		flags []string
		code  int
		line  string
	}{
		{nil, int(monitor.OK), "IRONBUS OK - ready"},
		{[]string{"--lag-warn", "1"}, int(monitor.Warning), "IRONBUS WARNING - group orders/workers lags 1"},
		{[]string{"--lag-warn", "1", "--lag-crit", "1"}, int(monitor.Critical), "IRONBUS CRITICAL - group orders/workers lags 1"},
		{[]string{"--lag-warn", "x"}, int(monitor.Unknown), ""},
	} {
		result := runCLI(t, append([]string{"server", "check", "--health-addr", addr}, check.flags...)...)
		expectCode(t, result, check.code)
		if !strings.HasPrefix(result.stdout, check.line) || strings.Count(result.stdout, "\n") > 1 {
			t.Errorf("server check %v printed %q, want one line starting %q", check.flags, result.stdout, check.line)
		}
	}
}

func TestReportAndServerAgainstNothing(t *testing.T) {
	t.Parallel()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nothing := listener.Addr().String()
	_ = listener.Close()
	report := runCLI(t, "report", "streams", "--health-addr", nothing)
	expectCode(t, report, exitUnreachable)
	if !strings.Contains(report.stderr, "no broker answers") {
		t.Errorf("report against nothing should say so:\n%s", report.stderr)
	}
	expectCode(t, runCLI(t, "server", "info", "--health-addr", nothing, "--json"), exitUnreachable)
	check := runCLI(t, "server", "check", "--health-addr", nothing)
	expectCode(t, check, int(monitor.Critical))
	if !strings.HasPrefix(check.stdout, "IRONBUS CRITICAL - no broker answers") {
		t.Errorf("server check against nothing: %q", check.stdout)
	}
}

func TestHealthAddrIsLoopbackAndItsBindFailureIsClear(t *testing.T) {
	t.Parallel()
	open := runCLI(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0", "--health-addr", "0.0.0.0:0")
	expectCode(t, open, exitUsage)
	if !strings.Contains(open.stderr, "not a loopback address") || !strings.Contains(open.stderr, "--health-addr off") {
		t.Errorf("a non-loopback --health-addr should be refused with what to do:\n%s", open.stderr)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy := runCLI(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0", "--health-addr", taken.Addr().String())
	expectCode(t, busy, exitUsage)
	if !strings.Contains(busy.stderr, "pick another port") {
		t.Errorf("a busy --health-addr should say what to do:\n%s", busy.stderr)
	}
	off := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0", "--health-addr", "off")
	if off.HealthAddr() != "" {
		t.Errorf("--health-addr off still listens on %s", off.HealthAddr())
	}
}

// TestFrozenLogIsNotReady serves a data directory whose log holds a
// segment of a newer format: the log opens frozen read-only, /readyz
// answers 503 naming it, and server check is CRITICAL.
func TestFrozenLogIsNotReady(t *testing.T) {
	t.Parallel()
	dataDir := copyTestdata(t, "demo")
	segmentPath := filepath.Join(dataDir, "streams", "default", "0", "00000000000000000357.seg")
	data, err := os.ReadFile(segmentPath)
	if err != nil {
		t.Fatal(err)
	}
	data[8] = format.SegmentFormatVersion + 1
	binary.LittleEndian.PutUint32(data[60:], format.CRC(data[:60]))
	if err := os.WriteFile(segmentPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	broker := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0")
	status, body := httpGet(t, broker.HealthAddr(), "/readyz")
	if status != http.StatusServiceUnavailable || !strings.HasPrefix(body, "frozen: default/0 ") {
		t.Fatalf("/readyz with a frozen log: %d %q, want 503 frozen: default/0 <reason>", status, body)
	}
	check := runCLI(t, "server", "check", "--health-addr", broker.HealthAddr())
	expectCode(t, check, int(monitor.Critical))
	if !strings.HasPrefix(check.stdout, "IRONBUS CRITICAL - frozen: default/0") {
		t.Errorf("server check with a frozen log: %q", check.stdout)
	}
}

// TestGrafanaDashboardQueriesExist checks that every metric the shipped
// dashboard queries is in a live scrape, so a renamed metric cannot leave
// a panel empty.
func TestGrafanaDashboardQueriesExist(t *testing.T) {
	t.Parallel()
	dashboard, err := os.ReadFile(filepath.Join("..", "..", "docs", "grafana", "ironbus.json"))
	if err != nil {
		t.Fatal(err)
	}
	var parsed map[string]any
	if err := json.Unmarshal(dashboard, &parsed); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	broker := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0")
	workload(t, broker.Addr(), 2)
	_, scrape := httpGet(t, broker.HealthAddr(), "/metrics")
	names := regexp.MustCompile(`\bironbus_[a-z0-9_]+`).FindAllString(string(dashboard), -1)
	if len(names) < 10 {
		t.Fatalf("the dashboard queries only %d ironbus metrics", len(names))
	}
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		if name == "ironbus_reactor_busy_seconds_total" && strings.Contains(broker.Logs(), "backend=std") {
			continue // the std backend has no reactors to report
		}
		if !strings.Contains(scrape, "\n"+name+" ") && !strings.Contains(scrape, "\n"+name+"{") {
			t.Errorf("the dashboard queries %s, which the broker does not export", name)
		}
	}
}
