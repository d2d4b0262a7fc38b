package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/broker"
)

// retentionOptions are serve's retention and disk-budget knobs
// (docs/RETENTION.md). They set the default of every stream.
type retentionOptions struct {
	bytes          int64
	age            time.Duration
	records        uint64
	policy         string
	groupExpiry    time.Duration
	dlqBytes       int64
	diskBudget     int64
	diskHeadroom   int64
	diskFullPolicy string
	interval       time.Duration
}

func addRetentionFlags(cmd *cobra.Command, retention *retentionOptions) {
	retention.policy, retention.diskFullPolicy = broker.ConsumerSafe.String(), broker.DropNew.String()
	retention.interval = broker.DefaultRetentionCheck
	flags := cmd.Flags()
	flags.Var(sizeValue{&retention.bytes}, "retention-bytes", "keep at most this many bytes per stream, deleting whole old segments (0: unbounded)")
	flags.DurationVar(&retention.age, "retention-age", 0, "delete whole segments whose records are all older than this, by the monotonic-safe rule (0: unbounded)")
	flags.Uint64Var(&retention.records, "retention-records", 0, "keep at most this many records per stream, deleting whole old segments (0: unbounded)")
	flags.StringVar(&retention.policy, "retention-policy", retention.policy,
		"when a bound reaches records a consumer group has not committed: consumer-safe (keep them, warn) or drop-oldest (delete, the group gets a gap advisory)")
	flags.DurationVar(&retention.groupExpiry, "group-expiry", 0, "a consumer group inactive this long stops holding back retention; warned at half of it (0: never)")
	flags.Var(sizeValue{&retention.dlqBytes}, "dlq-retention-bytes", "keep at most this many bytes per dead-letter queue (0: unbounded)")
	flags.Var(sizeValue{&retention.diskBudget}, "disk-budget", "total bytes the data directory may hold: logs, dead letters, checkpoints, quarantine (0: no budget)")
	flags.Var(sizeValue{&retention.diskHeadroom}, "disk-headroom", "part of --disk-budget kept free for checkpoints and recovery (default 5% of it, at least two segments)")
	flags.StringVar(&retention.diskFullPolicy, "disk-full-policy", retention.diskFullPolicy,
		"at the disk budget: drop-new (refuse new records with a retryable no-space error) or drop-oldest (delete the oldest whole segments)")
	flags.DurationVar(&retention.interval, "retention-interval", retention.interval, "how often retention runs (it also runs after every segment seal)")
}

// brokerRetention turns the flags into the broker's retention
// configuration; the broker checks the budget against the segment size.
// Empty policies (commands such as dev that build serve's options without
// its flags) take the defaults.
// dlqAge is --dlq-retention as the broker takes it (negative: forever), so
// the whole retention configuration, as a reload would swap it, is here.
func (retention *retentionOptions) brokerRetention(dlqAge time.Duration) (broker.RetentionConfig, error) {
	if retention.policy == "" {
		retention.policy = broker.ConsumerSafe.String()
	}
	if retention.diskFullPolicy == "" {
		retention.diskFullPolicy = broker.DropNew.String()
	}
	policy, err := broker.ParsePinPolicy(retention.policy)
	if err != nil {
		return broker.RetentionConfig{}, exitErrorf(exitUsage, "--retention-policy: %w", err)
	}
	full, err := broker.ParseDiskFullPolicy(retention.diskFullPolicy)
	if err != nil {
		return broker.RetentionConfig{}, exitErrorf(exitUsage, "--disk-full-policy: %w", err)
	}
	if retention.age < 0 || retention.groupExpiry < 0 || retention.interval < 0 {
		return broker.RetentionConfig{}, exitErrorf(exitUsage, "--retention-age, --group-expiry and --retention-interval must not be negative")
	}
	if retention.diskHeadroom > 0 && retention.diskBudget == 0 {
		return broker.RetentionConfig{}, exitErrorf(exitUsage, "--disk-headroom needs --disk-budget: the headroom is a part of the budget")
	}
	return broker.RetentionConfig{
		Stream: broker.StreamRetention{MaxBytes: retention.bytes, MaxAge: retention.age, MaxRecords: retention.records,
			Policy: policy},
		DeadLetters:  broker.StreamRetention{MaxBytes: retention.dlqBytes, MaxAge: max(dlqAge, 0)},
		GroupExpiry:  retention.groupExpiry,
		DiskBudget:   retention.diskBudget,
		DiskHeadroom: retention.diskHeadroom,
		DiskFull:     full,
	}, nil
}
