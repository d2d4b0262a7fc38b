package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/segment"
)

// TestCorruptionInLiveDataDirIsQuarantinedAndReported corrupts the data
// directory a killed broker left (a bit flip in a sealed segment, another
// sealed segment truncated, a zeroed range in the active one, a damaged
// group checkpoint, a bit flip in a dead-letter segment), then restarts the broker on it: it starts, serves
// every record outside the damage, and recovery-report.json accounts for
// exactly the records verify found lost.
func TestCorruptionInLiveDataDirIsQuarantinedAndReported(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	args := []string{"serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0", "--segment-bytes", "64KiB", "--max-deliver", "1"}
	broker := ironbus.Serve(t, args...)
	acked := produceUntil(t, broker.Addr(), 3_000, 256, 0, nil)
	settleSomeWork(t, broker.Addr())
	// Small batches last: damage in the active segment is told from a
	// torn write only by later commit frames that prove it was synced.
	// The active segment must hold enough small batches that its middle
	// is followed by many: a roll near the end would leave it a few, and
	// the zeroed range would then be the unvouched tail (a torn write by
	// every sign recovery has, documented in OPERATIONS.md).
	logDir := filepath.Join(dataDir, "streams", "orders", "0")
	for round := 0; round == 0 || (activeDataBytes(t, logDir) < 24<<10 && round < 40); round++ {
		for offset, payload := range produceUntil(t, broker.Addr(), 150, 2, 0, nil) {
			acked[offset] = payload
		}
	}
	broker.Kill()

	segments, _ := filepath.Glob(filepath.Join(logDir, "*.seg"))
	deadLetters, _ := filepath.Glob(filepath.Join(dataDir, "deadletters", "streams", "orders", "0", "*.seg"))
	if len(segments) < 3 || len(deadLetters) == 0 {
		t.Fatalf("%d segments, %d dead-letter segments: the workload did not reach every file kind", len(segments), len(deadLetters))
	}
	flipFileByte(t, segments[0], 4096+100)
	truncateMiddle(t, segments[1])
	zeroMiddle(t, segments[len(segments)-1], 64)
	flipFileByte(t, filepath.Join(logDir, "checkpoints", "group-work.ckpt"), 12)
	flipFileByte(t, deadLetters[0], 4096+60)

	lost := verifiedLoss(t, dataDir)
	restarted := broker.Restart()
	stored := readAllRecords(t, restarted.Addr())
	present := map[uint64]string{}
	for _, message := range stored {
		present[message.Offset] = string(message.Payload)
	}
	for offset, payload := range acked {
		got, ok := present[offset]
		switch {
		case lost[offset] && ok:
			t.Fatalf("offset %d was reported lost but is served", offset)
		case !lost[offset] && (!ok || got != payload):
			t.Fatalf("undamaged offset %d (%s) came back as %q (present %v)", offset, payload, got, ok)
		}
	}
	if len(lost) == 0 {
		t.Fatal("verify reported no loss for a flipped bit in a sealed segment")
	}
	checkGroupsStillServe(t, restarted.Addr())
	restarted.Stop(syscall.SIGTERM)
	checkReportAccounts(t, dataDir, lost)
	if logs := restarted.Logs(); !strings.Contains(logs, "damaged checkpoint") || !strings.Contains(logs, "damage found reading a sealed segment") {
		t.Fatalf("the broker log does not name the damage:\n%s", logs)
	}
	t.Logf("%d acknowledged, %d lost to the injected damage (reported), %d served", len(acked), len(lost), len(stored))
}

