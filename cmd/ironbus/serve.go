package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/session"
)

// defaultAddr is where the broker listens and clients connect unless told
// otherwise: loopback, so a fresh install exposes nothing.
const defaultAddr = "127.0.0.1:7777"

// drainTimeout bounds a graceful stop; a second signal cuts it short.
const drainTimeout = 30 * time.Second

type serveOptions struct {
	dataDir           string
	addr              string
	durability        string
	ioMode            string
	segmentBytes      int64
	maxConnections    int
	longPollMs        int
	visibility        time.Duration
	maxDeliver        int
	dlqRetention      time.Duration
	insecurePlaintext bool
	profileOut        string
	acceptRelaxed     bool
	loop              string
	memory            memoryOptions

	// Configuration layers and storage choice (configlayers.go, storage.go).
	config           configOptions
	storage          storageOptions
	retention        retentionOptions
	health           healthOptions        // health.go
	security         serveSecurityOptions // tls.go
	exposedPlaintext bool                 // a non-loopback bind without TLS (warned at start)
}

func newServeCmd(opts *globalOptions) *cobra.Command {
	cmd, _ := newServeCommand(opts)
	return cmd
}

// newServeCommand builds serve with the options its flags fill; a reload
// builds a fresh one to parse the new configuration into.
// serveLong is serve's --help text.
const serveLong = `Run the IronBus broker.

serve opens (or creates) the data directory, recovers every log in it, and
accepts client connections. A producer's record is acknowledged only after the
fdatasync that makes it durable (--durability sync, the default).

The broker listens on loopback unless told otherwise, with no TLS and no
authentication. A non-loopback --addr needs TLS (--tls-cert, --tls-key) and
authentication (--auth-config), or --auth-config with --insecure-plaintext-wire
on a network you trust (warned about loudly at every start). --tls-client-ca
requires client certificates (mTLS). TLS and auth files reload when they change
and on SIGHUP, without dropping connections. See docs/SECURITY.md.

SIGTERM or SIGINT drain gracefully: stop accepting, answer every request already
read (acknowledging only what was synced), sync every log, exit 0. A second
signal exits at once; recovery at the next start truncates anything torn.

The data directory is locked: a second broker on it fails and names the holder.

Memory: every buffer the broker may hold is bounded by a knob, and the sum of
their worst cases is the RAM budget. --ram-ceiling refuses to start when the
budget does not fit, printing it line by line with the knob to turn, and sets
the Go runtime's memory limit. --print-budget shows the budget and exits.
Segment files read through mmap are page cache the kernel reclaims, and are
not part of the budget.

Configuration: every flag is also a key of the --config TOML file
(--segment-bytes is segment_bytes) and an environment variable
(IRONBUS_SEGMENT_BYTES). Precedence: flag > environment > file > profile >
default. --profile edge-tiny (small devices, 64MiB ceiling), balanced (the
defaults) or throughput sets every knob you do not set otherwise; --edge is
the old name of edge-tiny. Unknown file keys are refused. SIGHUP re-reads the
file and applies what can change while running (--log-level), logging every
other change as needing a restart. "ironbus config print" shows each value
and where it came from; docs/CONFIG.md has the details.

--storage memory keeps everything in RAM and nothing survives the process; it
needs --accept-memory-storage-loss and --memory-storage-cap.

Retention (docs/RETENTION.md): --retention-bytes, --retention-age and
--retention-records bound every stream, deleting whole sealed segments only.
Under --retention-policy consumer-safe (the default) a bound never deletes what
a consumer group has not committed; drop-oldest does, and the group gets a gap
advisory. --group-expiry lets an idle group stop holding retention back.
--disk-budget caps the whole data directory, keeping --disk-headroom free for
checkpoints and recovery; at the budget, --disk-full-policy drop-new refuses
new records with a retryable no-space error while reads and acks go on.
Record ages never trust the wall clock alone: a clock stepping years forward
or back deletes nothing early.`

const serveExample = `  ironbus serve --data-dir /var/lib/ironbus
  ironbus serve --data-dir ./data --addr 127.0.0.1:7000 --segment-bytes 8MiB
  ironbus serve --data-dir ./data --io-mode auto --max-connections 32
  ironbus serve --data-dir ./data --loop epoll
  ironbus serve --data-dir /data --profile edge-tiny
  ironbus serve --config /etc/ironbus/ironbus.toml
  IRONBUS_LOG_LEVEL=debug ironbus serve --data-dir ./data
  ironbus serve --storage memory --accept-memory-storage-loss --memory-storage-cap 64MiB --segment-bytes 8MiB
  ironbus serve --data-dir ./data --max-connections 1000 --print-budget
  ironbus serve --data-dir /data --retention-age 72h --retention-bytes 2GiB --group-expiry 168h
  ironbus serve --data-dir /data --disk-budget 8GiB --disk-full-policy drop-oldest
  ironbus serve --data-dir /data --addr 0.0.0.0:7777 --tls-cert server.crt --tls-key server.key --auth-config auth.toml`

