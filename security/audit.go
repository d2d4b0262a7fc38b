package security

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
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
	Outcome  string `json:"outcome"`            // ok, denied, failed, expired, locked_out, rate_limited, removed, rotated
	Detail   string `json:"detail,omitempty"`   // the stream or request, never a credential
	// Username is the name a password login claimed, recorded whether or
	// not it exists (an operator needs it to see who is being guessed at).
	Username string `json:"username,omitempty"`
}

// Essential reports whether the event is one the audit trail must never
// lose: an authentication outcome, an admin request, an authorization
// decision (denied, removed), or anything an authenticated identity did.
// The rest (refused connections, failed or timed-out handshakes) come
// from peers that proved nothing, so a flood of them is dropped and
// counted rather than slowing anyone down.
func (e AuditEvent) Essential() bool {
	return e.Action == "auth" || e.Action == "admin" || strings.HasPrefix(e.Action, "admin.") ||
		e.Identity != "" || e.Outcome == "denied" || e.Outcome == "removed" || e.Outcome == "expired"
}

// AuditOptions configure the audit file.
type AuditOptions struct {
	Path string
	// MaxBytes rotates the file when a line would take it past this
	// (16 MiB); Keep rotated files are kept (DefaultAuditKeep): path.1
	// is the newest. History is at most MaxBytes × (Keep+1).
	MaxBytes int64
	Keep     int
	// Queue bounds the events waiting to be written (1,024). When it is
	// full an essential event waits for room (the connection that caused
	// it waits, see Record and TryRecord) and any other is dropped and
	// counted.
	Queue int
	Now   func() time.Time
}

// DefaultAuditKeep is the rotated audit files kept when unset.
const DefaultAuditKeep = 3

// AuditLog appends events as JSON lines on its own goroutine.
type AuditLog struct {
	options AuditOptions
	events  chan AuditEvent
	dropped atomic.Uint64
	done    chan struct{}
	// closing guards the queue's end: senders hold it shared while they
	// send (an essential one may wait there for the writer, which keeps
	// draining), Close takes it exclusively to close the queue, so no
	// send ever meets a closed channel.
	closing sync.RWMutex
	closed  bool
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
		options.Keep = DefaultAuditKeep
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

// Record queues an event; the time is filled in here. An essential event
// waits for room in the queue, so call Record for one only where the
// connection that caused it may wait (its own goroutine); the network
// reactor uses TryRecord. Any other event never waits: a full queue
// drops it and counts it (Dropped).
func (a *AuditLog) Record(event AuditEvent) {
	if a == nil {
		return
	}
	a.queue(event, event.Essential())
}

// TryRecord queues an event without ever waiting. It returns false only
// for an essential event the full queue could not take: nothing was
// recorded, and the caller must hold the connection that caused it (stop
// reading from it) and Record the event off the reactor before going on.
// Any other event is dropped and counted when the queue is full, and
// TryRecord returns true.
func (a *AuditLog) TryRecord(event AuditEvent) bool {
	if a == nil {
		return true
	}
	if !event.Essential() {
		a.queue(event, false)
		return true
	}
	return a.queueNow(event)
}

func (a *AuditLog) queue(event AuditEvent, wait bool) {
	if !wait {
		if !a.queueNow(event) {
			a.dropped.Add(1)
		}
		return
	}
	event.Time = a.options.Now().UTC().Format(time.RFC3339Nano)
	a.closing.RLock()
	defer a.closing.RUnlock()
	if !a.closed {
		a.events <- event
	}
}

// queueNow queues the event if there is room this instant.
func (a *AuditLog) queueNow(event AuditEvent) bool {
	event.Time = a.options.Now().UTC().Format(time.RFC3339Nano)
	a.closing.RLock()
	defer a.closing.RUnlock()
	if a.closed {
		return true // shutting down: nothing more is written
	}
	select {
	case a.events <- event:
		return true
	default:
		return false
	}
}

// Dropped counts the non-essential events lost to a full queue.
func (a *AuditLog) Dropped() uint64 {
	if a == nil {
		return 0
	}
	return a.dropped.Load()
}

// Close writes what is queued and closes the file.
func (a *AuditLog) Close() error {
	if a == nil {
		return nil
	}
	a.closing.Lock()
	if !a.closed {
		a.closed = true
		close(a.events)
	}
	a.closing.Unlock()
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
		// A rotation could not reopen the file: try again, so one
		// transient failure does not end the trail.
		if err := a.open(); err != nil {
			return err
		}
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
