package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
)

// atomicBodies returns n record bodies of payload bytes each, their CRCs
// and their frame bytes.
func atomicBodies(t *testing.T, n, payload int) ([][]byte, []uint32, int) {
	t.Helper()
	bodies, crcs, frameBytes := make([][]byte, n), make([]uint32, n), 0
	for i := range bodies {
		body, err := record.AppendBody(nil, record.Body{Key: []byte("k"), Payload: make([]byte, payload)})
		if err != nil {
			t.Fatal(err)
		}
		bodies[i], crcs[i] = body, record.Checksum(body)
		frameBytes += record.FrameSize(len(body))
	}
	return bodies, crcs, frameBytes
}

// TestAtomicBatchLimits: a batch over either limit is ErrBatchTooLarge
// and stores nothing, through every append call; one within them is
// stored at consecutive offsets.
func TestAtomicBatchLimits(t *testing.T) {
	b := openTestBroker(t, Config{MaxBatchRecords: 4, MaxBatchBytes: 4096})
	part := partitionOf(t, b, "orders", 0)
	calls := map[string]func([][]byte, []uint32, int) (Ticket, error){
		"TryAppendAtomic": part.TryAppendAtomic,
		"TryCommitAtomic": part.TryCommitAtomic,
		"AppendAtomic": func(bodies [][]byte, crcs []uint32, frameBytes int) (Ticket, error) {
			return part.AppendAtomic(context.Background(), bodies, crcs, frameBytes)
		},
	}
	tooMany, tooManyCRCs, tooManyBytes := atomicBodies(t, 5, 10)
	tooLarge, tooLargeCRCs, tooLargeBytes := atomicBodies(t, 2, 2100)
	for name, call := range calls {
		if _, err := call(tooMany, tooManyCRCs, tooManyBytes); !errors.Is(err, ErrBatchTooLarge) {
			t.Errorf("%s of 5 records: %v, want ErrBatchTooLarge", name, err)
		}
		if _, err := call(tooLarge, tooLargeCRCs, tooLargeBytes); !errors.Is(err, ErrBatchTooLarge) {
			t.Errorf("%s of %d bytes: %v, want ErrBatchTooLarge", name, tooLargeBytes, err)
		}
		if _, err := call(nil, nil, 0); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s of no record: %v, want ErrInvalidArgument", name, err)
		}
	}
	if got := part.Log().Committed(); got != 0 {
		t.Fatalf("refused batches stored records: committed %d", got)
	}
	next := uint64(0)
	for _, name := range []string{"TryAppendAtomic", "TryCommitAtomic", "AppendAtomic"} {
		bodies, crcs, frameBytes := atomicBodies(t, 4, 900)
		ticket, err := calls[name](bodies, crcs, frameBytes)
		if err != nil {
			t.Fatalf("%s within the limits: %v", name, err)
		}
		<-ticket.Done()
		if err := ticket.Err(); err != nil || ticket.First != next || ticket.Count != 4 {
			t.Fatalf("%s: ticket [%d, +%d) %v, want [%d, +4) durable", name, ticket.First, ticket.Count, err, next)
		}
		next += 4
	}
}

// TestAtomicBatchConfig: the limits' defaults follow the storage, and a
// limit the storage cannot honour refuses to open.
func TestAtomicBatchConfig(t *testing.T) {
	dir := t.TempDir()
	cfg, err := Config{DataDir: dir}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxBatchRecords != DefaultMaxBatchRecords || cfg.MaxBatchBytes != DefaultMaxBatchBytes {
		t.Fatalf("defaults: %d records, %d bytes", cfg.MaxBatchRecords, cfg.MaxBatchBytes)
	}
	small := Config{DataDir: dir, Storage: segment.Options{StagingBytes: 256 << 10}}
	if cfg, err = small.withDefaults(); err != nil || cfg.MaxBatchBytes != 256<<10 {
		t.Fatalf("a 256 KiB staging buffer: max batch bytes %d, %v; want 256 KiB", cfg.MaxBatchBytes, err)
	}
	for _, bad := range []Config{
		{DataDir: dir, MaxBatchRecords: MaxBatchRecordsLimit + 1},
		{DataDir: dir, MaxBatchBytes: segment.DefaultStagingBytes + 1},
		{DataDir: dir, MaxBatchBytes: 64 << 10, Storage: segment.Options{SegmentSize: segment.MinSegmentSize}},
	} {
		if _, err := Open(bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("records %d, bytes %d, segment %d: %v, want ErrInvalidArgument",
				bad.MaxBatchRecords, bad.MaxBatchBytes, bad.Storage.SegmentSize, err)
		}
	}
}

// TestAtomicBatchStorageError: the log's own refusal has the engine kind.
func TestAtomicBatchStorageError(t *testing.T) {
	err := storageError(fmt.Errorf("%w: 3 records in 70000 frame bytes", segment.ErrBatchTooLarge))
	if !errors.Is(err, ErrBatchTooLarge) || errors.Is(err, ErrStorage) {
		t.Fatalf("%v: want ErrBatchTooLarge", err)
	}
}

// TestAtomicBatchWorkGroupSeesAllOrNone: a work group fetching everything
// it may while atomic batches are appended always stops at the end of a
// batch, never inside one, whatever it fetches at once.
func TestAtomicBatchWorkGroupSeesAllOrNone(t *testing.T) {
	b := openTestBroker(t, Config{Storage: segment.Options{SegmentSize: segment.MinSegmentSize}})
	part := partitionOf(t, b, "orders", 0)
	group, err := b.OpenGroup([]byte("orders"), 0, []byte("workers"), GroupSpec{Type: consumer.TypeWork})
	if err != nil {
		t.Fatal(err)
	}
	type span struct{ first, end uint64 }
	var mu sync.Mutex
	var batches []span
	var total uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 150 {
			bodies, crcs, frameBytes := atomicBodies(t, 2+i%9, 500+i%7*300)
			ticket, err := part.AppendAtomic(context.Background(), bodies, crcs, frameBytes)
			if err != nil {
				t.Errorf("batch %d: %v", i, err)
				return
			}
			mu.Lock()
			batches = append(batches, span{ticket.First, ticket.First + ticket.Count})
			total = ticket.First + ticket.Count
			mu.Unlock()
		}
	}()
	var ends []uint64 // one past the last offset of each fetch that emptied the group
	next, producing := uint64(0), true
	for deadline := time.Now().Add(time.Minute); ; {
		select {
		case <-done:
			producing = false
		default:
		}
		deliveries, _, err := group.Consumer().Fetch(1, 1<<20, 1<<30, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range deliveries {
			if d.Offset != next {
				t.Fatalf("delivered offset %d, want %d", d.Offset, next)
			}
			next++
			group.Consumer().Ack(d.Offset, d.Lease)
		}
		if len(deliveries) > 0 {
			ends = append(ends, next)
		} else if producing {
			select {
			case <-part.Log().CommittedChange(next):
			case <-done:
			}
		}
		mu.Lock()
		finished := !producing && next == total
		mu.Unlock()
		if finished || time.Now().After(deadline) {
			break
		}
	}
	<-done
	for _, end := range ends {
		for _, batch := range batches {
			if batch.first < end && end < batch.end {
				t.Fatalf("a fetch ended at %d, inside atomic batch [%d, %d)", end, batch.first, batch.end)
			}
		}
	}
	if next != total || len(ends) < 2 {
		t.Fatalf("delivered up to %d of %d in %d fetches", next, total, len(ends))
	}
}