func newServeCommand(opts *globalOptions) (*cobra.Command, *serveOptions) {
	serve := &serveOptions{segmentBytes: segment.DefaultSegmentSize, memory: defaultMemoryOptions()}
	cmd := &cobra.Command{
		Use:     "serve --data-dir DIR [--addr HOST:PORT] [--config FILE] [--profile NAME]",
		Short:   "Run the broker on a data directory",
		Long:    serveLong,
		Example: serveExample,
		Args:    cobra.NoArgs,
	}
	flags := cmd.Flags()
	addDataDirFlag(cmd, &serve.dataDir)
	flags.StringVar(&serve.addr, "addr", defaultAddr, "address to listen on (host:port; port 0 picks a free one)")
	flags.StringVar(&serve.durability, "durability", "sync", "when a produce is acknowledged: sync (after fdatasync), interval or none (need --accept-relaxed-durability)")
	flags.BoolVar(&serve.acceptRelaxed, "accept-relaxed-durability", false, "consent to --durability interval|none: a power cut loses acknowledged records")
	flags.StringVar(&serve.ioMode, "io-mode", "buffered", "how segments are written: buffered, direct (O_DIRECT) or auto (probe and pick)")
	flags.Var(sizeValue{&serve.segmentBytes}, "segment-bytes", "segment size, with a unit (64MiB; 8MiB suits small devices)")
	flags.IntVar(&serve.maxConnections, "max-connections", broker.DefaultMaxConnections, "connections served at once")
	flags.IntVar(&serve.longPollMs, "consume-longpoll-ms", int(session.DefaultMaxConsumeWait/time.Millisecond),
		"longest an idle fetch parks waiting for new durable records (ms)")
	flags.DurationVar(&serve.visibility, "visibility-timeout", 30*time.Second, "default lease of a delivery to a work or key-shared group")
	flags.IntVar(&serve.maxDeliver, "max-deliver", consumer.DefaultMaxDeliver, "deliveries of a record before it moves to the dead-letter queue")
	flags.DurationVar(&serve.dlqRetention, "dlq-retention", broker.DefaultDeadLetterRetention,
		"drop dead letters older than this (whole segments; 0 keeps them forever)")
	flags.StringVar(&serve.loop, "loop", loop.BackendAuto, "network backend: auto (fastest this system runs), uring, epoll or std; a named one that cannot run is an error")
	flags.BoolVar(&serve.insecurePlaintext, "insecure-plaintext-wire", false, "allow a non-loopback --addr without TLS (still needs --auth-config; warned at every start)")
	flags.StringVar(&serve.profileOut, "profile-out", "", "write cpu.pprof (while serving) and heap.pprof (at stop) into this directory")
	flags.BoolVar(&opts.json, "json", false, "log one JSON object per line; with --print-budget, print the budget as JSON (schema ironbus.cli.budget.v1)")
	addMemoryFlags(cmd, &serve.memory)
	addConfigFlags(cmd, &serve.config)
	addStorageFlags(cmd, &serve.storage)
	addRetentionFlags(cmd, &serve.retention)
	addHealthFlags(cmd, &serve.health)
	addSecurityFlags(cmd, &serve.security)
	cmd.RunE = classified(func() error {
		resolved, err := resolveConfig(cmd.Flags(), &serve.config, os.LookupEnv)
		if err != nil {
			return err
		}
		serve.config.resolved = resolved
		return resolved.withSources(runServe(opts, serve))
	})
	return cmd, serve
}

func runServe(opts *globalOptions, serve *serveOptions) error {
	if !serve.storage.inMemory() {
		if err := requireDataDir(serve.dataDir); err != nil {
			return err
		}
	}
	cfg, err := serve.brokerConfig(opts)
	if err != nil {
		return err
	}
	if serve.memory.printBudget {
		plan, err := planMemory(serve, &cfg)
		if err != nil {
			return err
		}
		defer plan.close()
		return printBudget(opts, plan.budget, serve.memory.ceiling)
	}
	return runBroker(cfg, serve, func(addr string) {})
}

// brokerSettings are the engine's configuration and its wire sessions'.
type brokerSettings struct {
	broker.Config
	Session session.Config
}

