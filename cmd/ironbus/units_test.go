package main

import "testing"

func TestParseSize(t *testing.T) {
	for text, want := range map[string]int64{"64MiB": 64 << 20, "8 MiB": 8 << 20, "4096": 4096, "1GiB": 1 << 30, "10B": 10, "3KiB": 3072} {
		got, err := parseSize(text)
		if err != nil || got != want {
			t.Fatalf("parseSize(%q) = %d, %v; want %d", text, got, err, want)
		}
	}
	for _, bad := range []string{"", "MiB", "-1", "1.5MiB", "64MB", "9999999999TiB"} {
		if _, err := parseSize(bad); err == nil {
			t.Fatalf("parseSize(%q) accepted", bad)
		}
	}
	if got := formatSize(64 << 20); got != "64MiB" {
		t.Fatalf("formatSize: %s", got)
	}
}
