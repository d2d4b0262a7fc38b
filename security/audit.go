package security

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// AuditEvent is one line of the audit file. It never carries a secret:
// no token, password, hash or key material, only names.
type AuditEvent struct {
	Time     string `json:"time"`               // RFC 3339, UTC, wall clock (data, not ordering: I6)
	Peer     string `json:"peer"`               // remote address
	Identity string `json:"identity,omitempty"` // the authenticated identity, when there is one
	Action   string `json:"action"`             // auth, publish, subscribe, admin.group, admin.dlq, ...
	Outcome  string `json:"outcome"`            // ok, denied, failed, locked_out, rate_limited, removed
	Detail   string `json:"detail,omitempty"`   // the stream or request, never a credential
}

// AuditOptions configure the audit file.
type AuditOptions struct {
	Path string
	// MaxBytes rotates the file when a line would take it past this
	// (16 MiB); Keep rotated files are kept (3): path.1 is the newest.
	MaxBytes int64
	Keep     int
	// Queue bounds the events waiting to be written (1,024): the
	// reactor never waits for the disk; a full queue counts drops.
	Queue int
	Now   func() time.Time
}

// AuditLog appends events as JSON lines on its own goroutine.
type AuditLog struct {
	options AuditOptions
	events  chan AuditEvent
	dropped atomic.Uint64
	done    chan struct{}
	once    sync.Once
	file    *os.File
	size    int64
	failed  error // the first write error, reported by Close
}

// OpenAudit opens (appending) or creates the audit file, mode 0600.
func OpenAudit(options AuditOptions) (*AuditLog, error) {
	if options.MaxBytes <= 0 {
		options.MaxBytes = 16 << 20
	}
	if options.Keep <= 0 {
		options.Keep = 3
	}
	if options.Queue <= 0 {
		options.Queue = 1024
	}
	if options.Now == nil {
		options.Now = time.Now
	}
	a := &AuditLog{options: options, events: make(chan AuditEvent, options.Queue), done: make(chan struct{})}
	if err := a.open(); err != nil {
		return nil, err
	}
	go a.run()
	return a, nil
}

func (a *AuditLog) open() error {
	file, err := os.OpenFile(a.options.Path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("security: audit log: %w", err)
	}
	info, err := file.Stat()
	if err != nil {
		_ = file.Close()
		return fmt.Errorf("security: audit log: %w", err)
	}
	a.file, a.size = file, info.Size()
	return nil
}

// Record queues an event; it never blocks. The time is filled in here.
func (a *AuditLog) Record(event AuditEvent) {
	if a == nil {
		return
	}
	event.Time = a.options.Now().UTC().Format(time.RFC3339Nano)
	select {
	case a.events <- event:
	default:
		a.dropped.Add(1)
	}
}

// Dropped counts events lost to a full queue.
func (a *AuditLog) Dropped() uint64 { return a.dropped.Load() }

// Close writes what is queued and closes the file.
func (a *AuditLog) Close() error {
	if a == nil {
		return nil
	}
	a.once.Do(func() { close(a.events) })
	<-a.done
	return a.failed
}

func (a *AuditLog) run() {
	defer close(a.done)
	for event := range a.events {
		line, _ := json.Marshal(event) // plain strings: cannot fail
		line = append(line, '\n')
		if err := a.write(line); err != nil && a.failed == nil {
			a.failed = err
		}
	}
	if a.file != nil {
		if err := a.file.Sync(); err != nil && a.failed == nil {
			a.failed = err
		}
		_ = a.file.Close()
	}
}

func (a *AuditLog) write(line []byte) error {
	if a.size > 0 && a.size+int64(len(line)) > a.options.MaxBytes {
		if err := a.rotate(); err != nil {
			return err
		}
	}
	if a.file == nil {
		return fmt.Errorf("security: audit log closed after a failed rotation")
	}
	n, err := a.file.Write(line)
	a.size += int64(n)
	return err
}

// rotate shifts path.N-1 → path.N … path → path.1 and starts a new file.
func (a *AuditLog) rotate() error {
	_ = a.file.Sync()
	_ = a.file.Close()
	a.file = nil
	path := a.options.Path
	_ = os.Remove(fmt.Sprintf("%s.%d", path, a.options.Keep))
	for i := a.options.Keep - 1; i >= 1; i-- {
		_ = os.Rename(fmt.Sprintf("%s.%d", path, i), fmt.Sprintf("%s.%d", path, i+1))
	}
	if err := os.Rename(path, path+".1"); err != nil {
		return fmt.Errorf("security: audit log rotation: %w", err)
	}
	return a.open()
}