// brokerConfig turns flags into a broker configuration, refusing unsafe or
// inconsistent ones with a message that says what to do.
func (serve *serveOptions) brokerConfig(opts *globalOptions) (brokerSettings, error) {
	durability, err := segment.ParseDurability(serve.durability)
	if err != nil {
		return brokerSettings{}, exitErrorf(exitUsage, "--durability: %w", err)
	}
	if durability != segment.DurabilitySync && !serve.acceptRelaxed {
		return brokerSettings{}, exitErrorf(exitUsage, "--durability %s acknowledges records a power cut can lose; add --accept-relaxed-durability to accept that", serve.durability)
	}
	ioMode, err := segment.ParseIOMode(serve.ioMode)
	if err != nil {
		return brokerSettings{}, exitErrorf(exitUsage, "--io-mode: %w", err)
	}
	if serve.longPollMs < 0 || serve.maxDeliver < 0 || serve.visibility < 0 || serve.visibility > 5*time.Minute {
		return brokerSettings{}, exitErrorf(exitUsage,
			"--consume-longpoll-ms and --max-deliver must not be negative, --visibility-timeout must be within 0 to 5m (the lease cap)")
	}
	if serve.exposedPlaintext, err = checkListenAddr(serve.addr, serve.insecurePlaintext, serve.security); err != nil {
		return brokerSettings{}, err
	}
	if err := serve.storage.check(serve); err != nil {
		return brokerSettings{}, err
	}
	logger, err := serve.config.newLogger(opts)
	if err != nil {
		return brokerSettings{}, err
	}
	memory := serve.memory
	retention, err := serve.retention.brokerRetention(deadLetterRetention(serve.dlqRetention))
	if err != nil {
		return brokerSettings{}, err
	}
	cfg := brokerSettings{Config: broker.Config{
		Retention:           retention,
		RetentionCheck:      serve.retention.interval,
		DataDir:             serve.dataDir,
		MaxConnections:      serve.maxConnections,
		Visibility:          serve.visibility,
		MaxDeliver:          serve.maxDeliver,
		DeadLetterRetention: deadLetterRetention(serve.dlqRetention),
		MaxStreams:          memory.maxStreams,
		MaxGroups:           memory.maxGroups,
		MaxInFlight:         memory.maxInFlight,
		Version:             mainModuleVersion(),
		Logger:              logger,
		Storage: segment.Options{Durability: durability, AcceptRelaxedDurability: serve.acceptRelaxed,
			IOMode: ioMode, SegmentSize: serve.segmentBytes, StagingBytes: int(memory.stagingBytes), Logger: logger,
			Owner: fmt.Sprintf("ironbus serve (pid %d, addr %s)", os.Getpid(), serve.addr)},
	}, Session: session.Config{
		MaxConsumeWait:   time.Duration(serve.longPollMs) * time.Millisecond,
		MaxFrame:         uint32(memory.maxFrame),
		Window:           uint32(memory.window),
		ConnectionOutput: int(memory.connectionOutput),
	}}
	serve.storage.apply(&cfg.Config)
	return cfg, nil
}

