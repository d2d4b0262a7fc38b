package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/session"
)

// serveSecurityOptions are serve's TLS, auth, pre-auth limit and audit
// flags (docs/SECURITY.md).
type serveSecurityOptions struct {
	tlsCert, tlsKey, tlsClientCA string
	authConfig                   string
	auditLog                     string
	auditMaxBytes                int64
	reloadInterval               time.Duration
	gate                         security.GateOptions
}

func addSecurityFlags(cmd *cobra.Command, o *serveSecurityOptions) {
	o.auditMaxBytes = 16 << 20
	flags := cmd.Flags()
	flags.StringVar(&o.tlsCert, "tls-cert", "", "serve TLS 1.3 with this certificate chain (PEM); with --tls-key")
	flags.StringVar(&o.tlsKey, "tls-key", "", "private key of --tls-cert (PEM, mode 0600)")
	flags.StringVar(&o.tlsClientCA, "tls-client-ca", "", "require client certificates signed by these CAs (mTLS; PEM)")
	flags.StringVar(&o.authConfig, "auth-config", "", "identities and scopes (TOML, mode 0600; edit with `ironbus auth`)")
	flags.StringVar(&o.auditLog, "audit-log", "", "append auth outcomes and admin actions to this JSON-lines file")
	flags.Var(sizeValue{&o.auditMaxBytes}, "audit-max-bytes", "rotate the audit log at this size (keeps 3 old files)")
	flags.DurationVar(&o.reloadInterval, "security-reload-interval", security.DefaultReloadInterval,
		"how often TLS and auth files are checked for changes (they also reload on SIGHUP)")
	flags.IntVar(&o.gate.MaxHalfOpen, "max-half-open", security.DefaultMaxHalfOpen, "connections accepted but not yet through Hello, at most")
	flags.Float64Var(&o.gate.ConnectionsPerSecond, "connection-rate", security.DefaultConnectionsPerSecond, "new connections per second per source IP (burst twice that)")
	flags.IntVar(&o.gate.LockoutAfter, "auth-lockout-after", security.DefaultLockoutAfter, "failed authentications from one source before it is locked out (1 s, doubling to 5 min)")
	flags.DurationVar(&o.gate.FailureDelay, "auth-failure-delay", security.DefaultFailureDelay, "wait before answering a failed authentication")
}

// checkListenAddr refuses a non-loopback address unless the wire is
// protected: TLS plus authentication, or authentication over plaintext
// with the explicit opt-in. It returns whether the bind is exposed
// plaintext (warned about at every start).
func checkListenAddr(addr string, insecurePlaintext bool, o serveSecurityOptions) (exposedPlaintext bool, err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, exitErrorf(exitUsage, "--addr %q: %w (want host:port, for example 127.0.0.1:7777)", addr, err)
	}
	if host == "localhost" {
		return false, nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return false, nil
	}
	tls, auth := o.tlsCert != "", o.authConfig != ""
	switch {
	case tls && auth:
		return false, nil
	case auth && insecurePlaintext:
		return true, nil
	case tls:
		return false, exitErrorf(exitUsage, "--addr %s is not a loopback address: TLS alone lets anyone who reaches it read and write every stream; "+
			"add --auth-config FILE (see `ironbus auth add`)", addr)
	case insecurePlaintext:
		return false, exitErrorf(exitUsage, "--addr %s with --insecure-plaintext-wire still needs --auth-config FILE: "+
			"without authentication anyone who reaches it can read and write every stream", addr)
	}
	return false, exitErrorf(exitUsage, "--addr %s is not a loopback address: without TLS and authentication anyone who reaches it can read and write every stream; "+
		"bind 127.0.0.1, or add --tls-cert, --tls-key and --auth-config, or (trusted network only) --auth-config with --insecure-plaintext-wire", addr)
}

// securityRuntime holds what serve built from the security flags.
type securityRuntime struct {
	tls    *security.ServerTLS
	auth   *security.Authorizer
	gate   *security.Gate
	audit  *security.AuditLog
	logger *slog.Logger
	stop   context.CancelFunc
}

