package broker

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/internal/crashtest"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
	"github.com/ironbus/ironbus/txn"
)

func txnConfig(fsys vfs.FS) Config {
	return Config{DataDir: "/data", FS: fsys, Storage: segment.Options{SegmentSize: segment.MinSegmentSize},
		Clock: &manualMonotonic{}, CheckpointInterval: time.Hour}
}

// txnBody frames a record with payload.
func txnBody(t testing.TB, payload string) ([]byte, uint32) {
	t.Helper()
	body, err := record.AppendBody(nil, record.Body{Key: []byte("k"), Payload: []byte(payload)})
	if err != nil {
		t.Fatal(err)
	}
	return body, record.Checksum(body)
}

// referenced returns the payloads of a partition's records that carry
// transaction id's reference, in offset order.
func referenced(t *testing.T, b *Broker, stream string, id uint64) []string {
	t.Helper()
	part := partitionOf(t, b, stream, 0)
	var out []string
	err := engineSink{b}.Scan(txn.Target{Stream: stream}, 0, func(_ uint64, body []byte) {
		if ref, _, ok := txn.Reference(body); ok && ref == id {
			view, err := record.Parse(body)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(view.Payload))
		}
	})
	if err != nil {
		t.Fatalf("scan %s: %v (log end %d)", stream, err, part.Log().Committed())
	}
	return out
}

func groupPosition(t *testing.T, b *Broker) uint64 {
	t.Helper()
	served, err := b.OpenGroup([]byte("in"), 0, []byte("etl"), GroupSpec{Type: consumer.TypeStreaming})
	if err != nil {
		t.Fatal(err)
	}
	return served.Consumer().Committed()
}

// txnWorkload publishes a record to each of two streams (two to "a") in a
// transaction and commits it with the group etl of stream in at 3. It
// returns the transaction's id and whether the commit was answered.
func txnWorkload(t *testing.T, b *Broker) (uint64, bool) {
	id, err := b.BeginTxn(1, "", 0)
	if err != nil {
		return 0, false
	}
	for _, stream := range []string{"a", "b", "a"} {
		body, crc := txnBody(t, stream)
		ticket, _, err := b.AppendToTxn(1, id, partitionOf(t, b, stream, 0), body, crc)
		if err != nil {
			return id, false
		}
		<-ticket.Done()
		if ticket.Err() != nil {
			return id, false
		}
	}
	_, err = b.EndTxn(1, "", id, true, []TxnGroupCommit{{Stream: "in", Group: "etl", Offset: 3}})
	return id, err == nil
}

// TestTxnCommitSurvivesACrashAtEveryWrite cuts the power at every write
// of a two-stream transaction with a group commit, the engine's writes
// (partitions, group checkpoints) and the coordinator's alike: after
// recovery it is all visible once with the group moved, or none of it.
func TestTxnCommitSurvivesACrashAtEveryWrite(t *testing.T) {
	for k := int64(0); ; k++ {
		mem := vfs.NewMemFS()
		cut := crashtest.CutAtWrite(mem, k)
		cut.Pause()
		b, err := Open(txnConfig(cut.FS()))
		if err != nil {
			t.Fatal(err)
		}
		produceN(t, b, "in", 3)
		partitionOf(t, b, "a", 0)
		partitionOf(t, b, "b", 0)
		cut.Count()
		id, answered := txnWorkload(t, b)
		_ = b.Close()
		if !cut.Cut() {
			if !answered || k < 10 {
				t.Fatalf("no cut after %d writes and the commit answered %v", k, answered)
			}
			return
		}
		for keep, image := range []*vfs.MemFS{cut.Image(), cut.Image().CrashClone(vfs.CrashOptions{Seed: uint64(k), KeepUnsynced: 0.5})} {
			t.Run(fmt.Sprintf("write%d/keep%d", k, keep), func(t *testing.T) {
				checkTxnRecovered(t, image.CrashClone(vfs.CrashOptions{}), id, answered)
			})
		}
	}
}

func checkTxnRecovered(t *testing.T, image *vfs.MemFS, id uint64, answered bool) {
	b, err := Open(txnConfig(image))
	if err != nil {
		t.Fatalf("recovery: %v", err)
	}
	defer b.Close()
	if open := b.OpenTxns(); len(open) != 0 {
		t.Fatalf("recovery left transactions open: %+v", open)
	}
	a, bs := referenced(t, b, "a", id), referenced(t, b, "b", id)
	position := groupPosition(t, b)
	if len(a)+len(bs) == 0 {
		if answered || position != 0 {
			t.Fatalf("nothing visible, yet the commit was answered (%v) or the group moved to %d", answered, position)
		}
		return
	}
	if !slices.Equal(a, []string{"a", "a"}) || !slices.Equal(bs, []string{"b"}) || position != 3 {
		t.Fatalf("after recovery a=%v b=%v group at %d; want each record once and the group at 3", a, bs, position)
	}
	end := partitionOf(t, b, "a", 0).Log().Committed()
	out, err := b.EndTxn(2, "", id, true, nil)
	if err != nil || !out.Committed || len(out.Ranges) != 2 || partitionOf(t, b, "a", 0).Log().Committed() != end {
		t.Fatalf("repeated commit after recovery: %+v, %v", out, err)
	}
}

func TestTxnLimitsAndOwnership(t *testing.T) {
	cfg := txnConfig(vfs.NewMemFS())
	cfg.Transactions.MaxOpen = 2
	b := openTestBroker(t, cfg)
	first, err := b.BeginTxn(1, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.BeginTxn(1, "", 0); err != nil {
		t.Fatal(err)
	}
	_, err = b.BeginTxn(2, "", 0)
	var retry *RetryableError
	if !errors.Is(err, ErrBusy) || !errors.As(err, &retry) {
		t.Fatalf("begin over MaxOpen: %v, want a retryable ErrBusy", err)
	}
	body, crc := txnBody(t, "x")
	if _, _, err := b.AppendToTxn(2, first, partitionOf(t, b, "a", 0), body, crc); !errors.Is(err, txn.ErrUnknown) {
		t.Fatalf("append from another connection: %v, want txn.ErrUnknown", err)
	}
	if _, err := b.EndTxn(1, "", first, true, []TxnGroupCommit{{Stream: "a", Group: "g", Offset: 99}}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("group commit past the partition's end: %v, want ErrInvalidArgument", err)
	}
	if out, err := b.EndTxn(1, "", first, true, nil); err != nil || !out.Committed || len(out.Ranges) != 0 {
		t.Fatalf("empty commit: %+v, %v", out, err)
	}
}

// BenchmarkTxnCommit10 measures transactions of 10 records to one
// partition, each record awaited, through the engine API.
func BenchmarkTxnCommit10(b *testing.B) {
	engine := openTestBroker(b, Config{})
	part := partitionOf(b, engine, "out", 0)
	body, crc := txnBody(b, "a record of a transaction, about a hundred bytes long in all, key and framing included")
	b.ReportAllocs()
	for b.Loop() {
		id, err := engine.BeginTxn(1, "", 0)
		if err != nil {
			b.Fatal(err)
		}
		for range 10 {
			ticket, _, err := engine.AppendToTxn(1, id, part, body, crc)
			if err != nil {
				b.Fatal(err)
			}
			<-ticket.Done()
		}
		if _, err := engine.EndTxn(1, "", id, true, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*10)/b.Elapsed().Seconds(), "records/s")
}
