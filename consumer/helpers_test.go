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

// tickClock stamps records one second apart, so time lookups are exact.
type tickClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *tickClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Second)
	return c.now
}

// rig is a data directory with a source log and its dead-letter log.
type rig struct {
	t     testing.TB
	dir   *segment.Dir
	log   *segment.Log
	dlq   *segment.Log
	queue *LogDeadLetters
}

// openRig opens (or recovers) the directory on fsys.
func openRig(t testing.TB, fsys vfs.FS) (*rig, error) {
	t.Helper()
	d, err := segment.Open(fsys, "/data", segment.Options{SegmentSize: segment.MinSegmentSize,
		Clock: &tickClock{now: time.Unix(1000, 0)}})
	if err != nil {
		return nil, err
	}
	l, err := d.OpenLog(segment.LogID{Stream: "orders"})
	if err != nil {
		d.Close()
		return nil, err
	}
	dlq, err := d.OpenLog(segment.LogID{Stream: "orders.dlq"})
	if err != nil {
		d.Close()
		return nil, err
	}
	return &rig{t: t, dir: d, log: l, dlq: dlq, queue: NewLogDeadLetters(dlq)}, nil
}

func mustRig(t testing.TB, fsys vfs.FS) *rig {
	t.Helper()
	r, err := openRig(t, fsys)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.dir.Close() })
	return r
}

// appendRecords appends n records; key(i) names record i's key ("" for
// none).
func (r *rig) appendRecords(n int, key func(i int) string) {
	r.t.Helper()
	var last segment.Ticket
	for i := 0; i < n; i++ {
		b := record.Body{Payload: []byte(fmt.Sprint("record-", i))}
		if key != nil {
			b.Key = []byte(key(i))
		}
		body, err := record.AppendBody(nil, b)
		if err != nil {
			r.t.Fatal(err)
		}
		if last, err = r.log.Append(context.Background(), body, record.Checksum(body)); err != nil {
			r.t.Fatal(err)
		}
	}
	if n > 0 {
		if err := last.Wait(context.Background()); err != nil {
			r.t.Fatal(err)
		}
	}
}

// deadLetters returns every dead letter in the queue.
func (r *rig) deadLetters() []DeadLetter {
	r.t.Helper()
	reader := r.dlq.NewReader(r.dlq.FirstOffset())
	defer reader.Close()
	var out []DeadLetter
	for {
		entry, err := reader.Next()
		if err != nil {
			return out
		}
		if entry.Gap != nil {
			continue
		}
		letter, err := DecodeDeadLetter(entry.Body)
		if err != nil {
			r.t.Fatalf("dead letter at %d: %v", entry.Offset, err)
		}
		out = append(out, letter)
	}
}

func (r *rig) open(name string, opts Options) *Group {
	r.t.Helper()
	g, err := Open(r.log, name, opts)
	if err != nil {
		r.t.Fatal(err)
	}
	return g
}

// keyOf decodes a delivery's key.
func keyOf(t *testing.T, d Delivery) string {
	view, err := record.Parse(d.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(view.Key)
}
