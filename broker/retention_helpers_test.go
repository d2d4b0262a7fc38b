package broker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
)

// manualMonotonic is a monotonic clock the test moves.
type manualMonotonic struct {
	mu  sync.Mutex
	now time.Duration
}

func (m *manualMonotonic) Elapsed() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

func (m *manualMonotonic) advance(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now += d
}

// manualWall is a wall clock the test sets, steps included.
type manualWall struct {
	mu  sync.Mutex
	now time.Time
}

func (w *manualWall) Now() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.now
}

func (w *manualWall) set(t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.now = t
}

func (w *manualWall) advance(d time.Duration) { w.set(w.Now().Add(d)) }

// retentionClocks are the two clocks a retention test drives.
type retentionClocks struct {
	mono *manualMonotonic
	wall *manualWall
}

var testEpoch = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// openRetentionBroker opens a broker with small segments, injected clocks
// and no timer-driven passes (the test runs them).
func openRetentionBroker(t *testing.T, cfg Config, clocks retentionClocks) *Broker {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.Storage.SegmentSize = segment.MinSegmentSize
	cfg.Storage.Clock = clocks.wall
	cfg.Clock = clocks.mono
	cfg.RetentionCheck = time.Hour
	b, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func newClocks() retentionClocks {
	return retentionClocks{mono: &manualMonotonic{}, wall: &manualWall{now: testEpoch}}
}

// fillLog appends n records of about 4 KiB (about 15 per 64 KiB segment)
// and waits until they are durable.
func fillLog(t *testing.T, l *segment.Log, n int) {
	t.Helper()
	body, err := record.AppendBody(nil, record.Body{Payload: make([]byte, 4<<10)})
	if err != nil {
		t.Fatal(err)
	}
	var last segment.Ticket
	for range n {
		if last, err = l.Append(context.Background(), body, record.Checksum(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := last.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// streamLog is partition 0's log of a stream, created by a first publish
// when it does not exist.
func streamLog(t *testing.T, b *Broker, stream string) *segment.Log {
	t.Helper()
	return partitionOf(t, b, stream, 0).Log()
}

// streamingGroup opens a streaming group at the earliest record (creating
// its stream as a first publish would) and commits (and checkpoints) it
// at offset.
func streamingGroup(t *testing.T, b *Broker, stream, name string, committed uint64) *consumer.Group {
	t.Helper()
	partitionOf(t, b, stream, 0)
	served, err := b.OpenGroup([]byte(stream), 0, []byte(name), GroupSpec{Type: consumer.TypeStreaming})
	if err != nil {
		t.Fatal(err)
	}
	commitGroup(t, served.Consumer(), committed)
	return served.Consumer()
}

func commitGroup(t *testing.T, g *consumer.Group, offset uint64) {
	t.Helper()
	if offset > 0 {
		if err := g.Commit(offset); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Checkpoint(); err != nil {
		t.Fatal(err)
	}
}

// checkWholeSegments fails unless the log starts exactly at a segment
// base and every remaining segment but the newest is sealed.
func checkWholeSegments(t *testing.T, l *segment.Log) []segment.SegmentInfo {
	t.Helper()
	segs := l.Segments()
	if len(segs) == 0 || segs[0].Base != l.FirstOffset() {
		t.Fatalf("the log starts at %d, not at a segment base (%v)", l.FirstOffset(), segs)
	}
	for i := 1; i < len(segs); i++ {
		if segs[i].Base != segs[i-1].Next {
			t.Fatalf("segments not contiguous: %v", segs)
		}
	}
	return segs
}

func logBytes(segs []segment.SegmentInfo) (bytes int64, records uint64) {
	for _, s := range segs {
		bytes += s.Bytes
		records += s.Records
	}
	return bytes, records
}
