package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
)

// testConfig is a broker on a temporary data directory and free loopback
// ports, logging into log.
func testConfig(t *testing.T, log *lockedBuffer) Config {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DataDir, cfg.Addr, cfg.HealthAddr = t.TempDir(), "127.0.0.1:0", "127.0.0.1:0"
	if log != nil {
		cfg.LogOutput = log
	}
	return cfg
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// start runs New and Start, and stops the server when the test ends.
func start(t *testing.T, cfg Config) *Server {
	t.Helper()
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	return srv
}

func TestDefaultConfigIsValid(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestValidateRefusesEveryBound: one past either end of every numeric
// setting is a *BoundsError naming the key, the value and the range;
// each end itself is accepted.
func TestValidateRefusesEveryBound(t *testing.T) {
	for _, b := range bounds() {
		for _, value := range []int64{b.min - 1, b.max + 1} {
			if value < 0 && b.min == 0 && b.key == "retention_records" {
				continue // unsigned: cannot go below 0
			}
			cfg := DefaultConfig()
			set(t, &cfg, b, value)
			err := cfg.Validate()
			var bounds *BoundsError
			if !errors.As(err, &bounds) || !errors.Is(err, ErrOutOfBounds) || bounds.Key != b.key ||
				bounds.Value != b.format(value) || bounds.Min != b.format(b.min) || bounds.Max != b.format(b.max) {
				t.Errorf("%s = %d: %v", b.key, value, err)
			}
		}
		for _, value := range []int64{b.min, b.max} {
			cfg := DefaultConfig()
			set(t, &cfg, b, value)
			if b.key == "large_frame_pool" && value != 0 && value < cfg.MaxFrame+readBufferSize {
				continue // a coupled check, not a bound
			}
			if err := cfg.Validate(); errors.Is(err, ErrOutOfBounds) {
				t.Errorf("%s = %d (an end of its range) refused: %v", b.key, value, err)
			}
		}
	}
	cfg := DefaultConfig()
	cfg.SegmentBytes = 12
	err := cfg.Validate()
	if want := "--segment-bytes 12 B (segment_bytes): out of bounds, want 64 KiB to 1 GiB"; err == nil || err.Error() != want {
		t.Fatalf("segment_bytes = 12: %v, want %q", err, want)
	}
	cfg = DefaultConfig()
	cfg.ConnectionRate = 0
	if err := cfg.Validate(); !errors.Is(err, ErrOutOfBounds) || !strings.Contains(err.Error(), "connection_rate") {
		t.Fatalf("connection_rate = 0: %v", err)
	}
}

// set writes value into the setting of b, by key.
func set(t *testing.T, cfg *Config, b bound, value int64) {
	t.Helper()
	fields := map[string]func(){
		"max_connections":          func() { cfg.MaxConnections = int(value) },
		"memory_storage_cap":       func() { cfg.MemoryStorageCap = value },
		"segment_bytes":            func() { cfg.SegmentBytes = value },
		"commit_linger":            func() { cfg.CommitLinger = time.Duration(value) },
		"staging_bytes":            func() { cfg.StagingBytes = value },
		"max_batch_records":        func() { cfg.MaxBatchRecords = int(value) },
		"max_batch_bytes":          func() { cfg.MaxBatchBytes = value },
		"ram_ceiling":              func() { cfg.RAMCeiling = value },
		"max_frame":                func() { cfg.MaxFrame = value },
		"large_frame_pool":         func() { cfg.LargeFramePool = value },
		"window":                   func() { cfg.Window = int(value) },
		"connection_output":        func() { cfg.ConnectionOutput = value },
		"max_streams":              func() { cfg.MaxStreams = int(value) },
		"max_groups":               func() { cfg.MaxGroups = int(value) },
		"max_in_flight":            func() { cfg.MaxInFlight = int(value) },
		"consume_longpoll_ms":      func() { cfg.ConsumeLongPoll = time.Duration(value) * time.Millisecond },
		"visibility_timeout":       func() { cfg.VisibilityTimeout = time.Duration(value) },
		"max_deliver":              func() { cfg.MaxDeliver = int(value) },
		"checkpoint_interval":      func() { cfg.CheckpointInterval = time.Duration(value) },
		"no_ack_shed_budget":       func() { cfg.NoAckShedBudget = int(value) },
		"dedup_max_ids":            func() { cfg.DedupMaxIDs = int(value) },
		"max_open_txns":            func() { cfg.MaxOpenTxns = int(value) },
		"retention_bytes":          func() { cfg.RetentionBytes = value },
		"retention_age":            func() { cfg.RetentionAge = time.Duration(value) },
		"retention_records":        func() { cfg.RetentionRecords = uint64(value) },
		"group_expiry":             func() { cfg.GroupExpiry = time.Duration(value) },
		"dlq_retention":            func() { cfg.DLQRetention = time.Duration(value) },
		"dlq_retention_bytes":      func() { cfg.DLQRetentionBytes = value },
		"disk_budget":              func() { cfg.DiskBudget = value },
		"disk_headroom":            func() { cfg.DiskHeadroom = value },
		"retention_interval":       func() { cfg.RetentionInterval = time.Duration(value) },
		"audit_max_bytes":          func() { cfg.AuditMaxBytes = value },
		"audit_keep":               func() { cfg.AuditKeep = int(value) },
		"security_reload_interval": func() { cfg.SecurityReloadInterval = time.Duration(value) },
		"max_half_open":            func() { cfg.MaxHalfOpen = int(value) },
		"max_half_open_per_source": func() { cfg.MaxHalfOpenPerSource = int(value) },
		"auth_lockout_after":       func() { cfg.AuthLockoutAfter = int(value) },
		"auth_failure_delay":       func() { cfg.AuthFailureDelay = time.Duration(value) },
	}
	setter, ok := fields[b.key]
	if !ok {
		t.Fatalf("no setter for %s: add it here", b.key)
	}
	setter()
	if got := b.get(cfg); got != value && !(b.key == "retention_records" && value < 0) {
		t.Fatalf("%s: set %d, read %d", b.key, value, got)
	}
}

// TestLowerBoundsOpenAndServe: a broker with every setting at the lower
// end of its range opens, serves a produce and a fetch, and stops. A
// bound that admits what the engine refuses would fail here.
func TestLowerBoundsOpenAndServe(t *testing.T) {
	cfg := testConfig(t, nil)
	for _, b := range bounds() {
		if b.min > 0 {
			set(t, &cfg, b, b.min)
		}
	}
	cfg.MaxFrame = 64 << 10
	cfg.ConnectionRate = minConnectionRate
	srv := start(t, cfg)
	produceAndFetch(t, srv.Addr(), "tiny", 3)
}

func produceAndFetch(t *testing.T, addr, stream string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range n {
		ack, err := c.Produce(ctx, stream, client.Record{Payload: []byte{byte('a' + i)}})
		if err != nil || ack.Offset != uint64(i) {
			t.Fatalf("produce %d: %+v %v", i, ack, err)
		}
	}
	// Fetch and ack until every record came back: at the lower bounds a
	// group may lease one record at a time.
	for fetched := 0; fetched < n; {
		result, err := c.Fetch(ctx, stream, "readers", client.FetchOptions{MaxRecords: n, Wait: time.Second})
		if err != nil || len(result.Messages) == 0 {
			t.Fatalf("fetched %d of %d: %v", fetched, n, err)
		}
		if _, err := c.Ack(ctx, stream, "readers", result.Messages...); err != nil {
			t.Fatal(err)
		}
		fetched += len(result.Messages)
	}
}

// TestNewRefusesEachBootCheck: every boot check refuses with its typed
// error and a message saying what to do, and leaves nothing behind (the
// same data directory opens afterwards).
func TestNewRefusesEachBootCheck(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "not-a-dir")
	exposed := filepath.Join(dir, "exposed.key")
	for _, path := range []string{file, exposed} {
		if err := os.WriteFile(path, []byte("secret\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cases := []struct {
		name   string
		change func(*Config)
		want   error
		says   string
	}{
		{"bounds", func(c *Config) { c.SegmentBytes = 12 }, ErrOutOfBounds, "want 64 KiB to 1 GiB"},
		{"choice", func(c *Config) { c.Durability = "eventually" }, ErrInvalidSetting, "--durability"},
		{"consent", func(c *Config) { c.Durability = "none" }, ErrInvalidSetting, "--accept-relaxed-durability"},
		{"bind", func(c *Config) { c.Addr = "0.0.0.0:0" }, ErrUnprotectedAddress, "--insecure-plaintext-wire"},
		{"health bind", func(c *Config) { c.HealthAddr = "0.0.0.0:0" }, ErrUnprotectedAddress, "--health-addr off"},
		{"data dir is a file", func(c *Config) { c.DataDir = file }, ErrNotADirectory, "move the file away"},
		{"data dir under a file", func(c *Config) { c.DataDir = filepath.Join(file, "data") }, ErrNotADirectory, "is a file"},
		{"no data dir", func(c *Config) { c.DataDir = "" }, ErrInvalidSetting, "--data-dir is required"},
		{"exposed TLS key", func(c *Config) { c.TLSCert, c.TLSKey = exposed, exposed }, ErrExposedSecret, "chmod 600"},
		{"exposed auth config", func(c *Config) { c.AuthConfig = exposed }, ErrExposedSecret, "chmod 600"},
		{"RAM ceiling", func(c *Config) { c.RAMCeiling = 8 << 20 }, ErrOverBudget, "over the ceiling by"},
		{"port in use", func(c *Config) { c.Addr = busy.Addr().String() }, ErrListen, "pick another with --addr"},
		{"health port in use", func(c *Config) { c.HealthAddr = busy.Addr().String() }, ErrListen, "--health-addr off"},
		{"disk budget", func(c *Config) { c.DiskBudget, c.SegmentBytes = 4<<20, 1<<20 }, ErrInvalidSetting, "raise the budget or lower the segment size"},
		{"memory storage", func(c *Config) { c.Storage, c.DataDir = StorageMemory, "" }, ErrInvalidSetting, "--accept-memory-storage-loss"},
	}
	for _, c := range cases {
		cfg := testConfig(t, nil)
		c.change(&cfg)
		srv, err := New(cfg)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want %v saying %q", c.name, err, c.want, c.says)
		}
		if srv != nil {
			t.Errorf("%s: New returned a server with its error", c.name)
		}
	}
}

// TestNewRefusesALockedDataDir: a second server on a data directory in
// use is ErrLocked, naming the holder; once the first stops, it opens.
func TestNewRefusesALockedDataDir(t *testing.T) {
	cfg := testConfig(t, nil)
	cfg.Owner = "first broker"
	first, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	second := cfg
	second.Owner = "second broker"
	if _, err := New(second); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "first broker (pid") {
		t.Fatalf("a second server on a locked directory: %v", err)
	}
	if err := first.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	start(t, second)
}

// TestStartStopReloadAndRestart runs a server on a real loopback listener
// and data directory: a client produces through it, the health endpoints
// answer, a reload changes the level and the retention and nothing else,
// a graceful stop syncs, and a restart finds the records.
func TestStartStopReloadAndRestart(t *testing.T) {
	var log lockedBuffer
	cfg := testConfig(t, &log)
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); !errors.Is(srv.Start(context.Background()), ErrState) || err != nil {
		t.Fatalf("Start: %v; a second Start must be ErrState", err)
	}
	produceAndFetch(t, srv.Addr(), "orders", 5)
	if addresses := srv.Addresses(); addresses["wire"].String() != srv.Addr() || addresses["health"] == nil {
		t.Fatalf("addresses: %v", addresses)
	}
	for _, endpoint := range []string{"/readyz", "/healthz"} { // /healthz probes through the wire listener
		response, err := http.Get("http://" + srv.HealthAddr() + endpoint)
		if err != nil || response.StatusCode != http.StatusOK {
			t.Fatalf("%s of a started server: %v %v", endpoint, response, err)
		}
		_ = response.Body.Close()
	}

	next := srv.Config()
	next.LogLevel, next.RetentionBytes, next.MaxConnections = "debug", 1<<30, 7
	if err := srv.Reload(next); err != nil {
		t.Fatal(err)
	}
	if got := srv.Config(); got.LogLevel != "debug" || got.RetentionBytes != 1<<30 || got.MaxConnections != cfg.MaxConnections {
		t.Fatalf("after Reload: level %s, retention %d, max connections %d", got.LogLevel, got.RetentionBytes, got.MaxConnections)
	}
	if srv.engine.Retention().Stream.MaxBytes != 1<<30 || !srv.logger.Enabled(context.Background(), -4) {
		t.Fatalf("the reload did not reach the engine or the logger: %+v", srv.engine.Retention())
	}
	bad := srv.Config()
	bad.LogLevel, bad.RetentionPolicy = "error", "keep-everything"
	if err := srv.Reload(bad); !errors.Is(err, ErrInvalidSetting) || srv.Config().LogLevel != "debug" {
		t.Fatalf("a refused reload: %v, level now %s", err, srv.Config().LogLevel)
	}
	if err := srv.ReloadSecrets(); err != nil {
		t.Fatalf("ReloadSecrets without TLS or auth: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(ctx); !errors.Is(err, ErrState) {
		t.Fatalf("a second Stop: %v", err)
	}
	for _, want := range []string{"msg=serving", "msg=\"stopped cleanly\"", "health endpoints listening"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log lacks %s:\n%s", want, log.String())
		}
	}
	restarted := start(t, cfg)
	c, err := client.Dial(ctx, restarted.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	result, err := c.Fetch(ctx, "orders", "after-restart", client.FetchOptions{MaxRecords: 10, Wait: time.Second})
	if err != nil || len(result.Messages) != 5 {
		t.Fatalf("after a restart: %d records, %v", len(result.Messages), err)
	}
}

// TestStopWithoutStartReleases: a server stopped before it started frees
// its ports and its data directory.
func TestStopWithoutStartReleases(t *testing.T) {
	cfg := testConfig(t, nil)
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr()
	if err := srv.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); !errors.Is(err, ErrState) {
		t.Fatalf("Start after Stop: %v", err)
	}
	cfg.Addr = addr
	start(t, cfg)
}

