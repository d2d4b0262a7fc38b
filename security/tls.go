package security

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// ErrTLSConfig reports TLS files that cannot be used.
var ErrTLSConfig = errors.New("security: tls")

// DefaultReloadInterval is how often certificate and auth files are
// checked for changes.
const DefaultReloadInterval = 5 * time.Second

// ServerTLSOptions name the broker's TLS files.
type ServerTLSOptions struct {
	CertFile string
	KeyFile  string
	// ClientCAFile, when set, turns on mTLS: every client must present a
	// certificate that chains to one of these CAs.
	ClientCAFile string
	Logger       *slog.Logger
}

// ServerTLS serves the broker's certificate and client CAs from a
// snapshot that Reload swaps atomically. Each handshake takes the current
// snapshot (tls.Config.GetConfigForClient), so a reload affects only new
// handshakes; established connections keep the session they negotiated.
type ServerTLS struct {
	options ServerTLSOptions
	current atomic.Pointer[serverSnapshot]
	reload  sync.Mutex // one reload at a time
}

type serverSnapshot struct {
	config *tls.Config
	stamps fileStamps
}

// NewServerTLS loads the files once; a failure here is fatal at startup.
func NewServerTLS(options ServerTLSOptions) (*ServerTLS, error) {
	if options.CertFile == "" || options.KeyFile == "" {
		return nil, fmt.Errorf("%w: a certificate needs both --tls-cert and --tls-key", ErrTLSConfig)
	}
	if options.Logger == nil {
		options.Logger = slog.New(slog.DiscardHandler)
	}
	s := &ServerTLS{options: options}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// MutualTLS reports whether clients must present certificates.
func (s *ServerTLS) MutualTLS() bool { return s.options.ClientCAFile != "" }

// Config returns the listener's configuration: TLS 1.3 only, and every
// handshake served from the current snapshot.
func (s *ServerTLS) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.current.Load().config, nil
		},
	}
}

// Reload reads the files again and, when they load, serves them to new
// handshakes. On error the previous snapshot stays in service. This is
// the hook the SIGHUP handler calls.
func (s *ServerTLS) Reload() error {
	s.reload.Lock()
	defer s.reload.Unlock()
	stamps := stampFiles(s.files())
	snapshot, err := s.load()
	if err != nil {
		return err
	}
	snapshot.stamps = stamps
	s.current.Store(snapshot)
	return nil
}

func (s *ServerTLS) files() []string {
	files := []string{s.options.CertFile, s.options.KeyFile}
	if s.options.ClientCAFile != "" {
		files = append(files, s.options.ClientCAFile)
	}
	return files
}

func (s *ServerTLS) load() (*serverSnapshot, error) {
	if err := CheckSecretFile(s.options.KeyFile); err != nil {
		return nil, fmt.Errorf("%w: --tls-key: %w", ErrTLSConfig, err)
	}
	cert, err := tls.LoadX509KeyPair(s.options.CertFile, s.options.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: loading %s and %s: %w", ErrTLSConfig, s.options.CertFile, s.options.KeyFile, err)
	}
	config := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}}
	if s.options.ClientCAFile != "" {
		pool, err := loadCertPool(s.options.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: --tls-client-ca: %w", ErrTLSConfig, err)
		}
		config.ClientCAs = pool
		config.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return &serverSnapshot{config: config}, nil
}

// Watch reloads when any file's modification time or size changes,
// checking every interval until ctx ends. A failed reload is logged and
// the previous certificate stays in service.
func (s *ServerTLS) Watch(ctx context.Context, interval time.Duration) {
	watchFiles(ctx, interval, s.files, func() fileStamps { return s.current.Load().stamps }, func() {
		if err := s.Reload(); err != nil {
			s.options.Logger.Error("TLS files changed but did not load; still serving the previous certificate", "error", err.Error())
			return
		}
		s.options.Logger.Info("TLS certificate reloaded", "cert", s.options.CertFile)
	})
}

func loadCertPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// PeerIdentity names a verified client certificate's holder: its first
// URI SAN, else its first DNS SAN. The subject CN is never used: it is
// free text and was never meant to be an identity.
func PeerIdentity(state tls.ConnectionState) (string, bool) {
	if len(state.VerifiedChains) == 0 || len(state.PeerCertificates) == 0 {
		return "", false
	}
	leaf := state.PeerCertificates[0]
	if len(leaf.URIs) > 0 {
		return leaf.URIs[0].String(), true
	}
	if len(leaf.DNSNames) > 0 {
		return leaf.DNSNames[0], true
	}
	return "", false
}

// ClientTLSOptions configure a client's TLS.
type ClientTLSOptions struct {
	// CAFile verifies the broker (the system roots when empty).
	CAFile string
	// CertFile and KeyFile are the client certificate for mTLS.
	CertFile string
	KeyFile  string
	// ServerName overrides the name checked in the broker's certificate
	// (the host of the address by default).
	ServerName string
}

// Enabled reports whether any TLS option is set.
func (o ClientTLSOptions) Enabled() bool {
	return o.CAFile != "" || o.CertFile != "" || o.KeyFile != "" || o.ServerName != ""
}

// ClientTLSConfig builds a TLS 1.3 client configuration.
func ClientTLSConfig(options ClientTLSOptions) (*tls.Config, error) {
	config := &tls.Config{MinVersion: tls.VersionTLS13, ServerName: options.ServerName}
	if options.CAFile != "" {
		pool, err := loadCertPool(options.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: --tls-ca: %w", ErrTLSConfig, err)
		}
		config.RootCAs = pool
	}
	if (options.CertFile == "") != (options.KeyFile == "") {
		return nil, fmt.Errorf("%w: a client certificate needs both --tls-cert and --tls-key", ErrTLSConfig)
	}
	if options.CertFile != "" {
		if err := CheckSecretFile(options.KeyFile); err != nil {
			return nil, fmt.Errorf("%w: --tls-key: %w", ErrTLSConfig, err)
		}
		cert, err := tls.LoadX509KeyPair(options.CertFile, options.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrTLSConfig, err)
		}
		config.Certificates = []tls.Certificate{cert}
	}
	return config, nil
}
