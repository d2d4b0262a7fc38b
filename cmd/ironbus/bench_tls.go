package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/security"
)

// addBenchTLSFlags lets bench measure TLS: its started broker serves TLS
// with a throwaway certificate, and a live one (--addr) is reached with
// the shared --tls-* and credential flags.
func addBenchTLSFlags(cmd *cobra.Command, bench *benchOptions) {
	cmd.Flags().BoolVar(&bench.tls, "tls", false,
		"started broker: serve TLS 1.3 with a throwaway self-signed certificate made in a temporary directory (the load verifies it)")
	markClientVerb(cmd)
}

// prepareTLS makes the throwaway CA and server certificate for the
// started broker and returns serve's TLS flags.
func (t *benchTarget) prepareTLS(plan *benchPlan) ([]string, error) {
	dir, err := os.MkdirTemp("", "ironbus-bench-tls-")
	if err != nil {
		return nil, exitErrorf(exitUnreadable, "bench: temporary TLS directory: %w", err)
	}
	t.tlsDir = dir
	caFile, certFile, keyFile, err := security.LocalhostPair(dir)
	if err != nil {
		return nil, exitErrorf(exitInternal, "bench: %w", err)
	}
	config, err := security.ClientTLSConfig(security.ClientTLSOptions{CAFile: caFile, ServerName: "localhost"})
	if err != nil {
		return nil, exitErrorf(exitInternal, "bench: %w", err)
	}
	plan.connect.TLS = config
	return []string{"--tls-cert", certFile, "--tls-key", keyFile}, nil
}

// benchClientOptions are the load's connection options: TLS and
// credentials as prepared, with this connection's name and window.
func (plan *benchPlan) clientOptions(window int) client.Options {
	options := plan.connect
	options.ClientName, options.Window = "ironbus-bench", window
	options.Compression = plan.payloads.compression
	return options
}

// benchLiveConnect applies --tls-* and the credential flags for --addr.
func benchLiveConnect(opts *globalOptions, plan *benchPlan) error {
	if plan.tls {
		return exitErrorf(exitUsage, "--tls makes the started broker serve TLS; for a live broker (--addr) give --tls-ca instead")
	}
	if err := opts.connect.apply(&plan.connect); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}
