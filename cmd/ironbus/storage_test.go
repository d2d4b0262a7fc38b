package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/wire"
)

func TestMemoryStorageNeedsConsentAndCap(t *testing.T) {
	cases := []struct {
		args []string
		says string
	}{
		{[]string{"--storage", "memory", "--memory-storage-cap", "32MiB"}, "add --accept-memory-storage-loss"},
		{[]string{"--storage", "memory", "--accept-memory-storage-loss"}, "needs --memory-storage-cap"},
		{[]string{"--storage", "memory", "--accept-memory-storage-loss", "--memory-storage-cap", "32MiB", "--data-dir", t.TempDir()}, "writes no files"},
		{[]string{"--storage", "memory", "--accept-memory-storage-loss", "--memory-storage-cap", "4MiB"}, "cannot hold two segments"},
		{[]string{"--storage", "tape"}, `"tape": want disk, memory`},
		{[]string{"--data-dir", t.TempDir(), "--accept-memory-storage-loss"}, "apply only to --storage memory"},
	}
	for _, c := range cases {
		result := runCLI(t, append([]string{"serve", "--addr", "127.0.0.1:0"}, c.args...)...)
		expectCode(t, result, exitUsage)
		if !strings.Contains(result.stderr, c.says) {
			t.Errorf("%v: does not say %q:\n%s", c.args, c.says, result.stderr)
		}
	}
	budget := runCLI(t, "serve", "--storage", "memory", "--accept-memory-storage-loss", "--memory-storage-cap", "32MiB", "--segment-bytes", "8MiB", "--print-budget")
	expectCode(t, budget, exitClean)
	if !strings.Contains(budget.stdout, "in-memory storage") || !strings.Contains(budget.stdout, "32 MiB  (--memory-storage-cap)") {
		t.Errorf("the budget does not count the stored bytes:\n%s", budget.stdout)
	}
}

// TestMemoryStorageRoundTripAndCap: records produced to a memory broker
// are read back; at the cap producers get the same retryable storage-full
// error as a full disk; a restart starts empty, as the log warned.
func TestMemoryStorageRoundTripAndCap(t *testing.T) {
	args := []string{"serve", "--addr", "127.0.0.1:0", "--storage", "memory", "--accept-memory-storage-loss",
		"--memory-storage-cap", "2MiB", "--segment-bytes", "1MiB"}
	broker := ironbus.Serve(t, args...)
	if !strings.Contains(broker.Logs(), "NOTHING IS DURABLE") {
		t.Fatalf("the startup log does not warn:\n%s", broker.Logs())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := dialConsumer(t, broker.Addr())
	payload := make([]byte, 1000)
	stored := 0
	var full *wire.Error
	for ; stored < 10_000; stored++ {
		_, err := c.Produce(ctx, "orders", client.Record{Payload: payload})
		if errors.As(err, &full) {
			break
		}
		if err != nil {
			t.Fatalf("after %d records: %v", stored, err)
		}
	}
	if full == nil || full.Code != wire.CodeNoSpace || !full.Retryable {
		t.Fatalf("the cap answered %+v after %d records; want the retryable storage-full error", full, stored)
	}
	if stored < 500 {
		t.Fatalf("only %d records of 1,000 B fitted a 2MiB cap", stored)
	}
	batch, err := c.Fetch(ctx, "orders", "readers", client.FetchOptions{MaxRecords: 100})
	if err != nil || len(batch.Messages) != 100 || batch.Messages[0].Offset != 0 {
		t.Fatalf("reading back: %d records, %v", len(batch.Messages), err)
	}
	expectCode(t, cliResult{code: broker.Stop(os.Interrupt)}, exitClean)

	restarted := broker.Restart()
	reader := dialConsumer(t, restarted.Addr())
	again, err := reader.Fetch(ctx, "orders", "readers", client.FetchOptions{MaxRecords: 10})
	if err == nil && len(again.Messages) > 0 {
		t.Fatalf("a restarted memory broker still had %d records", len(again.Messages))
	}
	t.Logf("%d records of 1,000 B filled a 2MiB memory cap with 1MiB segments", stored)
}
