package server

import (
	"fmt"
	"github.com/ironbus/ironbus/security"
	"log/slog"
	"os"
	"time"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
	"github.com/ironbus/ironbus/session"
)

// This file is the one place that maps a Config onto the engine's, the
// wire sessions' and the network's configuration: mapConfig for what comes
// from settings, attachRuntime for what New builds (pools, TLS, auth).
// Nothing else in the package writes a broker.Config, session.Config or
// loop.Config field, except the memory plan handing out its pools.

// memoryDataDir is the data directory inside the in-memory file system:
// any name works, this one reads well in logs.
const memoryDataDir = "/memory"

// parts are what a Config maps onto: the engine's configuration and the
// wire protocol adapter's.
type parts struct {
	engine  broker.Config
	session session.Config
}

// mapConfig maps a validated Config onto the engine's and the wire
// sessions' configuration.
func mapConfig(cfg Config, logger *slog.Logger) (parts, error) {
	durability, err := segment.ParseDurability(cfg.Durability)
	if err != nil {
		return parts{}, invalid("--durability: %w", err)
	}
	ioMode, err := segment.ParseIOMode(cfg.IOMode)
	if err != nil {
		return parts{}, invalid("--io-mode: %w", err)
	}
	retention, err := retentionConfig(cfg)
	if err != nil {
		return parts{}, err
	}
	owner := cfg.Owner
	if owner == "" {
		owner = "ironbus server"
	}
	engine := broker.Config{
		DataDir: cfg.DataDir,
		// A cluster member creates streams only through the metadata
		// group (stream create --replicas): a publish to an unknown name
		// must not make a stream of this node alone.
		DisableAutoCreateStreams: !cfg.AutoCreateStreams || cfg.NodeID != 0,
		Retention:                retention,
		RetentionCheck:           cfg.RetentionInterval,
		MaxConnections:           cfg.MaxConnections,
		Visibility:               cfg.VisibilityTimeout,
		MaxDeliver:               cfg.MaxDeliver,
		DeadLetterRetention:      deadLetterRetention(cfg.DLQRetention),
		CheckpointInterval:       cfg.CheckpointInterval,
		NoAckShedPerSecond:       cfg.NoAckShedBudget,
		Transactions:             broker.TransactionConfig{MaxOpen: cfg.MaxOpenTxns},
		DedupMaxIDs:              cfg.DedupMaxIDs,
		MaxStreams:               cfg.MaxStreams,
		MaxGroups:                cfg.MaxGroups,
		MaxInFlight:              cfg.MaxInFlight,
		MaxBatchRecords:          cfg.MaxBatchRecords,
		MaxBatchBytes:            int(cfg.MaxBatchBytes),
		Version:                  cfg.Version,
		RoutingDomain:            security.RoutingDomain,
		Logger:                   logger,
		Storage: segment.Options{Durability: durability, AcceptRelaxedDurability: cfg.AcceptRelaxedDurability, CommitLinger: cfg.CommitLinger,
			IOMode: ioMode, SegmentSize: cfg.SegmentBytes, StagingBytes: int(cfg.StagingBytes), Logger: logger,
			Owner: fmt.Sprintf("%s (pid %d, addr %s)", owner, os.Getpid(), cfg.Addr)},
	}
	if cfg.Storage == StorageMemory {
		engine.FS, engine.DataDir = vfs.NewVolatileFS(cfg.MemoryStorageCap), memoryDataDir
	}
	if cfg.NodeID != 0 {
		engine.Producers.IDOf = clusterProducerID
	}
	wire := session.Config{
		MaxFrame:         uint32(cfg.MaxFrame),
		Window:           uint32(cfg.Window),
		MaxConsumeWait:   cfg.ConsumeLongPoll,
		ConnectionOutput: int(cfg.ConnectionOutput),
		Logger:           logger,
	}
	return parts{engine: engine, session: wire}, nil
}

// retentionConfig is the retention part of the engine's configuration,
// the part Reload swaps as one.
func retentionConfig(cfg Config) (broker.RetentionConfig, error) {
	policy, err := broker.ParsePinPolicy(cfg.RetentionPolicy)
	if err != nil {
		return broker.RetentionConfig{}, invalid("--retention-policy: %w", err)
	}
	full, err := broker.ParseDiskFullPolicy(cfg.DiskFullPolicy)
	if err != nil {
		return broker.RetentionConfig{}, invalid("--disk-full-policy: %w", err)
	}
	return broker.RetentionConfig{
		Stream: broker.StreamRetention{MaxBytes: cfg.RetentionBytes, MaxAge: cfg.RetentionAge, MaxRecords: cfg.RetentionRecords,
			Policy: policy},
		DeadLetters:  broker.StreamRetention{MaxBytes: cfg.DLQRetentionBytes, MaxAge: max(deadLetterRetention(cfg.DLQRetention), 0)},
		GroupExpiry:  cfg.GroupExpiry,
		DiskBudget:   cfg.DiskBudget,
		DiskHeadroom: cfg.DiskHeadroom,
		DiskFull:     full,
	}, nil
}

// deadLetterRetention maps the setting's "0 keeps forever" to the
// engine's negative value (its zero means the default).
func deadLetterRetention(setting time.Duration) time.Duration {
	if setting == 0 {
		return -1
	}
	return setting
}

// attachRuntime hands the engine, the sessions and the network what New
// built: the budget's totals, the security parts, and the pools of the
// plan.
func attachRuntime(mapped *parts, plan *memoryPlan, secured *securityRuntime, ceiling int64, logger *slog.Logger) loop.Config {
	mapped.engine.MemoryBudget, mapped.engine.MemoryCeiling = plan.budget.Total(), ceiling
	mapped.session.Auth, mapped.session.Gate, mapped.session.Audit = secured.auth, secured.gate, secured.audit
	mapped.engine.Collectors = append(mapped.engine.Collectors, secured.collectors()...)
	network := plan.loopConfig(logger)
	if secured.tls != nil {
		network.TLS = secured.tls.Config()
	}
	return network
}
