package main

import (
	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/server"
)

// defaultHealthAddr is where serve answers /healthz, /readyz, /metrics
// and /admin, and where report, server and top look for them.
const defaultHealthAddr = server.DefaultHealthAddr

func addHealthFlags(cmd *cobra.Command, cfg *server.Config) {
	cmd.Flags().StringVar(&cfg.HealthAddr, "health-addr", cfg.HealthAddr,
		"serve /healthz, /readyz, /metrics and /admin on this loopback host:port (port 0 picks one; off disables)")
}