// openSecurity loads the TLS files and the auth config and opens the
// audit log; any failure stops serve before it listens.
func openSecurity(o serveSecurityOptions, logger *slog.Logger) (*securityRuntime, error) {
	gate := o.gate
	// The burst is twice the rate, as --connection-rate says, so a profile
	// that lowers the rate lowers the burst with it.
	gate.ConnectionBurst = 2 * gate.ConnectionsPerSecond
	r := &securityRuntime{logger: logger, gate: security.NewGate(gate), stop: func() {}}
	var err error
	if o.tlsCert != "" || o.tlsKey != "" || o.tlsClientCA != "" {
		if r.tls, err = security.NewServerTLS(security.ServerTLSOptions{CertFile: o.tlsCert, KeyFile: o.tlsKey,
			ClientCAFile: o.tlsClientCA, Logger: logger}); err != nil {
			return nil, exitErrorf(exitUsage, "%w", err)
		}
	}
	if o.authConfig != "" {
		if r.auth, err = security.NewAuthorizer(o.authConfig, logger); err != nil {
			return nil, exitErrorf(exitUsage, "--auth-config: %w", err)
		}
	}
	if o.auditLog != "" {
		if r.audit, err = security.OpenAudit(security.AuditOptions{Path: o.auditLog, MaxBytes: o.auditMaxBytes}); err != nil {
			return nil, exitErrorf(exitUsage, "--audit-log: %w", err)
		}
	}
	return r, nil
}

// apply hands the security parts to the broker and the loop.
func (r *securityRuntime) apply(cfg *session.Config, loopConfig *loop.Config) {
	cfg.Auth, cfg.Gate, cfg.Audit = r.auth, r.gate, r.audit
	if r.tls != nil {
		loopConfig.TLS = r.tls.Config()
	}
}

// configured reports whether there is anything to re-read.
func (r *securityRuntime) configured() bool {
	return r != nil && (r.tls != nil || r.auth != nil)
}

// start watches the files until close (SIGHUP re-reads them too, through
// the config reload: reload.go).
func (r *securityRuntime) start(interval time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	if r.tls != nil {
		go r.tls.Watch(ctx, interval)
	}
	if r.auth != nil {
		go r.auth.Watch(ctx, interval)
	}
}

// Reload re-reads the TLS files and the auth config; each keeps its
// previous version when its files do not load. This is the hook a
// SIGHUP handler (or an admin endpoint) calls.
func (r *securityRuntime) Reload() error {
	var errs []error
	if r.tls != nil {
		errs = append(errs, r.tls.Reload())
	}
	if r.auth != nil {
		errs = append(errs, r.auth.Reload())
	}
	return errors.Join(errs...)
}

// logStart says how the wire is protected, loudly when it is not.
func (r *securityRuntime) logStart(addr string, exposedPlaintext bool, asked string, choice loop.Choice) {
	mtls := r.tls != nil && r.tls.MutualTLS()
	auth := "none (every peer is trusted)"
	if r.auth != nil {
		auth = r.auth.Describe()
	}
	r.logger.Info("security", "tls", r.tls != nil, "mtls", mtls, "auth", auth, "audit", r.audit != nil)
	if r.tls != nil && asked != loop.BackendStd {
		r.logger.Info("the TLS listener is served by the std backend", "asked", asked, "reason", choice.Reason)
	}
	if exposedPlaintext {
		r.logger.Warn("!!! INSECURE: serving PLAINTEXT on a non-loopback address: tokens, passwords and every record cross the network readable and forgeable by anyone on the path; use --tls-cert and --tls-key !!!",
			"addr", addr)
	}
}

func (r *securityRuntime) close() {
	r.stop()
	if err := r.audit.Close(); err != nil {
		r.logger.Warn("audit log did not close cleanly", "error", err.Error())
	}
}

// registerSecurityMemory adds what TLS and password checks hold to the
// RAM budget: crypto/tls record buffers per connection, and one Argon2id
// verification (the broker runs one at a time) at the file's largest
// memory parameter (unknown users are hashed with the same parameters).
func registerSecurityMemory(budget *arena.Budget, o serveSecurityOptions, maxConnections int) error {
	if o.tlsCert != "" {
		budget.Register("TLS record buffers", "--max-connections × 40 KiB (crypto/tls)", int64(maxConnections)*security.TLSConnectionMemory)
	}
	if o.authConfig == "" {
		return nil
	}
	file, err := security.LoadAuthFile(o.authConfig)
	if err != nil {
		return exitErrorf(exitUsage, "--auth-config: %w", err)
	}
	if hashing := security.PasswordMemory(file); hashing > 0 {
		budget.Register("password verification", "one Argon2id hash at a time (the largest m in --auth-config)", hashing)
	}
	return nil
}
