package brokerproc

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ironbus/ironbus/arena"
	"github.com/ironbus/ironbus/security"
)

// Errors Start and Stop wrap; the rest are the operating system's.
var (
	// ErrTemporaryDirectory: the broker's data or certificate directory
	// could not be made.
	ErrTemporaryDirectory = errors.New("brokerproc: temporary directory")
	// ErrNotServing: the broker exited or stayed silent before serving.
	ErrNotServing = errors.New("brokerproc: the broker did not start serving")
	// ErrNotDrained: the broker failed or hung while draining.
	ErrNotDrained = errors.New("brokerproc: the broker did not drain cleanly")
)

// How long the broker gets to start serving, to drain, and to finish its
// log once it exited.
const (
	startTimeout = 30 * time.Second
	drainTimeout = 60 * time.Second
	logTimeout   = 5 * time.Second
	// rssInterval is how often the broker's RSS is sampled.
	rssInterval = 50 * time.Millisecond
	// logTailLines of the broker's log are kept for an error report.
	logTailLines = 20
)

// Options say which broker to start and how.
type Options struct {
	// Binary is the ironbus executable; it runs as "serve".
	Binary string
	// Args are further serve flags (durability, profile, loop, ...), given
	// after the ones Start sets: --json, --data-dir, --addr, --health-addr.
	Args []string
	// TLS makes the broker serve TLS 1.3 with a throwaway self-signed
	// certificate; ClientTLS verifies it.
	TLS bool
}

// Usage is what was read of the broker process from outside.
type Usage struct {
	// Fsyncs is the fdatasync count of the broker's last log line (0 when
	// it did not stop cleanly).
	Fsyncs uint64
	// PeakRSSBytes is the largest anonymous RSS sampled while it served.
	PeakRSSBytes int64
	// DiskWriteBytes is what it wrote to storage while it served.
	DiskWriteBytes int64
}

// Process is a started broker.
type Process struct {
	addr      string
	clientTLS *tls.Config
	dataDir   string
	tlsDir    string
	command   *exec.Cmd
	exited    chan error
	logRead   chan struct{} // closed once the broker's log ended (its stop line read)
	stopped   bool          // Stop ran: the process is gone or was killed

	writeStart int64
	sampling   chan struct{}
	sampled    chan struct{}

	mu      sync.Mutex
	syncs   uint64
	logTail []string
	peakRSS int64
}

// Start runs the broker on a fresh temporary directory and waits until it
// serves.
func Start(options Options) (*Process, error) {
	p := &Process{}
	dataDir, err := os.MkdirTemp("", "ironbus-bench-")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTemporaryDirectory, err)
	}
	p.dataDir = dataDir
	args := []string{"serve", "--json", "--data-dir", p.dataDir, "--addr", "127.0.0.1:0", "--health-addr", "off"}
	args = append(args, options.Args...)
	if options.TLS {
		secure, err := p.prepareTLS()
		if err != nil {
			p.Remove()
			return nil, err
		}
		args = append(args, secure...)
	}
	if err := p.run(options.Binary, args); err != nil {
		p.Remove()
		return nil, err
	}
	return p, nil
}

// run starts the process and waits for its serving line.
func (p *Process) run(binary string, args []string) error {
	p.command = exec.Command(binary, args...)
	// An os.Pipe rather than StderrPipe: Wait closes a StderrPipe as soon
	// as the process exits, which can cut off its last log line (the sync
	// count); this reader sees EOF only after the broker wrote everything.
	stderr, logWriter, err := os.Pipe()
	if err != nil {
		return err
	}
	p.command.Stderr = logWriter
	err = p.command.Start()
	_ = logWriter.Close() // the child holds its own copy
	if err != nil {
		_ = stderr.Close()
		return fmt.Errorf("brokerproc: starting the broker: %w", err)
	}
	p.exited, p.logRead = make(chan error, 1), make(chan struct{})
	serving := make(chan string, 1)
	go p.readLog(stderr, serving)
	go func() { p.exited <- p.command.Wait() }()
	select {
	case p.addr = <-serving:
	case err := <-p.exited:
		p.stopped = true
		return fmt.Errorf("%w: it exited (%v):\n%s", ErrNotServing, err, p.tail())
	case <-time.After(startTimeout):
		return fmt.Errorf("%w within %v:\n%s", ErrNotServing, startTimeout, p.tail())
	}
	p.writeStart = readProcessField(p.command.Process.Pid, "io", "write_bytes")
	p.sampling, p.sampled = make(chan struct{}), make(chan struct{})
	go p.sampleRSS()
	return nil
}

