package main

import (
	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/server"
)

// addSecurityFlags adds serve's TLS, auth, pre-auth limit and audit flags
// (docs/SECURITY.md).
func addSecurityFlags(cmd *cobra.Command, cfg *server.Config) {
	flags := cmd.Flags()
	flags.StringVar(&cfg.TLSCert, "tls-cert", "", "serve TLS 1.3 with this certificate chain (PEM); with --tls-key")
	flags.StringVar(&cfg.TLSKey, "tls-key", "", "private key of --tls-cert (PEM, mode 0600)")
	flags.StringVar(&cfg.TLSClientCA, "tls-client-ca", "", "require client certificates signed by these CAs (mTLS; PEM)")
	flags.StringVar(&cfg.AuthConfig, "auth-config", "", "identities and scopes (TOML, mode 0600; edit with `ironbus auth`)")
	flags.StringVar(&cfg.EncryptionKeyFile, "encryption-key-file", "",
		"seal every record body written from now on with AES-256-GCM under this key ring's active key (mode 0600; make one with `ironbus key create`)")
	flags.StringVar(&cfg.AuditLog, "audit-log", "", "append auth outcomes and admin actions to this JSON-lines file")
	flags.Var(sizeValue{&cfg.AuditMaxBytes}, "audit-max-bytes", "rotate the audit log at this size")
	flags.IntVar(&cfg.AuditKeep, "audit-keep", cfg.AuditKeep, "rotated audit log files kept (FILE.1 the newest)")
	flags.DurationVar(&cfg.SecurityReloadInterval, "security-reload-interval", cfg.SecurityReloadInterval,
		"how often TLS and auth files are checked for changes (they also reload on SIGHUP)")
	flags.IntVar(&cfg.MaxHalfOpen, "max-half-open", cfg.MaxHalfOpen, "connections accepted but not yet through Hello, at most (the oldest is closed to admit a new one)")
	flags.IntVar(&cfg.MaxHalfOpenPerSource, "max-half-open-per-source", cfg.MaxHalfOpenPerSource,
		"connections from one source IP accepted but not yet through Hello, at most (that source's oldest is closed to admit a new one)")
	flags.Float64Var(&cfg.ConnectionRate, "connection-rate", cfg.ConnectionRate, "new connections per second per source IP (burst twice that)")
	flags.IntVar(&cfg.AuthLockoutAfter, "auth-lockout-after", cfg.AuthLockoutAfter, "failed authentications of one account from one source IP before that pair is locked out (1 s, doubling to 5 min)")
	flags.DurationVar(&cfg.AuthFailureDelay, "auth-failure-delay", cfg.AuthFailureDelay, "least wait before answering a failed authentication")
}
