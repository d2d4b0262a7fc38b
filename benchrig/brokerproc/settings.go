package brokerproc

import (
	"strconv"
	"time"
)

// Settings are the serve settings of a benchmark's broker.
type Settings struct {
	Durability string // sync, interval or none; the latter two accepted as the run's choice
	// Connections is what the load opens; the broker allows a few more
	// for probes and the health check.
	Connections int
	Profile     string // configuration profile; "" is serve's default
	// Loop and IOMode are the network backend and the I/O mode; "" leaves
	// them to the profile.
	Loop, IOMode string
	CommitLinger time.Duration // 0: every commit syncs at once
	ProfileOut   string        // directory for CPU and heap profiles; "": none
}

// spareConnections is the headroom above the load's own connections.
const spareConnections = 16

// Args are the serve flags of s, for Options.Args.
func (s Settings) Args() []string {
	args := []string{"--durability", s.Durability, "--max-connections", strconv.Itoa(s.Connections + spareConnections)}
	for _, knob := range []struct{ flag, value string }{{"loop", s.Loop}, {"io-mode", s.IOMode}} {
		if knob.value != "" {
			args = append(args, "--"+knob.flag, knob.value)
		}
	}
	if s.Profile != "" {
		args = append(args, "--profile", s.Profile)
	}
	if s.Durability != "sync" {
		args = append(args, "--accept-relaxed-durability")
	}
	if s.CommitLinger != 0 {
		args = append(args, "--commit-linger", s.CommitLinger.String())
	}
	if s.ProfileOut != "" {
		args = append(args, "--profile-out", s.ProfileOut)
	}
	return args
}