// prepareTLS makes the throwaway CA and server certificate and returns
// serve's TLS flags.
func (p *Process) prepareTLS() ([]string, error) {
	dir, err := os.MkdirTemp("", "ironbus-bench-tls-")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTemporaryDirectory, err)
	}
	p.tlsDir = dir
	caFile, certFile, keyFile, err := security.LocalhostPair(dir)
	if err != nil {
		return nil, fmt.Errorf("brokerproc: %w", err)
	}
	config, err := security.ClientTLSConfig(security.ClientTLSOptions{CAFile: caFile, ServerName: "localhost"})
	if err != nil {
		return nil, fmt.Errorf("brokerproc: %w", err)
	}
	p.clientTLS = config
	return []string{"--tls-cert", certFile, "--tls-key", keyFile}, nil
}

// Addr is the broker's listening address.
func (p *Process) Addr() string { return p.addr }

// ClientTLS verifies the broker's throwaway certificate; nil without
// Options.TLS.
func (p *Process) ClientTLS() *tls.Config { return p.clientTLS }

// readLog follows the broker's JSON log: the serving line gives the
// address, the stopped line the fdatasync count.
func (p *Process) readLog(stderr io.ReadCloser, serving chan<- string) {
	defer close(p.logRead)
	defer stderr.Close()
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		var line struct {
			Message string `json:"msg"`
			Addr    string `json:"addr"`
			Syncs   uint64 `json:"syncs"`
		}
		text := lines.Text()
		p.mu.Lock()
		p.logTail = append(p.logTail[max(0, len(p.logTail)-logTailLines):], text)
		p.mu.Unlock()
		if json.Unmarshal([]byte(text), &line) != nil {
			continue
		}
		switch line.Message {
		case "serving":
			select {
			case serving <- line.Addr:
			default:
			}
		case "stopped cleanly":
			p.mu.Lock()
			p.syncs = line.Syncs
			p.mu.Unlock()
		}
	}
}

func (p *Process) tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.logTail, "\n")
}

func (p *Process) sampleRSS() {
	defer close(p.sampled)
	ticker := time.NewTicker(rssInterval)
	defer ticker.Stop()
	for {
		if rss, err := arena.ReadAnonymousOf(p.command.Process.Pid); err == nil {
			p.mu.Lock()
			p.peakRSS = max(p.peakRSS, rss)
			p.mu.Unlock()
		}
		select {
		case <-p.sampling:
			return
		case <-ticker.C:
		}
	}
}

// Stop drains the broker (SIGTERM), waits for its last log line and
// returns what it did while it served.
func (p *Process) Stop() (Usage, error) {
	if p.stopped {
		return Usage{}, nil
	}
	p.stopped = true
	writeEnd := readProcessField(p.command.Process.Pid, "io", "write_bytes")
	close(p.sampling)
	<-p.sampled
	_ = p.command.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return Usage{}, fmt.Errorf("%w: it exited %d:\n%s", ErrNotDrained, exit.ExitCode(), p.tail())
		}
	case <-time.After(drainTimeout):
		_ = p.command.Process.Kill()
		return Usage{}, fmt.Errorf("%w within %v", ErrNotDrained, drainTimeout)
	}
	// The process has exited; its last log line (the sync count) may still
	// be on its way through the pipe.
	select {
	case <-p.logRead:
	case <-time.After(logTimeout):
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	usage := Usage{Fsyncs: p.syncs, PeakRSSBytes: p.peakRSS}
	if writeEnd > p.writeStart {
		usage.DiskWriteBytes = writeEnd - p.writeStart
	}
	return usage, nil
}

// Remove kills a broker that was never stopped and deletes the temporary
// directories.
func (p *Process) Remove() {
	if p.command != nil && p.command.Process != nil && !p.stopped {
		p.stopped = true
		_ = p.command.Process.Kill()
		<-p.exited
	}
	if p.dataDir != "" {
		_ = os.RemoveAll(p.dataDir)
	}
	if p.tlsDir != "" {
		_ = os.RemoveAll(p.tlsDir)
	}
}
