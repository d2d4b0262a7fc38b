package main

import (
	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/server"
)

// addRetentionFlags adds serve's retention and disk-budget knobs
// (docs/RETENTION.md). They set the default of every stream.
func addRetentionFlags(cmd *cobra.Command, cfg *server.Config) {
	flags := cmd.Flags()
	flags.Var(sizeValue{&cfg.RetentionBytes}, "retention-bytes", "keep at most this many bytes per stream, deleting whole old segments (0: unbounded)")
	flags.DurationVar(&cfg.RetentionAge, "retention-age", 0, "delete whole segments whose records are all older than this, by the monotonic-safe rule (0: unbounded)")
	flags.Uint64Var(&cfg.RetentionRecords, "retention-records", 0, "keep at most this many records per stream, deleting whole old segments (0: unbounded)")
	flags.StringVar(&cfg.RetentionPolicy, "retention-policy", cfg.RetentionPolicy,
		"when a bound reaches records a consumer group has not committed: consumer-safe (keep them, warn) or drop-oldest (delete, the group gets a gap advisory)")
	flags.DurationVar(&cfg.GroupExpiry, "group-expiry", 0, "a consumer group inactive this long stops holding back retention; warned at half of it (0: never)")
	flags.Var(sizeValue{&cfg.DLQRetentionBytes}, "dlq-retention-bytes", "keep at most this many bytes per dead-letter queue (0: unbounded)")
	flags.Var(sizeValue{&cfg.DiskBudget}, "disk-budget", "total bytes the data directory may hold: logs, dead letters, checkpoints, quarantine (0: no budget)")
	flags.Var(sizeValue{&cfg.DiskHeadroom}, "disk-headroom", "part of --disk-budget kept free for checkpoints and recovery (default 5% of it, at least two segments)")
	flags.StringVar(&cfg.DiskFullPolicy, "disk-full-policy", cfg.DiskFullPolicy,
		"at the disk budget: drop-new (refuse new records with a retryable no-space error) or drop-oldest (delete the oldest whole segments)")
	flags.DurationVar(&cfg.RetentionInterval, "retention-interval", cfg.RetentionInterval, "how often retention runs (it also runs after every segment seal)")
}
