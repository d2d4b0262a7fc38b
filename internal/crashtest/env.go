package crashtest

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// Seed is the seed of a randomized run: IRONBUS_SEED when set (to replay a
// failure), else one taken from the clock. Callers log it.
func Seed(t testing.TB) uint64 {
	t.Helper()
	if text := os.Getenv("IRONBUS_SEED"); text != "" {
		seed, err := strconv.ParseUint(text, 10, 64)
		if err != nil {
			t.Fatalf("IRONBUS_SEED=%q: want an unsigned integer", text)
		}
		return seed
	}
	return uint64(time.Now().UnixNano())
}

// Replaying reports whether IRONBUS_SEED names one run to replay.
func Replaying() bool { return os.Getenv("IRONBUS_SEED") != "" }

// Count is the positive integer in the environment variable name (the
// number of kills, cuts or seeds of a run), else fallback.
func Count(t testing.TB, name string, fallback int) int {
	t.Helper()
	text := os.Getenv(name)
	if text == "" {
		return fallback
	}
	count, err := strconv.Atoi(text)
	if err != nil || count < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, text)
	}
	return count
}

// BackendRerun reports whether this is one of the per-backend reruns of
// `make test` (IRONBUS_TEST_LOOP set), which run fewer rounds: there the
// network backend is the subject, not the disk.
func BackendRerun() bool { return os.Getenv("IRONBUS_TEST_LOOP") != "" }
