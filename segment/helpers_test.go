package segment

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/vfs"
)

// fixedClock is a clock tests control; safe for concurrent use.
type fixedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fixedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fixedClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// seededRandom returns a deterministic token source.
func seededRandom(seed uint64) io.Reader {
	return &rngReader{rng: rand.New(rand.NewPCG(seed, seed^0xabcdef))}
}

// rngReader is shared by every log of a directory, whose appenders and
// segment preparers read tokens concurrently: the lock keeps the source
// (not safe for concurrent use) whole.
type rngReader struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func (r *rngReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range p {
		p[i] = byte(r.rng.Uint32())
	}
	return len(p), nil
}

func crc(b []byte) uint32 { return record.Checksum(b) }

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed*31+7)) }

// seedFromEnv returns IRONBUS_SEED when set, to replay one seeded run.
func seedFromEnv(t testing.TB) uint64 {
	v := os.Getenv("IRONBUS_SEED")
	if v == "" {
		return 0
	}
	seed, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("IRONBUS_SEED=%q: %v", v, err)
	}
	return seed
}

func testOptions(seed uint64) Options {
	return Options{
		SegmentSize:  MinSegmentSize,
		StagingBytes: 16 << 10,
		Clock:        &fixedClock{now: time.Unix(1_800_000_000, 0)},
		Random:       seededRandom(seed),
	}
}

var defaultLog = LogID{Stream: DefaultStream}

// body builds a record body whose payload encodes its index, so a test can
// tell any record from any other.
func body(index uint64, size int) []byte {
	payload := make([]byte, max(size, 16))
	binary.LittleEndian.PutUint64(payload, index)
	binary.LittleEndian.PutUint64(payload[8:], ^index)
	for i := 16; i < len(payload); i++ {
		payload[i] = byte(index + uint64(i))
	}
	encoded, err := record.AppendBody(nil, record.Body{Key: []byte(fmt.Sprint("k", index%7)), Payload: payload})
	if err != nil {
		panic(err)
	}
	return encoded
}

// payloadIndex recovers the index body() encoded.
func payloadIndex(t testing.TB, b []byte) uint64 {
	t.Helper()
	view, err := record.Parse(b)
	if err != nil {
		t.Fatalf("decoding body: %v", err)
	}
	index := binary.LittleEndian.Uint64(view.Payload)
	if binary.LittleEndian.Uint64(view.Payload[8:]) != ^index {
		t.Fatalf("payload self-check failed for index %d", index)
	}
	return index
}

func appendBody(t testing.TB, l *Log, b []byte) Ticket {
	t.Helper()
	ticket, err := l.Append(context.Background(), b, record.Checksum(b))
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return ticket
}

func waitTicket(t testing.TB, ticket Ticket) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ticket.Wait(ctx); err != nil {
		t.Fatalf("waiting for offset %d: %v", ticket.First, err)
	}
}

// readAll reads every committed entry of l from offset 0.
func readAll(t testing.TB, l *Log) ([]Entry, []Gap) {
	t.Helper()
	r := l.NewReader(0)
	defer r.Close()
	var entries []Entry
	var gaps []Gap
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return entries, gaps
		}
		if err != nil {
			t.Fatalf("reading at %d: %v", r.Offset(), err)
		}
		if e.Gap != nil {
			gaps = append(gaps, *e.Gap)
			continue
		}
		e.Body = bytes.Clone(e.Body)
		e.Frame = nil
		entries = append(entries, e)
	}
}

func openDir(t testing.TB, fsys vfs.FS, opts Options) *Dir {
	t.Helper()
	d, err := Open(fsys, "/data", opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return d
}

func openLog(t testing.TB, d *Dir) *Log {
	t.Helper()
	l, err := d.OpenLog(defaultLog)
	if err != nil {
		t.Fatalf("open log: %v", err)
	}
	return l
}
