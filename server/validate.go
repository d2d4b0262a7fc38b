package server

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/broker/health"
	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/wire"
)

// unit says how a bound's numbers are written.
type unit int

const (
	unitCount unit = iota
	unitBytes
	unitDuration
	unitMillis
)

// Bounds of the settings whose limits come from elsewhere.
const (
	maxConnectionsLimit = 1 << 16
	maxWindow           = 1 << 20
	maxInFlightLimit    = 1 << 20
	maxLargeFramePool   = 4 << 30
	tebibyte            = 1 << 40
	pebibyte            = 1 << 50
	century             = 100 * 365 * 24 * time.Hour
	maxConnectionRate   = 1_000_000
	minConnectionRate   = 0.01
)

// bound is one numeric setting's inclusive range.
type bound struct {
	key      string
	unit     unit
	min, max int64
	get      func(*Config) int64
}

func sizeBound(key string, low, high int64, get func(*Config) int64) bound {
	return bound{key: key, unit: unitBytes, min: low, max: high, get: get}
}

func countBound(key string, low, high int64, get func(*Config) int) bound {
	return bound{key: key, unit: unitCount, min: low, max: high, get: func(c *Config) int64 { return int64(get(c)) }}
}

func durationBound(key string, low, high time.Duration, get func(*Config) time.Duration) bound {
	return bound{key: key, unit: unitDuration, min: int64(low), max: int64(high), get: func(c *Config) int64 { return int64(get(c)) }}
}

