package main

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/wire"
)

// dirBytes sums the sizes of the files under root.
func dirBytes(t *testing.T, root string) int64 {
	t.Helper()
	var total int64
	err := filepath.Walk(root, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			total += info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// consumeAll fetches and acks every record of stream for group, returning
// what it read and the gaps it was told about.
func consumeAll(t *testing.T, ctx context.Context, c *client.Client, stream, group string) (int, []client.Gap) {
	t.Helper()
	read := 0
	var gaps []client.Gap
	for {
		batch, err := c.Fetch(ctx, stream, group, client.FetchOptions{MaxRecords: 500, Wait: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		gaps = append(gaps, batch.Gaps...)
		if len(batch.Messages) == 0 {
			return read, gaps
		}
		if _, err := c.Ack(ctx, stream, group, batch.Messages...); err != nil {
			t.Fatal(err)
		}
		read += len(batch.Messages)
	}
}

// TestDiskBudgetDropNewOnTmpfs: the real binary with --disk-budget refuses
// producers with the typed, retryable no-space error before the budget is
// used, keeps serving reads and acks, resumes writes by itself once the
// group's acks let retention free space, and restarts over the budget.
func TestDiskBudgetDropNewOnTmpfs(t *testing.T) {
	mount := mountTmpfs(t, 32<<20)
	dataDir := filepath.Join(mount, "data")
	args := []string{"serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0", "--segment-bytes", "256KiB",
		"--disk-budget", "4MiB", "--retention-interval", "200ms"}
	broker := ironbus.Serve(t, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := dialConsumer(t, broker.Addr())
	if _, err := c.CreateStream(ctx, "orders", client.StreamSettings{}); err != nil {
		t.Fatal(err) // a consumer never creates its stream
	}
	if _, err := c.Fetch(ctx, "orders", "readers", client.FetchOptions{MaxRecords: 1, Wait: 0}); err != nil {
		t.Fatal(err) // the group exists before the records, so it pins them
	}
	payload := incompressible(t, 1000)
	stored := 0
	var full *wire.Error
	for ; stored < 20_000; stored++ {
		_, err := c.Produce(ctx, "orders", client.Record{Payload: payload})
		if errors.As(err, &full) {
			break
		}
		if err != nil {
			t.Fatalf("after %d records: %v", stored, err)
		}
	}
	if full == nil || full.Code != wire.CodeNoSpace || !full.Retryable || full.RetryAfter == 0 {
		t.Fatalf("the budget answered %+v after %d records; want a retryable no-space error with a retry hint", full, stored)
	}
	if used := dirBytes(t, dataDir); used > 4<<20 {
		t.Fatalf("the data directory holds %d bytes, over the 4 MiB budget", used)
	}
	if read, _ := consumeAll(t, ctx, c, "orders", "readers"); read != stored {
		t.Fatalf("read %d of %d records at the budget", read, stored)
	}
	resumed := false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, err := c.Produce(ctx, "orders", client.Record{Payload: payload}); err == nil {
			resumed = true
			break
		}
	}
	if !resumed {
		t.Fatal("writes did not resume after the group acknowledged everything")
	}
	if code := broker.Stop(unix.SIGTERM); code != 0 {
		t.Fatalf("stop exited %d", code)
	}
	// A smaller budget than what is on disk: the broker still starts and
	// serves reads, refusing only new records.
	args[len(args)-3] = "3MiB"
	restarted := ironbus.Serve(t, append(args, "--disk-headroom", "256KiB")...)
	reader := dialConsumer(t, restarted.Addr())
	batch, err := reader.Fetch(ctx, "orders", "fresh", client.FetchOptions{MaxRecords: 10})
	if err != nil || len(batch.Messages) == 0 {
		t.Fatalf("after a restart with a smaller budget: %d records, %v", len(batch.Messages), err)
	}
	t.Logf("%d records of 1,000 B fit a 4 MiB budget (256 KiB segments)", stored)
}

// TestDiskBudgetDropOldestOnTmpfs: under drop-oldest the broker deletes
// the oldest whole segments to stay within the budget; a group that had
// not read them gets a gap advisory and continues from the new start.
func TestDiskBudgetDropOldestOnTmpfs(t *testing.T) {
	mount := mountTmpfs(t, 32<<20)
	dataDir := filepath.Join(mount, "data")
	broker := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0", "--segment-bytes", "256KiB",
		"--disk-budget", "4MiB", "--disk-full-policy", "drop-oldest", "--retention-interval", "200ms")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := dialConsumer(t, broker.Addr())
	if _, err := c.CreateStream(ctx, "logs", client.StreamSettings{}); err != nil {
		t.Fatal(err) // a consumer never creates its stream
	}
	if _, err := c.Fetch(ctx, "logs", "late", client.FetchOptions{MaxRecords: 1, Wait: 0}); err != nil {
		t.Fatal(err)
	}
	payload := incompressible(t, 1000)
	refusals := 0
	for stored := 0; stored < 12_000; {
		_, err := c.Produce(ctx, "logs", client.Record{Payload: payload})
		if err != nil {
			if refusals++; refusals > 1000 {
				t.Fatalf("writes refused %d times after %d records: drop-oldest is not making room (%v)", refusals, stored, err)
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		stored++
	}
	if used := dirBytes(t, dataDir); used > 4<<20 {
		t.Fatalf("the data directory holds %d bytes, over the 4 MiB budget", used)
	}
	read, gaps := consumeAll(t, ctx, c, "logs", "late")
	if len(gaps) == 0 || gaps[0].From != 0 || read == 0 {
		t.Fatalf("the group read %d records with gaps %+v; want a gap from 0 then records", read, gaps)
	}
	t.Logf("12,000 records of 1,000 B through a 4 MiB budget: %d bytes on disk, gap %d..%d, %d transient refusals",
		dirBytes(t, dataDir), gaps[0].From, gaps[0].To, refusals)
}

// incompressible returns size random bytes. Tests that fill a disk budget
// or a backlog with records need payloads the SDK's default lz4 stores as
// they are: zeros shrink about 6:1 and never reach the bytes the test
// counts on.
func incompressible(t *testing.T, size int) []byte {
	t.Helper()
	payload := make([]byte, size)
	if _, err := rand.Read(payload); err != nil {
		t.Fatal(err)
	}
	return payload
}