// TestMemoryStorage: a memory server writes no file, warns at start and
// counts its cap in the budget.
func TestMemoryStorage(t *testing.T) {
	var log lockedBuffer
	cfg := testConfig(t, &log)
	cfg.DataDir, cfg.Storage, cfg.AcceptMemoryStorageLoss = "", StorageMemory, true
	cfg.MemoryStorageCap, cfg.SegmentBytes = 4<<20, 1<<20
	budget, err := cfg.Budget()
	if err != nil || !budget.Fits() || budget.Lines[1].Name != "in-memory storage" || budget.Lines[1].Bytes != 4<<20 {
		t.Fatalf("budget: %+v %v", budget, err)
	}
	srv := start(t, cfg)
	produceAndFetch(t, srv.Addr(), "volatile", 2)
	if !strings.Contains(log.String(), "NOTHING IS DURABLE") {
		t.Fatalf("no warning:\n%s", log.String())
	}
}

// TestDocsListEveryBound: docs/CONFIG.md has a row for every numeric
// setting with the same range Validate enforces.
func TestDocsListEveryBound(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "CONFIG.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "\n## Bounds\n")
	section, _, _ = strings.Cut(section, "\n## ")
	rows := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		if cells := strings.Split(line, "|"); len(cells) > 3 {
			rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = line
		}
	}
	for _, b := range Bounds() {
		row, ok := rows[b.Key]
		if !ok || !strings.Contains(row, "| "+b.Min+" |") || !strings.Contains(row, "| "+b.Max+" |") {
			t.Errorf("docs/CONFIG.md: want a row | `%s` | %s | %s | …, have %q", b.Key, b.Min, b.Max, row)
		}
	}
}

// TestHalfOpenPerSourceCap: max_half_open_per_source reaches the gate: at
// a cap of one, a client from the address of a silent connection gets in
// and the silent connection is closed to make room.
func TestHalfOpenPerSourceCap(t *testing.T) {
	cfg := testConfig(t, nil)
	cfg.MaxHalfOpenPerSource = 1
	srv := start(t, cfg)
	silent, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	deadline := time.Now().Add(5 * time.Second)
	for srv.secured.gate.HalfOpen() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the silent connection was never admitted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	produceAndFetch(t, srv.Addr(), "crowded", 1)
	_ = silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, silent); err != nil {
		t.Fatalf("the silent connection was not evicted: %v", err)
	}
}