// bounds is every numeric setting with its range. A lower bound is never
// below what the engine, the storage or the network accept, so a value
// that passes never fails deeper down as an internal error.
func bounds() []bound {
	return []bound{
		countBound("max_connections", 1, maxConnectionsLimit, func(c *Config) int { return c.MaxConnections }),
		sizeBound("memory_storage_cap", 0, tebibyte, func(c *Config) int64 { return c.MemoryStorageCap }),
		durationBound("commit_linger", 0, segment.MaxCommitLinger, func(c *Config) time.Duration { return c.CommitLinger }),
		sizeBound("segment_bytes", segment.MinSegmentSize, segment.MaxSegmentSize, func(c *Config) int64 { return c.SegmentBytes }),
		sizeBound("staging_bytes", 4<<10, 256<<20, func(c *Config) int64 { return c.StagingBytes }),
		countBound("max_batch_records", 1, broker.MaxBatchRecordsLimit, func(c *Config) int { return c.MaxBatchRecords }),
		sizeBound("max_batch_bytes", 0, 256<<20, func(c *Config) int64 { return c.MaxBatchBytes }),
		sizeBound("ram_ceiling", 0, tebibyte, func(c *Config) int64 { return c.RAMCeiling }),
		sizeBound("max_frame", wire.MinMaxFrame, 1<<30, func(c *Config) int64 { return c.MaxFrame }),
		sizeBound("large_frame_pool", 0, maxLargeFramePool, func(c *Config) int64 { return c.LargeFramePool }),
		countBound("window", 1, maxWindow, func(c *Config) int { return c.Window }),
		sizeBound("connection_output", 4<<10, 1<<30, func(c *Config) int64 { return c.ConnectionOutput }),
		countBound("max_streams", 1, 1<<16, func(c *Config) int { return c.MaxStreams }),
		countBound("max_groups", 1, 1<<16, func(c *Config) int { return c.MaxGroups }),
		countBound("max_in_flight", 1, maxInFlightLimit, func(c *Config) int { return c.MaxInFlight }),
		{key: "consume_longpoll_ms", unit: unitMillis, min: 1, max: int64(time.Hour / time.Millisecond),
			get: func(c *Config) int64 { return int64(c.ConsumeLongPoll / time.Millisecond) }},
		durationBound("visibility_timeout", 100*time.Millisecond, 5*time.Minute, func(c *Config) time.Duration { return c.VisibilityTimeout }),
		countBound("max_deliver", 1, 10_000, func(c *Config) int { return c.MaxDeliver }),
		durationBound("checkpoint_interval", 10*time.Millisecond, time.Minute, func(c *Config) time.Duration { return c.CheckpointInterval }),
		countBound("no_ack_shed_budget", 0, 10_000_000, func(c *Config) int { return c.NoAckShedBudget }),
		countBound("max_open_txns", 1, 65_536, func(c *Config) int { return c.MaxOpenTxns }),
		countBound("dedup_max_ids", 1024, 10_000_000, func(c *Config) int { return c.DedupMaxIDs }),
		sizeBound("retention_bytes", 0, pebibyte, func(c *Config) int64 { return c.RetentionBytes }),
		durationBound("retention_age", 0, century, func(c *Config) time.Duration { return c.RetentionAge }),
		{key: "retention_records", unit: unitCount, min: 0, max: 1 << 62,
			get: func(c *Config) int64 { return int64(min(c.RetentionRecords, math.MaxInt64)) }},
		durationBound("group_expiry", 0, century, func(c *Config) time.Duration { return c.GroupExpiry }),
		durationBound("dlq_retention", 0, century, func(c *Config) time.Duration { return c.DLQRetention }),
		sizeBound("dlq_retention_bytes", 0, pebibyte, func(c *Config) int64 { return c.DLQRetentionBytes }),
		sizeBound("disk_budget", 0, pebibyte, func(c *Config) int64 { return c.DiskBudget }),
		sizeBound("disk_headroom", 0, pebibyte, func(c *Config) int64 { return c.DiskHeadroom }),
		durationBound("retention_interval", 100*time.Millisecond, 24*time.Hour, func(c *Config) time.Duration { return c.RetentionInterval }),
		sizeBound("audit_max_bytes", 4<<10, tebibyte, func(c *Config) int64 { return c.AuditMaxBytes }),
		countBound("audit_keep", 1, 1000, func(c *Config) int { return c.AuditKeep }),
		durationBound("security_reload_interval", 10*time.Millisecond, 24*time.Hour, func(c *Config) time.Duration { return c.SecurityReloadInterval }),
		countBound("max_half_open", 1, 1<<16, func(c *Config) int { return c.MaxHalfOpen }),
		countBound("max_half_open_per_source", 1, 1<<16, func(c *Config) int { return c.MaxHalfOpenPerSource }),
		countBound("auth_lockout_after", 1, 1000, func(c *Config) int { return c.AuthLockoutAfter }),
		durationBound("auth_failure_delay", time.Millisecond, 10*time.Second, func(c *Config) time.Duration { return c.AuthFailureDelay }),
	}
}

// Bound is one numeric setting's range as docs/CONFIG.md lists it.
type Bound struct {
	Key      string
	Min, Max string
}

// Bounds lists every numeric setting's inclusive range, in the order of
// Config's fields.
func Bounds() []Bound {
	var list []Bound
	for _, b := range bounds() {
		list = append(list, Bound{Key: b.key, Min: b.format(b.min), Max: b.format(b.max)})
	}
	list = append(list, Bound{Key: "connection_rate", Min: formatRate(minConnectionRate), Max: formatRate(maxConnectionRate)})
	return list
}

func (b bound) format(value int64) string {
	switch b.unit {
	case unitBytes:
		return arena.FormatBytes(value)
	case unitDuration:
		return formatDuration(time.Duration(value))
	}
	return strconv.FormatInt(value, 10)
}

// formatDuration writes d as time.ParseDuration reads it, without the
// zero minutes and seconds of a whole hour or minute ("5m", "24h").
func formatDuration(d time.Duration) string {
	text := d.String()
	if trimmed, ok := strings.CutSuffix(text, "m0s"); ok {
		text = trimmed + "m"
	}
	if trimmed, ok := strings.CutSuffix(text, "h0m"); ok {
		text = trimmed + "h"
	}
	return text
}

