package server

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
)

// reloadableKeys are the settings Reload applies to a running server; any
// other needs a restart.
var reloadableKeys = []string{"log_level",
	"retention_bytes", "retention_age", "retention_records", "retention_policy", "group_expiry",
	"dlq_retention", "dlq_retention_bytes", "disk_budget", "disk_headroom", "disk_full_policy"}

// Reloadable reports whether Reload applies the setting of this TOML key
// ("log_level") while the server runs.
func Reloadable(key string) bool { return slices.Contains(reloadableKeys, key) }

// Reload applies next's reloadable settings (Reloadable) to the running
// server: the log level, and the retention bounds and disk budget, which
// the engine swaps as one. Every other setting of next is ignored: it
// takes a restart. A next that does not validate, or whose retention the
// engine refuses, changes nothing.
func (s *Server) Reload(next Config) error {
	if err := next.Validate(); err != nil {
		return err
	}
	retention, err := retentionConfig(next)
	if err != nil {
		return err
	}
	level, err := parseLogLevel(next.LogLevel)
	if err != nil {
		return invalid("--log-level: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.state == stateStopped {
		return fmt.Errorf("%w: Reload on a stopped server", ErrState)
	}
	running := s.mu.cfg
	if current, _ := retentionConfig(running); current != retention {
		if err := s.engine.SetRetention(retention); err != nil {
			return invalid("%w", err)
		}
	}
	s.level.Set(level)
	running.LogLevel = next.LogLevel
	running.RetentionBytes, running.RetentionAge, running.RetentionRecords = next.RetentionBytes, next.RetentionAge, next.RetentionRecords
	running.RetentionPolicy, running.GroupExpiry = next.RetentionPolicy, next.GroupExpiry
	running.DLQRetention, running.DLQRetentionBytes = next.DLQRetention, next.DLQRetentionBytes
	running.DiskBudget, running.DiskHeadroom, running.DiskFullPolicy = next.DiskBudget, next.DiskHeadroom, next.DiskFullPolicy
	s.mu.cfg = running
	return nil
}

// ReloadSecrets re-reads the TLS certificate and key and the auth config
// now (they are also re-read when they change, every
// SecurityReloadInterval). A file that does not load leaves its running
// version in force, and is the error.
func (s *Server) ReloadSecrets() error {
	if err := s.secured.reload(); err != nil {
		return fmt.Errorf("%w: %w", ErrSecurityFile, err)
	}
	return nil
}

// newLogger builds the server's logger with a level Reload can change.
func newLogger(cfg Config) (*slog.Logger, *slog.LevelVar) {
	level := new(slog.LevelVar)
	parsed, _ := parseLogLevel(cfg.LogLevel) // validated
	level.Set(parsed)
	output := cfg.LogOutput
	if output == nil {
		output = io.Discard
	}
	options := &slog.HandlerOptions{Level: level}
	if cfg.LogJSON {
		return slog.New(slog.NewJSONHandler(output, options)), level
	}
	return slog.New(slog.NewTextHandler(output, options)), level
}

// parseLogLevel reads debug, info, warn or error.
func parseLogLevel(text string) (slog.Level, error) {
	switch strings.ToLower(text) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("level %q: want debug, info, warn or error", text)
}
