package brokerproc

import (
	"slices"
	"testing"
	"time"
)

func TestSettingsArgs(t *testing.T) {
	for _, c := range []struct {
		settings Settings
		want     []string
	}{
		{Settings{Durability: "sync", Connections: 2, Loop: "auto", IOMode: "buffered"},
			[]string{"--durability", "sync", "--max-connections", "18", "--loop", "auto", "--io-mode", "buffered"}},
		{Settings{Durability: "none", Connections: 1, Profile: "edge-tiny", IOMode: "direct", ProfileOut: "/tmp/p"},
			[]string{"--durability", "none", "--max-connections", "17", "--io-mode", "direct", "--profile", "edge-tiny",
				"--accept-relaxed-durability", "--profile-out", "/tmp/p"}},
		{Settings{Durability: "sync", Connections: 4, CommitLinger: 2 * time.Millisecond},
			[]string{"--durability", "sync", "--max-connections", "20", "--commit-linger", "2ms"}},
	} {
		if got := c.settings.Args(); !slices.Equal(got, c.want) {
			t.Errorf("%+v: got %q, want %q", c.settings, got, c.want)
		}
	}
}