func formatRate(rate float64) string { return strconv.FormatFloat(rate, 'f', -1, 64) }

// Validate checks every setting alone and the settings that go together,
// as New does before it touches anything: bounds (*BoundsError), choices,
// consents, the bind rule of Addr and HealthAddr. It does not read files
// or reserve memory (Budget does that).
func (cfg Config) Validate() error {
	var problems []error
	for _, b := range bounds() {
		if value := b.get(&cfg); value < b.min || value > b.max {
			problems = append(problems, &BoundsError{Key: b.key, Value: b.format(value), Min: b.format(b.min), Max: b.format(b.max)})
		}
	}
	if rate := cfg.ConnectionRate; math.IsNaN(rate) || rate < minConnectionRate || rate > maxConnectionRate {
		problems = append(problems, &BoundsError{Key: "connection_rate", Value: formatRate(rate),
			Min: formatRate(minConnectionRate), Max: formatRate(maxConnectionRate)})
	}
	if len(problems) > 0 {
		return errors.Join(problems...)
	}
	for _, check := range []func() error{cfg.checkChoices, cfg.checkConsents, cfg.checkStorage, cfg.checkMemory,
		cfg.checkRetention, cfg.checkHealthAddr, cfg.checkCluster} {
		if err := check(); err != nil {
			return err
		}
	}
	_, err := cfg.checkBind()
	return err
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidSetting}, args...)...)
}

// checkChoices refuses a word setting that is not one of its choices.
func (cfg Config) checkChoices() error {
	if _, err := segment.ParseDurability(cfg.Durability); err != nil {
		return invalid("--durability: %w", err)
	}
	if _, err := segment.ParseIOMode(cfg.IOMode); err != nil {
		return invalid("--io-mode: %w", err)
	}
	if _, err := broker.ParsePinPolicy(cfg.RetentionPolicy); err != nil {
		return invalid("--retention-policy: %w", err)
	}
	if _, err := broker.ParseDiskFullPolicy(cfg.DiskFullPolicy); err != nil {
		return invalid("--disk-full-policy: %w", err)
	}
	if _, err := parseLogLevel(cfg.LogLevel); err != nil {
		return invalid("--log-level: %w", err)
	}
	switch cfg.Loop {
	case loop.BackendAuto, loop.BackendURing, loop.BackendEpoll, loop.BackendStd:
	default:
		return invalid("--loop %q: want auto, uring, epoll or std", cfg.Loop)
	}
	switch cfg.Storage {
	case StorageDisk, StorageMemory:
	default:
		return invalid("--storage %q: want disk, memory", cfg.Storage)
	}
	return nil
}

func (cfg Config) checkConsents() error {
	durability, _ := segment.ParseDurability(cfg.Durability)
	if durability != segment.DurabilitySync && !cfg.AcceptRelaxedDurability {
		return invalid("--durability %s acknowledges records a power cut can lose; add --accept-relaxed-durability to accept that", cfg.Durability)
	}
	if durability != segment.DurabilitySync && cfg.CommitLinger != 0 {
		return invalid("--commit-linger holds fdatasyncs that --durability %s does not wait for: it applies only to --durability sync", cfg.Durability)
	}
	return nil
}

