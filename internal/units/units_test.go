package units

import (
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	for text, want := range map[string]int64{"64MiB": 64 << 20, "8 MiB": 8 << 20, "4096": 4096, "1GiB": 1 << 30, "10B": 10, "3KiB": 3072} {
		got, err := ParseSize(text)
		if err != nil || got != want {
			t.Fatalf("ParseSize(%q) = %d, %v; want %d", text, got, err, want)
		}
	}
	for _, bad := range []string{"", "MiB", "-1", "1.5MiB", "64MB", "9999999999TiB"} {
		if _, err := ParseSize(bad); err == nil {
			t.Fatalf("ParseSize(%q) accepted", bad)
		}
	}
}

func TestFormatSizeReadsBack(t *testing.T) {
	for _, bytes := range []int64{1, 1023, 1024, 3 << 20, 64 << 20, 5 << 40, 1 << 62} {
		text := FormatSize(bytes)
		if back, err := ParseSize(text); err != nil || back != bytes {
			t.Fatalf("FormatSize(%d) = %q reads back as %d, %v", bytes, text, back, err)
		}
	}
	if got := FormatSize(64 << 20); got != "64MiB" {
		t.Fatalf("FormatSize: %s", got)
	}
	if got := FormatSize(0); got != "0B" {
		t.Fatalf("FormatSize(0): %s", got)
	}
}

func TestParseAge(t *testing.T) {
	for text, want := range map[string]time.Duration{"": 0, "90m": 90 * time.Minute, "72h": 72 * time.Hour, "7d": 7 * 24 * time.Hour, "0d": 0} {
		if got, err := ParseAge(text); err != nil || got != want {
			t.Fatalf("ParseAge(%q) = %v, %v; want %v", text, got, err, want)
		}
	}
	for _, bad := range []string{"-1h", "soon", "1.5d", "99999999d", "d"} {
		if _, err := ParseAge(bad); err == nil {
			t.Fatalf("ParseAge(%q) accepted", bad)
		}
	}
}
