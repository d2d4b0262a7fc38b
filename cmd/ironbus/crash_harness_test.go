//go:build unix

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
)

// The black-box crash harness: the real broker is killed with SIGKILL at
// random points while pipelined producers publish and a work group
// consumes; after every restart each acknowledged record must be there,
// in order and byte-identical, no offset may be reused, and the group's
// acknowledged progress must hold up to the documented redelivery (what
// was acked since its last checkpoint: CheckpointInterval plus the time
// its syncs take).
//
// IRONBUS_CRASH_CYCLES sets the number of kills (make test: 50, and 20
// per extra backend; make crash-test: 1,000); IRONBUS_SEED replays one run.

// checkpointSlack is how far before a kill acknowledged work may come back:
// the 200 ms checkpoint interval plus the checkpoint's own file syncs,
// which on a shared CI disk busy with the producers' fdatasyncs (and other
// test packages) were seen to take most of a second. The bound catches a
// group whose checkpoints stop being written, not a slow disk.
const checkpointSlack = 8 * time.Second

type crashLedger struct {
	mu      sync.Mutex
	acked   map[uint64]string // offset → payload, every acknowledged record
	payload map[string]uint64 // payload → offset, to catch a reused offset
	// consumed is the group's contiguous acknowledged prefix and when it
	// was reached, for the redelivery bound.
	consumedThrough uint64
	consumedAt      []consumedMark
	kills           []time.Time
}

type consumedMark struct {
	through uint64
	at      time.Time
}

func (l *crashLedger) recordAck(t *testing.T, offset uint64, payload string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if previous, taken := l.acked[offset]; taken && previous != payload {
		t.Errorf("offset %d acknowledged twice: %q, then %q", offset, previous, payload)
	}
	l.acked[offset] = payload
	l.payload[payload] = offset
}

// rewind notes that the group, after a restart, delivers again from
// offset to: work it had acknowledged from there on counts again only once
// it is acknowledged again, so every earlier mark is capped at to. Without
// this, a kill soon after a restart (before the re-acknowledged work was
// checkpointed) would blame the group for the previous kill's redelivery.
func (l *crashLedger) rewind(to uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if to >= l.consumedThrough {
		return
	}
	l.consumedThrough = to
	for i := range l.consumedAt {
		l.consumedAt[i].through = min(l.consumedAt[i].through, to)
	}
}

// throughAt returns the contiguous prefix the group had acknowledged at
// or before instant.
func (l *crashLedger) throughAt(instant time.Time) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	through := uint64(0)
	for _, mark := range l.consumedAt {
		if mark.at.After(instant) {
			break
		}
		through = mark.through
	}
	return through
}

func crashCycles(t *testing.T) int {
	if text := os.Getenv("IRONBUS_CRASH_CYCLES"); text != "" {
		cycles, err := strconv.Atoi(text)
		if err != nil || cycles < 1 {
			t.Fatalf("IRONBUS_CRASH_CYCLES=%q", text)
		}
		return cycles
	}
	if testing.Short() {
		return 10
	}
	if os.Getenv("IRONBUS_TEST_LOOP") != "" {
		return 20 // the per-backend reruns of make test; the main run does 50
	}
	return 50
}

func crashSeed(t *testing.T) uint64 {
	if text := os.Getenv("IRONBUS_SEED"); text != "" {
		seed, err := strconv.ParseUint(text, 10, 64)
		if err != nil {
			t.Fatalf("IRONBUS_SEED=%q", text)
		}
		return seed
	}
	return uint64(time.Now().UnixNano())
}