// checkStorage refuses memory storage without consent or a cap, a data
// directory it would ignore, and a cap that cannot hold two segments (the
// active one is preallocated whole).
func (cfg Config) checkStorage() error {
	if cfg.Storage != StorageMemory {
		if cfg.AcceptMemoryStorageLoss || cfg.MemoryStorageCap != 0 {
			return invalid("--accept-memory-storage-loss and --memory-storage-cap apply only to --storage memory")
		}
		return nil
	}
	switch {
	case !cfg.AcceptMemoryStorageLoss:
		return invalid("--storage memory keeps records only in RAM: a stop, crash or power cut loses every one, acknowledged or not; " +
			"add --accept-memory-storage-loss to accept that")
	case cfg.MemoryStorageCap <= 0:
		return invalid("--storage memory needs --memory-storage-cap (for example 32MiB): RAM is bounded, and producers get the storage-full error at the cap")
	case cfg.DataDir != "":
		return invalid("--data-dir %s: --storage memory writes no files; drop one of them", cfg.DataDir)
	case cfg.EncryptionKeyFile != "":
		return invalid("--encryption-key-file encrypts data at rest and --storage memory keeps none; drop one of them")
	case cfg.MemoryStorageCap < 2*cfg.SegmentBytes:
		return invalid("--memory-storage-cap %s cannot hold two segments of --segment-bytes %s; lower --segment-bytes or raise the cap",
			arena.FormatBytes(cfg.MemoryStorageCap), arena.FormatBytes(cfg.SegmentBytes))
	}
	return nil
}

func (cfg Config) checkMemory() error {
	if pool, need := cfg.LargeFramePool, cfg.MaxFrame+readBufferSize; pool != 0 && pool < need {
		return invalid("--large-frame-pool %s cannot hold one largest frame: it needs at least --max-frame + 64KiB (%s)",
			arena.FormatBytes(pool), arena.FormatBytes(need))
	}
	// An atomic batch is staged whole and written into one segment.
	holds := int64(segment.MaxAtomicBytes(segment.Options{SegmentSize: cfg.SegmentBytes, StagingBytes: int(cfg.StagingBytes)}))
	if cfg.MaxBatchBytes > holds {
		return invalid("--max-batch-bytes %s is more than one staging buffer (--staging-bytes %s) and one segment (--segment-bytes %s) hold: at most %s",
			arena.FormatBytes(cfg.MaxBatchBytes), arena.FormatBytes(cfg.StagingBytes), arena.FormatBytes(cfg.SegmentBytes), arena.FormatBytes(holds))
	}
	return nil
}

// checkRetention refuses a headroom without a budget, and a budget that
// cannot hold the segments the engine needs to write at all: the engine
// refuses the same when it opens or swaps retention, and config check
// must say so first.
func (cfg Config) checkRetention() error {
	if cfg.DiskHeadroom > 0 && cfg.DiskBudget == 0 {
		return invalid("--disk-headroom needs --disk-budget: the headroom is a part of the budget")
	}
	if cfg.DiskBudget == 0 {
		return nil
	}
	headroom := cfg.DiskHeadroom
	if headroom == 0 {
		headroom = max(cfg.DiskBudget/20, 2*cfg.SegmentBytes)
	}
	if cfg.DiskBudget-headroom < 8*cfg.SegmentBytes {
		return invalid("--disk-budget %s minus %s of headroom holds fewer than eight segments of --segment-bytes %s "+
			"(each log keeps an active and a prepared one, and the budget keeps two of margin); raise the budget or lower the segment size",
			arena.FormatBytes(cfg.DiskBudget), arena.FormatBytes(headroom), arena.FormatBytes(cfg.SegmentBytes))
	}
	return nil
}

func (cfg Config) checkHealthAddr() error {
	for _, host := range cfg.HealthHosts {
		if host == "" || strings.ContainsAny(host, " \t\r\n/:@") {
			return invalid("--health-hosts: %q is not a host name (want names like broker.internal, without a port)", host)
		}
	}
	if cfg.HealthAddr == "" || cfg.HealthAddr == HealthOff {
		return nil
	}
	if err := health.CheckAddress(cfg.HealthAddr, cfg.HealthTokenFile != ""); err != nil {
		if errors.Is(err, health.ErrNotLoopback) {
			return fmt.Errorf("%w: --health-addr %s is not a loopback address: beyond loopback the endpoints need a bearer token; "+
				"pass --health-token-file FILE (mode 0600; `ironbus token create --out FILE` makes one), bind 127.0.0.1, or pass --health-addr off",
				ErrUnprotectedAddress, cfg.HealthAddr)
		}
		return invalid("--health-addr: %w", err)
	}
	return nil
}

