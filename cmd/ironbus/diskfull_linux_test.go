package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/wire"
)

// mountTmpfs mounts a tmpfs of size bytes for the test, or skips the test
// where mounting is not allowed (not root, no mount namespace rights).
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.Itoa(size)); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): the disk-full test needs root", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// TestDiskFullOnTmpfs fills a small real filesystem: producers get a typed,
// retryable no-space error, consumers keep reading and acknowledging,
// writes resume by themselves once space is freed, and a restart while the
// disk is full still starts and serves.
func TestDiskFullOnTmpfs(t *testing.T) {
	mount := mountTmpfs(t, 6<<20)
	filler := filepath.Join(mount, "filler")
	if err := os.WriteFile(filler, make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(mount, "data")
	broker := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0", "--segment-bytes", "1MiB")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := dialConsumer(t, broker.Addr())
	stored := 0
	var full *wire.Error
	payload := make([]byte, 1000)
	for ; stored < 100_000; stored++ {
		_, err := c.Produce(ctx, "orders", client.Record{Payload: payload})
		if errors.As(err, &full) {
			break
		}
		if err != nil {
			t.Fatalf("after %d records: %v", stored, err)
		}
	}
	if full == nil || full.Code != wire.CodeNoSpace || !full.Retryable || full.RetryAfter == 0 {
		t.Fatalf("a full disk answered %+v after %d records; want a retryable storage-full error with a retry hint", full, stored)
	}
	batch, err := c.Fetch(ctx, "orders", "readers", client.FetchOptions{MaxRecords: 100})
	if err != nil || len(batch.Messages) != 100 {
		t.Fatalf("reading while full: %d records, %v", len(batch.Messages), err)
	}
	if statuses, err := c.Ack(ctx, "orders", "readers", batch.Messages...); err != nil || statuses[0] != client.AckOK {
		t.Fatalf("acknowledging while full: %v %v", statuses, err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	resumed := false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, err := c.Produce(ctx, "orders", client.Record{Payload: payload}); err == nil {
			resumed = true
			break
		}
	}
	if !resumed {
		t.Fatal("writes did not resume after space was freed")
	}
	if code := broker.Stop(unix.SIGTERM); code != 0 {
		t.Fatalf("stop exited %d", code)
	}

	// Fill it again, then restart: the broker must start and serve reads.
	if err := os.WriteFile(filler, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fill, err := os.OpenFile(filler, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for chunk := make([]byte, 64<<10); ; {
		if _, err := fill.Write(chunk); err != nil {
			break
		}
	}
	_ = fill.Close()
	restarted := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0", "--segment-bytes", "1MiB")
	reader := dialConsumer(t, restarted.Addr())
	batch, err = reader.Fetch(ctx, "orders", "readers", client.FetchOptions{MaxRecords: 10})
	if err != nil || len(batch.Messages) != 10 || batch.Messages[0].Offset != 100 {
		t.Fatalf("after a restart on a full disk: %d records from %v, %v", len(batch.Messages), firstOffset(batch), err)
	}
	t.Logf("%d records of 1,000 B filled the disk; no-space retry hint %v", stored, full.RetryAfter)
}

func firstOffset(batch client.FetchResult) any {
	if len(batch.Messages) == 0 {
		return "nothing"
	}
	return batch.Messages[0].Offset
}
