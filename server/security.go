package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/security"
)

// checkSecretFiles refuses a TLS key or auth config that group or others
// may read, before anything else loads them: a key anyone on the box can
// copy protects nothing.
func checkSecretFiles(cfg Config) error {
	for _, secret := range []struct{ flag, path string }{{"--tls-key", cfg.TLSKey}, {"--auth-config", cfg.AuthConfig},
		{"--encryption-key-file", cfg.EncryptionKeyFile}} {
		if secret.path == "" {
			continue
		}
		if err := security.CheckSecretFile(secret.path); err != nil {
			return securityFileError(secret.flag, err)
		}
	}
	return nil
}

// securityFileError classifies a security file that does not load: an
// exposed secret, or anything else wrong with it.
func securityFileError(flag string, err error) error {
	if errors.Is(err, security.ErrSecretFileExposed) {
		return fmt.Errorf("%w: %s: %w", ErrExposedSecret, flag, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrSecurityFile, flag, err)
}

// securityRuntime holds what the server built from the security settings.
type securityRuntime struct {
	tls    *security.ServerTLS
	auth   *security.Authorizer
	gate   *security.Gate
	audit  *security.AuditLog
	logger *slog.Logger
	stop   context.CancelFunc
}

// openSecurity loads the TLS files and the auth config and opens the
// audit log; any failure stops the server before it listens.
func openSecurity(cfg Config, logger *slog.Logger) (*securityRuntime, error) {
	// The burst is twice the rate, as --connection-rate says, so a profile
	// that lowers the rate lowers the burst with it.
	gate := security.GateOptions{MaxHalfOpen: cfg.MaxHalfOpen, MaxHalfOpenPerSource: cfg.MaxHalfOpenPerSource,
		ConnectionsPerSecond: cfg.ConnectionRate, ConnectionBurst: 2 * cfg.ConnectionRate,
		LockoutAfter: cfg.AuthLockoutAfter, FailureDelay: cfg.AuthFailureDelay}
	r := &securityRuntime{logger: logger, gate: security.NewGate(gate), stop: func() {}}
	var err error
	if cfg.TLSCert != "" || cfg.TLSKey != "" || cfg.TLSClientCA != "" {
		if r.tls, err = security.NewServerTLS(security.ServerTLSOptions{CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey,
			ClientCAFile: cfg.TLSClientCA, Logger: logger}); err != nil {
			return nil, securityFileError("--tls-cert, --tls-key", err)
		}
	}
	if cfg.AuthConfig != "" {
		if r.auth, err = security.NewAuthorizer(cfg.AuthConfig, logger); err != nil {
			return nil, securityFileError("--auth-config", err)
		}
	}
	if cfg.AuditLog != "" {
		if r.audit, err = security.OpenAudit(security.AuditOptions{Path: cfg.AuditLog, MaxBytes: cfg.AuditMaxBytes, Keep: cfg.AuditKeep}); err != nil {
			return nil, securityFileError("--audit-log", err)
		}
	}
	return r, nil
}

// watch re-reads the files when they change, until close.
func (r *securityRuntime) watch(interval time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	if r.tls != nil {
		go r.tls.Watch(ctx, interval)
	}
	if r.auth != nil {
		go r.auth.Watch(ctx, interval)
	}
}

// reload re-reads the TLS files and the auth config; each keeps its
// previous version when its files do not load.
func (r *securityRuntime) reload() error {
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

// collectors are the security counters /metrics serves.
func (r *securityRuntime) collectors() []prometheus.Collector {
	audit := r.audit
	return []prometheus.Collector{prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ironbus_audit_events_dropped_total",
		Help: "Audit events lost to a full audit queue since start: refused connections and failed handshakes only; auth and admin events are never dropped."},
		func() float64 { return float64(audit.Dropped()) })}
}

func (r *securityRuntime) close() {
	r.stop()
	if err := r.audit.Close(); err != nil {
		r.logger.Warn("audit log did not close cleanly", "error", err.Error())
	}
}