func TestCrashHarnessKill9(t *testing.T) {
	seed, cycles := crashSeed(t), crashCycles(t)
	t.Logf("seed %d (replay with IRONBUS_SEED=%d), %d kill cycles", seed, seed, cycles)
	random := rand.New(rand.NewPCG(seed, seed^0x5eed))
	dataDir := t.TempDir()
	ledger := &crashLedger{acked: map[uint64]string{}, payload: map[string]uint64{}}
	var maxRecovery time.Duration
	sequence := 0
	for cycle := range cycles {
		began := time.Now()
		broker := startBroker(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0", "--segment-bytes", "1MiB")
		maxRecovery = max(maxRecovery, time.Since(began))
		if cycle > 0 {
			checkCrashInvariants(t, broker.addr, ledger, cycle)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var load sync.WaitGroup
		for producer := range 2 {
			start := sequence + producer*1_000_000
			load.Go(func() { crashProducer(ctx, t, broker.addr, ledger, cycle, start) })
		}
		load.Go(func() { crashConsumer(ctx, broker.addr, ledger) })
		time.Sleep(time.Duration(20+random.IntN(300)) * time.Millisecond)
		_ = broker.cmd.Process.Signal(syscall.SIGKILL)
		killedAt := time.Now()
		<-broker.exited
		cancel()
		load.Wait()
		ledger.mu.Lock()
		ledger.kills = append(ledger.kills, killedAt)
		ledger.mu.Unlock()
		sequence += 2_000_000
		if t.Failed() {
			t.Fatalf("cycle %d failed; replay with IRONBUS_SEED=%d", cycle, seed)
		}
		if done := cycle + 1; done%100 == 0 && done < cycles {
			// A long run stopped early still says how far it got.
			ledger.mu.Lock()
			acknowledged := len(ledger.acked)
			ledger.mu.Unlock()
			t.Logf("%d of %d kill cycles: %d acknowledged records, 0 lost; slowest restart %v",
				done, cycles, acknowledged, maxRecovery.Round(time.Millisecond))
		}
	}
	broker := startBroker(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0", "--segment-bytes", "1MiB")
	checkCrashInvariants(t, broker.addr, ledger, cycles)
	t.Logf("%d kill -9 cycles: %d acknowledged records, 0 lost; group acknowledged through %d; slowest restart %v",
		cycles, len(ledger.acked), ledger.consumedThrough, maxRecovery.Round(time.Millisecond))
}

// crashRecordsPerCycle bounds what one producer publishes per cycle, so
// reading the whole log back after every kill stays cheap.
const crashRecordsPerCycle = 1500

// crashProducer publishes until the broker dies (or its share is sent),
// recording every ack. A small window paces it over the cycle, so kills
// land mid-batch, mid-roll and after it alike.
func crashProducer(ctx context.Context, t *testing.T, addr string, ledger *crashLedger, cycle, start int) {
	c, err := client.Dial(ctx, addr, client.Options{Window: 16})
	if err != nil {
		return
	}
	defer c.Close()
	producer := c.NewProducer("orders", client.ProducerOptions{Window: 16})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for result := range producer.Results() {
			if result.Err == nil {
				ledger.recordAck(t, result.Ack.Offset, fmt.Sprintf("c%d-m%d", cycle, start+int(result.Sequence)))
			}
		}
	}()
	for i := 0; ctx.Err() == nil && i < crashRecordsPerCycle; i++ {
		if producer.Send(ctx, client.Record{Payload: []byte(fmt.Sprintf("c%d-m%d", cycle, start+i))}) != nil {
			break
		}
	}
	_ = producer.Close()
	<-done
}

// crashConsumer works through the group in order, acknowledging batches,
// and notes how far its contiguous acknowledged prefix reached, and when.
func crashConsumer(ctx context.Context, addr string, ledger *crashLedger) {
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		return
	}
	defer c.Close()
	for ctx.Err() == nil {
		batch, err := c.Fetch(ctx, "orders", "crash", client.FetchOptions{MaxRecords: 200, Wait: 50 * time.Millisecond})
		if err != nil || len(batch.Messages) == 0 {
			if err != nil {
				return
			}
			continue
		}
		statuses, err := c.Ack(ctx, "orders", "crash", batch.Messages...)
		if err != nil {
			return
		}
		ledger.mu.Lock()
		for i, m := range batch.Messages {
			if statuses[i] == client.AckOK && m.Offset == ledger.consumedThrough {
				ledger.consumedThrough++
			}
		}
		ledger.consumedAt = append(ledger.consumedAt, consumedMark{through: ledger.consumedThrough, at: time.Now()})
		ledger.mu.Unlock()
	}
}

// checkCrashInvariants reads the whole log through a fresh group and the
// crash group's first delivery after a restart.
func checkCrashInvariants(t *testing.T, addr string, ledger *crashLedger, cycle int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reader := fmt.Sprint("check-", cycle)
	stored := map[uint64]string{}
	last, first := uint64(0), true
	for {
		batch, err := c.Fetch(ctx, "orders", reader, client.FetchOptions{Type: client.GroupStreaming, MaxRecords: 5000})
		if err != nil {
			t.Fatalf("cycle %d: reading back: %v", cycle, err)
		}
		if len(batch.Messages) == 0 {
			break
		}
		for _, m := range batch.Messages {
			if !first && m.Offset <= last {
				t.Fatalf("cycle %d: offset %d after %d", cycle, m.Offset, last)
			}
			first, last = false, m.Offset
			stored[m.Offset] = string(m.Payload)
		}
	}
	ledger.mu.Lock()
	for offset, payload := range ledger.acked {
		if stored[offset] != payload {
			ledger.mu.Unlock()
			t.Fatalf("cycle %d: acknowledged offset %d (%s) came back as %q", cycle, offset, payload, stored[offset])
		}
	}
	ledger.mu.Unlock()
	checkGroupProgress(ctx, t, c, ledger, cycle)
}

// checkGroupProgress: the crash group redelivers nothing it had
// acknowledged more than checkpointSlack before the last kill.
func checkGroupProgress(ctx context.Context, t *testing.T, c *client.Client, ledger *crashLedger, cycle int) {
	t.Helper()
	ledger.mu.Lock()
	killedAt := ledger.kills[len(ledger.kills)-1]
	ledger.mu.Unlock()
	held := ledger.throughAt(killedAt.Add(-checkpointSlack))
	batch, err := c.Fetch(ctx, "orders", "crash", client.FetchOptions{MaxRecords: 1, Lease: time.Millisecond})
	if err != nil {
		t.Fatalf("cycle %d: %v", cycle, err)
	}
	if len(batch.Messages) > 0 && batch.Messages[0].Offset < held {
		t.Fatalf("cycle %d: the group redelivered offset %d, acknowledged (through %d) over %v before the kill",
			cycle, batch.Messages[0].Offset, held, checkpointSlack)
	}
	// Hand the lease back so the consumer of the next cycle starts there.
	if len(batch.Messages) > 0 {
		_, _ = c.Nack(ctx, "orders", "crash", 0, batch.Messages...)
		ledger.rewind(batch.Messages[0].Offset)
	}
}
