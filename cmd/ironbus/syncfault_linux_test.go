//go:build linux && !arm && !386

package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/segment/vfs/lazyfs"
	"github.com/ironbus/ironbus/wire"
)

// TestLiveSyncFailureFreezesTheLog fails the disk under a running broker:
// first only its syncs (fsync and fdatasync return EIO), then the whole
// disk. Either way the log must freeze read-only, producers must get the
// typed frozen error saying so, nothing sent after the failure may be
// acknowledged, and a restart on a healthy disk (after a power cut that
// drops everything unsynced) must hold every record acknowledged before.
func TestLiveSyncFailureFreezesTheLog(t *testing.T) {
	for _, fault := range []lazyfs.Fault{lazyfs.FailSync, lazyfs.DeadDisk} {
		t.Run(fault.String(), func(t *testing.T) { checkLiveSyncFailure(t, fault) })
	}
}

func checkLiveSyncFailure(t *testing.T, fault lazyfs.Fault) {
	disk, mount := mountLazyDisk(t)
	serveArgs := []string{"serve", "--data-dir", filepath.Join(mount, "data"), "--addr", "127.0.0.1:0", "--io-mode", "buffered"}
	broker := ironbus.Serve(t, serveArgs...)
	acked := produceUntil(t, broker.Addr(), 2_000, 64, 0, nil)
	if len(acked) != 2_000 {
		t.Fatalf("%d of 2,000 acknowledged on a healthy disk", len(acked))
	}

	disk.SetFault(fault)
	frozen := expectFrozen(t, broker.Addr())
	// A pipelined burst after the freeze: every record refused.
	if late := produceUntil(t, broker.Addr(), 500, 64, 0, nil); len(late) != 0 {
		t.Fatalf("%d records acknowledged after the disk failed (%s)", len(late), fault)
	}
	t.Logf("%s: produce answered %q", fault, frozen.Message)
	if fault == lazyfs.FailSync {
		checkFrozenLogReadable(t, broker.Addr(), acked)
	}
	// Readiness says so too: 503, naming the frozen log.
	if status, body := httpGet(t, broker.HealthAddr(), "/readyz"); status != 503 || !strings.Contains(body, "frozen: orders/0") {
		t.Fatalf("/readyz after the disk failed (%s): %d %q, want 503 frozen: orders/0 …", fault, status, body)
	}

	broker.Kill()
	disk.SetFault(lazyfs.Healthy)
	if _, err := disk.CutPower(lazyfs.Cut{Mode: lazyfs.DropUnsynced}); err != nil {
		t.Fatal(err)
	}
	restarted := broker.Restart()
	checkCutReport(t, filepath.Join(mount, "data"), 1, lazyfs.Cut{Mode: lazyfs.DropUnsynced}, &powercutTally{})
	checkAcknowledged(t, acked, readAllRecords(t, restarted.Addr()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ack, err := dialConsumer(t, restarted.Addr()).Produce(ctx, "orders", client.Record{Payload: []byte("after restart")})
	if err != nil {
		t.Fatalf("producing after the restart: %v", err)
	}
	if _, reused := acked[ack.Offset]; reused {
		t.Fatalf("offset %d reused after the restart", ack.Offset)
	}
	restarted.Kill() // its files on the mount are closed before the cleanup unmounts it
}

// expectFrozen produces one record at a time on the failed disk: each
// must be refused, and within a few tries (the first may meet the failing
// sync rather than the frozen log) with the typed, non-retryable frozen
// error that says the log is read-only.
func expectFrozen(t *testing.T, addr string) *wire.Error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Without idempotence: the producer registry would meet the failed
	// disk first (and freeze too); this test is about the log's freeze.
	c, err := client.Dial(ctx, addr, client.Options{Idempotence: client.IdempotenceOff})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var last error
	for attempt := range 5 {
		ack, err := c.Produce(ctx, "orders", client.Record{Payload: []byte(fmt.Sprint("after-", attempt))})
		if err == nil {
			t.Fatalf("attempt %d after the disk failed was acknowledged at offset %d", attempt, ack.Offset)
		}
		last = err
		var typed *wire.Error
		if errors.As(err, &typed) && typed.Code == wire.CodeFrozen {
			if typed.Retryable || !strings.Contains(typed.Message, "read-only") {
				t.Fatalf("frozen error %+v: want non-retryable, saying read-only", typed)
			}
			return typed
		}
	}
	t.Fatalf("five produces on a failed disk never got the frozen error; last: %v", last)
	return nil
}

// checkFrozenLogReadable: with only syncs failing, the records committed
// before the freeze are still served.
func checkFrozenLogReadable(t *testing.T, addr string, acked map[uint64]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	batch, err := dialConsumer(t, addr).Fetch(ctx, "orders", "frozen-reader",
		client.FetchOptions{Type: client.GroupStreaming, MaxRecords: 100})
	if err != nil || len(batch.Messages) != 100 {
		t.Fatalf("reading a frozen log: %d records, %v", len(batch.Messages), err)
	}
	for _, m := range batch.Messages {
		if acked[m.Offset] != string(m.Payload) {
			t.Fatalf("frozen log served offset %d as %q, acknowledged as %q", m.Offset, m.Payload, acked[m.Offset])
		}
	}
}
