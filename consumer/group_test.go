package consumer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newLog(t *testing.T, mem *vfs.MemFS, records int) (*segment.Dir, *segment.Log) {
	t.Helper()
	d, err := segment.Open(mem, "/data", segment.Options{SegmentSize: segment.MinSegmentSize})
	if err != nil {
		t.Fatal(err)
	}
	l, err := d.OpenLog(segment.LogID{Stream: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	var last segment.Ticket
	for i := 0; i < records; i++ {
		body, _ := record.AppendBody(nil, record.Body{Payload: []byte(fmt.Sprint("record-", i))})
		if last, err = l.Append(context.Background(), body, record.Checksum(body)); err != nil {
			t.Fatal(err)
		}
	}
	if records > 0 {
		if err := last.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return d, l
}

func TestWorkGroupLeasesAcksAndRedelivers(t *testing.T) {
	mem := vfs.NewMemFS()
	d, l := newLog(t, mem, 10)
	defer d.Close()
	clock := &manualClock{now: time.Unix(0, 0)}
	g, err := Open(l, "workers", Options{Visibility: time.Second, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	first, _, err := g.Fetch(1, 4, 1<<20, 0)
	if err != nil || len(first) != 4 || first[0].Offset != 0 || first[0].Attempt != 1 {
		t.Fatalf("first fetch: %v %+v", err, first)
	}
	second, _, _ := g.Fetch(2, 100, 1<<20, 0)
	if len(second) != 6 || second[0].Offset != 4 {
		t.Fatalf("competing consumer got %d records from %d", len(second), second[0].Offset)
	}
	if got := g.Ack(0, first[0].Lease); got != StatusOK {
		t.Fatalf("ack: %v", got)
	}
	if got := g.Ack(0, first[0].Lease); got != StatusUnknown {
		t.Fatalf("double ack: %v", got)
	}
	if got := g.Ack(1, first[0].Lease); got != StatusStale {
		t.Fatalf("ack with another lease's token: %v", got)
	}
	if got := g.Nack(1, first[1].Lease, 0); got != StatusOK {
		t.Fatalf("nack: %v", got)
	}
	g.Release(2) // consumer 2 disconnected
	again, _, _ := g.Fetch(3, 100, 1<<20, 0)
	if len(again) != 7 || again[0].Offset != 1 || !again[0].Redelivered || again[0].Attempt != 2 {
		t.Fatalf("redeliveries first: %+v", again)
	}
	clock.advance(2 * time.Second) // records 2 and 3 of consumer 1 expire
	expired, _, _ := g.Fetch(4, 100, 1<<20, 0)
	if len(expired) != 9 {
		t.Fatalf("after expiry: %d redelivered", len(expired))
	}
	for _, delivery := range expired {
		g.Ack(delivery.Offset, delivery.Lease)
	}
	if got := g.Committed(); got != 10 {
		t.Fatalf("cursor %d after acking everything", got)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	reopened, err := Open(l, "workers", Options{})
	if err != nil || reopened.Committed() != 10 {
		t.Fatalf("checkpointed cursor: %v %d", err, reopened.Committed())
	}
}

func TestWorkGroupSkipsRetentionGap(t *testing.T) {
	mem := vfs.NewMemFS()
	d, l := newLog(t, mem, 3000)
	defer d.Close()
	if n, err := l.DeleteBefore(l.Committed() / 2); err != nil || n == 0 {
		t.Fatalf("retention: %d %v", n, err)
	}
	g, err := Open(l, "late", Options{})
	if err != nil {
		t.Fatal(err)
	}
	deliveries, gaps, err := g.Fetch(1, 1, 1<<20, 0)
	if err != nil || len(gaps) != 0 || len(deliveries) != 1 || deliveries[0].Offset != l.FirstOffset() {
		t.Fatalf("a new group starts at the earliest retained offset: %+v %+v %v", deliveries, gaps, err)
	}
}

func TestInvalidGroupName(t *testing.T) {
	mem := vfs.NewMemFS()
	d, l := newLog(t, mem, 0)
	defer d.Close()
	if _, err := Open(l, "../x", Options{}); err == nil {
		t.Fatal("bad group name accepted")
	}
}