// checkCluster checks the cluster settings: a node id needs a cluster
// address that is its own entry in the peer list, disk storage, and
// loopback addresses unless the plaintext consent is given (the peer
// link has no TLS yet).
func (cfg Config) checkCluster() error {
	if cfg.NodeID == 0 {
		if cfg.ClusterAddr != "" || len(cfg.Peers) > 0 {
			return invalid("--cluster-addr and --peer need --node-id: give this node its id in the cluster")
		}
		return nil
	}
	if cfg.Storage != StorageDisk {
		return invalid("--node-id needs --storage disk: a cluster member keeps its replicas and its vote on disk")
	}
	if cfg.ClusterAddr == "" {
		return invalid("--node-id %d needs --cluster-addr host:port: where the other nodes reach this one", cfg.NodeID)
	}
	if cfg.EncryptionKeyFile != "" {
		return invalid("--node-id with --encryption-key-file: replicated partitions do not encrypt at rest yet; run the cluster without encryption, or a single node with it")
	}
	if cfg.ClusterName == "" {
		return invalid("--cluster-name must not be empty")
	}
	own, ok := cfg.Peers[cfg.NodeID]
	if !ok {
		return invalid("--peer must list every founding node, this one included: add --peer %d=%s", cfg.NodeID, cfg.ClusterAddr)
	}
	if own != cfg.ClusterAddr {
		return invalid("--peer %d=%s names this node at another address than --cluster-addr %s", cfg.NodeID, own, cfg.ClusterAddr)
	}
	for id, address := range cfg.Peers {
		host, _, err := net.SplitHostPort(address)
		if id == 0 || err != nil {
			return invalid("--peer %d=%q: want id=host:port with a nonzero id", id, address)
		}
		if !isLoopback(host) && !cfg.InsecurePlaintextCluster {
			return fmt.Errorf("%w: --peer %d=%s is not a loopback address and the peer link has no TLS yet: "+
				"every record would cross the network in plaintext; keep the cluster on loopback, or (trusted network only) pass --insecure-plaintext-cluster",
				ErrUnprotectedAddress, id, address)
		}
	}
	return nil
}

// checkBind is the bind rule: a non-loopback Addr needs TLS plus
// authentication, or authentication over plaintext with the explicit
// consent. It reports whether the bind is exposed plaintext (warned about
// at every start).
func (cfg Config) checkBind() (exposedPlaintext bool, err error) {
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return false, invalid("--addr %q: %w (want host:port, for example 127.0.0.1:7777)", cfg.Addr, err)
	}
	if isLoopback(host) {
		return false, nil
	}
	tls, auth := cfg.TLSCert != "", cfg.AuthConfig != ""
	switch {
	case tls && auth:
		return false, nil
	case auth && cfg.InsecurePlaintextWire:
		return true, nil
	case tls:
		return false, fmt.Errorf("%w: --addr %s is not a loopback address: TLS alone lets anyone who reaches it read and write every stream; "+
			"add --auth-config FILE (see `ironbus auth add`)", ErrUnprotectedAddress, cfg.Addr)
	case cfg.InsecurePlaintextWire:
		return false, fmt.Errorf("%w: --addr %s with --insecure-plaintext-wire still needs --auth-config FILE: "+
			"without authentication anyone who reaches it can read and write every stream", ErrUnprotectedAddress, cfg.Addr)
	}
	return false, fmt.Errorf("%w: --addr %s is not a loopback address: without TLS and authentication anyone who reaches it can read and write every stream; "+
		"bind 127.0.0.1, or add --tls-cert, --tls-key and --auth-config, or (trusted network only) --auth-config with --insecure-plaintext-wire",
		ErrUnprotectedAddress, cfg.Addr)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// flagOf is the flag spelling of a key: segment_bytes is --segment-bytes.
func flagOf(key string) string { return "--" + strings.ReplaceAll(key, "_", "-") }