// settleSomeWork acks records through group work, nacks some so they
// move to the dead-letter queue (max-deliver 1), and waits for the
// group's checkpoints.
func settleSomeWork(t *testing.T, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for round := 0; round < 3; round++ {
		batch, err := c.Fetch(ctx, "orders", "work", client.FetchOptions{MaxRecords: 100})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Ack(ctx, "orders", "work", batch.Messages...); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // one checkpoint per round
	}
	batch, err := c.Fetch(ctx, "orders", "work", client.FetchOptions{MaxRecords: 20})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Nack(ctx, "orders", "work", 0, batch.Messages...); err != nil {
		t.Fatal(err)
	}
	// The next fetch finds them poisoned and moves them.
	if _, err := c.Fetch(ctx, "orders", "work", client.FetchOptions{MaxRecords: 10, Wait: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond)
}

// verifiedLoss runs verify on the stopped, damaged directory and returns
// the offsets of orders/0 it reports lost.
func verifiedLoss(t *testing.T, dataDir string) map[uint64]bool {
	t.Helper()
	result := runCLI(t, "verify", "--data-dir", dataDir, "--json")
	expectCode(t, result, exitDamage)
	var output struct {
		Logs           []segment.LogReport `json:"logs"`
		DeadLetterLogs []segment.LogReport `json:"dead_letter_logs"`
	}
	if err := json.Unmarshal([]byte(result.stdout), &output); err != nil {
		t.Fatal(err)
	}
	lost := map[uint64]bool{}
	sawCheckpoint := false
	for _, event := range output.Logs[0].Events {
		sawCheckpoint = sawCheckpoint || event.Reason == segment.ReasonCorruptCheckpoint
		if !event.DataLoss || event.Records == 0 {
			continue
		}
		for offset := event.FirstOffset; offset <= event.LastOffset; offset++ {
			lost[offset] = true
		}
	}
	if !sawCheckpoint || len(output.DeadLetterLogs) == 0 || output.DeadLetterLogs[0].LossRecords == 0 {
		t.Fatalf("verify missed the checkpoint or dead-letter damage:\n%s", result.stdout)
	}
	return lost
}

// checkGroupsStillServe: the group with the damaged checkpoint resumes
// (from its previous copy) and the damaged dead-letter queue serves what
// it still holds.
func checkGroupsStillServe(t *testing.T, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	work, err := c.Fetch(ctx, "orders", "work", client.FetchOptions{MaxRecords: 10, Wait: 200 * time.Millisecond})
	if err != nil || len(work.Messages) == 0 {
		t.Fatalf("group work after its checkpoint was damaged: %d records, %v", len(work.Messages), err)
	}
	if _, err := c.Fetch(ctx, ".dlq.orders", "audit", client.FetchOptions{MaxRecords: 100, Wait: 200 * time.Millisecond}); err != nil {
		t.Fatalf("dead-letter queue after damage: %v", err)
	}
}

// checkReportAccounts: recovery-report.json counts exactly the records
// verify found lost, and names the damaged checkpoint.
func checkReportAccounts(t *testing.T, dataDir string, lost map[uint64]bool) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dataDir, "recovery-report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var report segment.RecoveryReport
	if err := json.Unmarshal(data, &report); err != nil {
		t.Fatal(err)
	}
	for _, log := range report.Logs {
		if log.Stream != "orders" {
			continue
		}
		sawCheckpoint := false
		for _, event := range log.Events {
			sawCheckpoint = sawCheckpoint || event.Reason == segment.ReasonCorruptCheckpoint
		}
		if log.LossRecords != uint64(len(lost)) || !sawCheckpoint {
			t.Fatalf("recovery-report.json counts %d lost records (verify: %d), checkpoint reported %v:\n%s",
				log.LossRecords, len(lost), sawCheckpoint, data)
		}
		return
	}
	t.Fatalf("recovery-report.json has no orders log:\n%s", data)
}

// zeroMiddle zeroes length bytes halfway through a segment's data.
func zeroMiddle(t *testing.T, name string, length int) {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	at := 4096 + (dataEnd(data)-4096)/2
	clear(data[at : at+length])
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// truncateMiddle cuts a segment halfway through its data.
func truncateMiddle(t *testing.T, name string) {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(name, int64(4096+(dataEnd(data)-4096)/2)); err != nil {
		t.Fatal(err)
	}
}

// activeDataBytes is how much record data the newest segment of logDir
// holds (as far as it has reached the page cache).
func activeDataBytes(t *testing.T, logDir string) int {
	t.Helper()
	segments, _ := filepath.Glob(filepath.Join(logDir, "*.seg"))
	if len(segments) == 0 {
		return 0
	}
	data, err := os.ReadFile(segments[len(segments)-1])
	if err != nil {
		t.Fatal(err)
	}
	return dataEnd(data) - 4096
}

func dataEnd(data []byte) int {
	end := len(data)
	for end > 4096 && data[end-1] == 0 {
		end--
	}
	return end
}