// runBroker opens the broker, serves until a signal, then drains. ready is
// called with the bound address once the broker accepts connections.
func runBroker(cfg brokerSettings, serve *serveOptions, ready func(addr string)) error {
	logger, addr := cfg.Logger, serve.addr
	logConfig(logger, serve)
	plan, err := planMemory(serve, &cfg)
	if err != nil {
		return err
	}
	defer plan.close()
	if err := plan.enforce(serve.memory.ceiling); err != nil {
		return err
	}
	cfg.MemoryBudget, cfg.MemoryCeiling = plan.budget.Total(), serve.memory.ceiling
	endpoints, err := startHealth(serve.health, logger)
	if err != nil {
		return err
	}
	defer endpoints.close()
	secured, err := openSecurity(serve.security, logger)
	if err != nil {
		return err
	}
	defer secured.close()
	loopConfig := plan.loopConfig(logger)
	secured.apply(&cfg.Session, &loopConfig)
	b, err := broker.Open(cfg.Config)
	if err != nil {
		return brokerOpenError(cfg.DataDir, err)
	}
	handler, err := session.NewHandler(b, cfg.Session)
	if err != nil {
		_ = b.Close()
		return exitErrorf(exitUsage, "%w", err)
	}
	server, choice, err := loop.New(serve.loop, loopConfig, handler)
	if err != nil {
		_ = b.Close()
		if errors.Is(err, loop.ErrUnsupported) {
			return exitErrorf(exitUsage, "--loop %s: %w; use --loop auto to take the best backend this system runs", serve.loop, err)
		}
		return exitErrorf(exitUsage, "--loop: %w", err)
	}
	bound, err := server.Listen(addr)
	if err != nil {
		_ = b.Close()
		return exitErrorf(exitUsage, "listening on %s: %w (is another broker or program using the port? pick another with --addr)", addr, err)
	}
	stopProfiles, err := startProfiles(serve.profileOut, logger)
	if err != nil {
		_ = b.Close()
		return err
	}
	defer stopProfiles()
	defer watchReloads(serve, &runningBroker{broker: b, logger: logger, level: serve.config.level, security: secured})()
	endpoints.attach(b, server, bound.String(), loopConfig.TLS != nil)
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(signals)
	started := time.Now()
	served := make(chan error, 1)
	go func() { served <- server.Serve() }()
	logger.Info("serving", "version", cfg.Version, "data_dir", cfg.DataDir, "addr", bound.String(),
		"backend", choice.Backend, "backend_reason", choice.Reason,
		"ram_budget", arena.FormatBytes(plan.budget.Total()), "ram_ceiling", ceilingText(serve.memory.ceiling), "durability", cfg.Storage.Durability.String(), "io_mode", b.Dir().IOMode().String())
	secured.logStart(bound.String(), serve.exposedPlaintext, serve.loop, choice)
	secured.start(serve.security.reloadInterval)
	ready(bound.String())
	select {
	case sig := <-signals:
		logger.Info("draining", "signal", sig.String())
	case err := <-served:
		_ = b.Close()
		return exitErrorf(exitInternal, "serving stopped: %w", err)
	}
	go func() {
		sig := <-signals
		logger.Warn("second signal: exiting now; recovery will truncate anything torn", "signal", sig.String())
		os.Exit(1)
	}()
	return drain(b, server, logger, started)
}

// drain stops accepting, lets every connection finish what it read, then
// closes the broker (a final sync of every log).
func drain(b *broker.Broker, server loop.Server, logger *slog.Logger, started time.Time) error {
	b.Drain()
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	if err := server.Shutdown(ctx); err != nil {
		logger.Warn("connections still busy after the drain timeout; closing them", "timeout", drainTimeout.String())
		server.CloseAll()
	}
	if err := b.Close(); err != nil {
		return exitErrorf(exitInternal, "closing the data directory: %w", err)
	}
	stats := b.Dir().Stats()
	logger.Info("stopped cleanly", "reactor_busy", busyShares(server.Busy(), time.Since(started)),
		"syncs", stats.Syncs, "sync_cycles", stats.Cycles)
	return nil
}

func brokerOpenError(dataDir string, err error) error {
	switch {
	case errors.Is(err, segment.ErrLocked):
		return exitErrorf(exitLocked, "%s is in use: %w; stop that broker first", dataDir, err)
	case errors.Is(err, broker.ErrInvalidRetention):
		return exitErrorf(exitUsage, "%w", err)
	case errors.Is(err, segment.ErrTooNew), errors.Is(err, segment.ErrInconsistent):
		return exitErrorf(exitUnreadable, "%w", err)
	}
	return exitErrorf(exitInternal, "opening %s: %w", dataDir, err)
}

// busyShares renders each reactor's busy time as a share of the uptime,
// "12.5%,3.1%" ("none" for the std backend).
func busyShares(busy []time.Duration, uptime time.Duration) string {
	if len(busy) == 0 || uptime <= 0 {
		return "none"
	}
	shares := make([]string, len(busy))
	for i, d := range busy {
		shares[i] = fmt.Sprintf("%.1f%%", 100*float64(d)/float64(uptime))
	}
	return strings.Join(shares, ",")
}

// startProfiles starts a CPU profile into dir (when set) and returns what
// stops it and writes the heap profile beside it.
func startProfiles(dir string, logger *slog.Logger) (stop func(), err error) {
	if dir == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, exitErrorf(exitUsage, "--profile-out: %w", err)
	}
	cpu, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err != nil {
		return nil, exitErrorf(exitUsage, "--profile-out: %w", err)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		_ = cpu.Close()
		return nil, exitErrorf(exitInternal, "--profile-out: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = cpu.Close()
		heap, err := os.Create(filepath.Join(dir, "heap.pprof"))
		if err == nil {
			err = errors.Join(pprof.WriteHeapProfile(heap), heap.Close())
		}
		if err != nil {
			logger.Warn("heap profile not written", "error", err.Error())
		}
	}, nil
}

// deadLetterRetention maps the flag's "0 keeps forever" to the broker's
// negative value (its zero means the default).
func deadLetterRetention(flag time.Duration) time.Duration {
	if flag == 0 {
		return -1
	}
	return flag
}
