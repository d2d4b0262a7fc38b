package txn

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// memorySink is a Sink whose partitions and groups live in memory and are
// durable the moment a call returns, so a coordinator crash test sees
// exactly what the coordinator asked of them before the cut.
type memorySink struct {
	mu      sync.Mutex
	logs    map[Target][][]byte
	groups  map[string]uint64
	appends int
	// dead, when set, says the power is gone: the sink refuses every
	// write, as a dead process makes none (an operation that raced the
	// cut may still complete on the file system after the crash image was
	// taken, and the coordinator must not get further on its strength).
	dead func() bool
}

var errPowerGone = fmt.Errorf("%w: power cut", vfs.ErrInjected)

func newMemorySink() *memorySink {
	return &memorySink{logs: map[Target][][]byte{}, groups: map[string]uint64{}}
}

func (s *memorySink) Head(t Target) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return uint64(len(s.logs[t])), nil
}

func (s *memorySink) Append(t Target, bodies [][]byte, crcs []uint32) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead != nil && s.dead() {
		return 0, errPowerGone
	}
	for i, body := range bodies {
		if record.Checksum(body) != crcs[i] {
			return 0, fmt.Errorf("append to %s: checksum mismatch", t)
		}
	}
	first := uint64(len(s.logs[t]))
	for _, body := range bodies {
		s.logs[t] = append(s.logs[t], slices.Clone(body))
	}
	s.appends++
	return first, nil
}

func (s *memorySink) Scan(t Target, from uint64, fn func(uint64, []byte)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for offset := from; offset < uint64(len(s.logs[t])); offset++ {
		fn(offset, s.logs[t][offset])
	}
	return nil
}

func (s *memorySink) CheckGroups(commits []GroupCommit) error {
	for _, c := range commits {
		if c.Group == "" {
			return fmt.Errorf("group commit without a group")
		}
	}
	return nil
}

func (s *memorySink) ApplyGroups(commits []GroupCommit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead != nil && s.dead() {
		return errPowerGone
	}
	for _, c := range commits {
		key := fmt.Sprintf("%s/%d/%s", c.Stream, c.Partition, c.Group)
		s.groups[key] = max(s.groups[key], c.Offset)
	}
	return nil
}

func (s *memorySink) clone() *memorySink {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := newMemorySink()
	for t, bodies := range s.logs {
		c.logs[t] = slices.Clone(bodies)
	}
	for k, v := range s.groups {
		c.groups[k] = v
	}
	return c
}

// fakeClock is a monotonic clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Duration
}

func (c *fakeClock) read() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now += d
	c.mu.Unlock()
}

func testConfig(fsys vfs.FS, sink Sink, clock *fakeClock) Config {
	return Config{FS: fsys, Dir: "/data/txn", Sink: sink, Clock: clock.read, SweepInterval: -1,
		Storage: segment.Options{SegmentSize: segment.MinSegmentSize}}
}

func mustOpen(t *testing.T, cfg Config) *Coordinator {
	t.Helper()
	c, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return c
}

// body frames a record body with payload p.
func body(t testing.TB, p string) ([]byte, uint32) {
	t.Helper()
	b, err := record.AppendBody(nil, record.Body{Key: []byte("k"), Payload: []byte(p),
		Headers: []record.Header{{Name: "h", Value: []byte("v")}}, HasProducer: true, ProducerID: 7, Sequence: 3})
	if err != nil {
		t.Fatal(err)
	}
	return b, record.Checksum(b)
}

// appendDurable appends a record and waits until it is durable.
func appendDurable(t *testing.T, c *Coordinator, owner, id uint64, target Target, payload string) uint32 {
	t.Helper()
	b, crc := body(t, payload)
	ticket, index, err := c.Append(owner, id, target, b, crc)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	<-ticket.Done()
	if err := ticket.Err(); err != nil {
		t.Fatalf("Append not durable: %v", err)
	}
	return index
}

var (
	targetA = Target{Stream: "a", Partition: 0}
	targetB = Target{Stream: "b", Partition: 1}
)

// payloads returns the payloads of target's records carrying a reference
// to transaction id, in log order.
func payloads(t *testing.T, s *memorySink, target Target, id uint64) []string {
	t.Helper()
	var out []string
	for _, b := range s.logs[target] {
		ref, _, ok := Reference(b)
		if !ok || ref != id {
			continue
		}
		view, err := record.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if view.HasProducer {
			t.Errorf("a copy kept its producer id")
		}
		out = append(out, string(view.Payload))
	}
	return out
}
