package server

import (
	"errors"
	"log/slog"
	"testing"
)

// TestAtomicBatchLimitsReachTheEngine: the atomic batch limits pass to
// the engine as set, and a byte limit above what one staging buffer holds
// is refused before anything starts.
func TestAtomicBatchLimitsReachTheEngine(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.StagingBytes, cfg.MaxBatchRecords, cfg.MaxBatchBytes = 256<<10, 50, 256<<10
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	mapped, err := mapConfig(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if mapped.engine.MaxBatchRecords != 50 || mapped.engine.MaxBatchBytes != 256<<10 {
		t.Fatalf("engine limits: %d records, %d bytes", mapped.engine.MaxBatchRecords, mapped.engine.MaxBatchBytes)
	}
	cfg.MaxBatchBytes++
	if err := cfg.Validate(); !errors.Is(err, ErrInvalidSetting) {
		t.Fatalf("max_batch_bytes above staging_bytes: %v, want ErrInvalidSetting", err)
	}
	cfg.MaxBatchBytes, cfg.SegmentBytes = 128<<10, 64<<10
	if err := cfg.Validate(); !errors.Is(err, ErrInvalidSetting) {
		t.Fatalf("max_batch_bytes above a segment's room: %v, want ErrInvalidSetting", err)
	}
}
