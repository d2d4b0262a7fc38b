package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/server"
)

// defaultHealthAddr is where serve answers /healthz, /readyz, /metrics
// and /admin, and where report, server and top look for them.
const defaultHealthAddr = server.DefaultHealthAddr

func addHealthFlags(cmd *cobra.Command, cfg *server.Config) {
	cmd.Flags().StringVar(&cfg.HealthAddr, "health-addr", cfg.HealthAddr,
		"serve /healthz, /readyz, /metrics and /admin on this host:port: loopback, or any with --health-token-file (port 0 picks one; off disables)")
	cmd.Flags().StringVar(&cfg.HealthTokenFile, "health-token-file", "",
		"bearer token file (mode 0600) every health request must carry; required for a non-loopback --health-addr")
	cmd.Flags().Var(hostsValue{&cfg.HealthHosts}, "health-hosts",
		"host names the health endpoints answer besides loopback ones, comma-separated (any other Host header is refused)")
}

// hostsValue is a comma-separated list of host names as one flag value,
// so a config file key and an environment variable set it the same way.
type hostsValue struct{ hosts *[]string }

func (v hostsValue) String() string {
	if v.hosts == nil {
		return ""
	}
	return strings.Join(*v.hosts, ",")
}

func (v hostsValue) Set(text string) error {
	*v.hosts = nil
	for _, host := range strings.Split(text, ",") {
		if host = strings.TrimSpace(host); host != "" {
			*v.hosts = append(*v.hosts, host)
		}
	}
	return nil
}

func (hostsValue) Type() string { return "hosts" }
