//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/internal/crashtest"
)

// The kill -9 harness of idempotent producers: several pipelined
// producers with stable names publish numbered records to the partitions
// of one stream while the real broker is killed with SIGKILL at random
// moments and restarted on the same data directory and port. The
// producers are never told: they reconnect, announce themselves again and
// resend what was not acknowledged; halfway through, the stream is purged
// under load just before a kill. One of them also restarts itself now
// and then (a new Client and Producer of the same name), as a process
// that restarts resumes from the broker's ProducerInfo positions.
//
// The oracle is the send log of each producer (payload "p<i>-<n>" for its
// n-th Send) and the Result of each Send, checked against the whole log
// read back: every acknowledged record is stored exactly once, at the
// offset its ack named (a duplicate's ack names the first copy, which is
// the only copy); no stored record was never sent; each producer's
// records are stored in send order; no Send fails. (Records the purge
// deleted are exempt from being present, nothing else.)
//
// IRONBUS_IDEMPOTENT_CYCLES sets the number of kills (10 by default, 3
// with -short; make soak: 200); IRONBUS_SEED replays the kill timing.

const (
	idempotentStream     = "idem"
	idempotentPartitions = 2
	idempotentProducers  = 4
	// idempotentRestartEvery is how many Sends the restarting producer
	// makes between its own restarts.
	idempotentRestartEvery = 2500
	// Each producer sends bursts of idempotentBurst records with a pause
	// between them: about 5,000 records a second each.
	idempotentBurst = 32
	idempotentPause = 6 * time.Millisecond
)

func TestIdempotentProducersKill9(t *testing.T) {
	cycles := 10
	if testing.Short() {
		cycles = 3
	}
	seed, cycles := crashtest.Seed(t), crashtest.Count(t, "IRONBUS_IDEMPOTENT_CYCLES", cycles)
	t.Logf("seed %d (replay with IRONBUS_SEED=%d), %d kill cycles", seed, seed, cycles)
	random := rand.New(rand.NewPCG(seed, seed^0x1de7))

	addr := freeLoopbackAddr(t)
	broker := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", addr, "--segment-bytes", "1MiB")
	setup, err := client.Dial(context.Background(), addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := setup.CreateStream(context.Background(), idempotentStream, client.StreamSettings{Partitions: idempotentPartitions}); err != nil {
		t.Fatal(err)
	}
	setup.Close()

	ctx, stop := context.WithCancel(context.Background())
	writers := make([]*idempotentWriter, idempotentProducers)
	var load sync.WaitGroup
	for i := range writers {
		writers[i] = &idempotentWriter{index: i, addr: addr, restarts: i == 0}
		load.Go(func() { writers[i].run(ctx, t) })
	}
	purgedBelow := make([]uint64, idempotentPartitions)
	for cycle := range cycles {
		waitForAcks(t, writers, 20)
		if cycle == cycles/2 {
			// A purge under load, then (below) a kill: the producer
			// table must outlive the records it describes.
			purgedBelow = purgeIdempotentStream(t, addr)
		}
		time.Sleep(time.Duration(50+random.IntN(400)) * time.Millisecond)
		broker.Kill()
		time.Sleep(time.Duration(random.IntN(300)) * time.Millisecond)
		broker = broker.Restart()
		if t.Failed() {
			stop()
			load.Wait()
			t.Fatalf("cycle %d failed; replay with IRONBUS_SEED=%d", cycle, seed)
		}
	}
	waitForAcks(t, writers, 20)
	stop()
	load.Wait()

	stored := readIdempotentLog(t, addr)
	// One more kill and restart: what was read must come back the same.
	broker.Kill()
	broker = broker.Restart()
	if again := readIdempotentLog(t, addr); !sameLog(stored, again) {
		t.Fatalf("the log read after a further restart differs from the one read before it")
	}
	acked, duplicates, failed := checkIdempotentLog(t, writers, stored, purgedBelow)
	t.Logf("%d kill -9 cycles: %d records stored, %d acknowledged (%d as duplicates), %d failed Sends; replay with IRONBUS_SEED=%d",
		cycles, countStored(stored), acked, duplicates, failed, seed)
}

// purgeIdempotentStream purges the stream and returns, per partition, the
// offset below which its records are gone.
func purgeIdempotentStream(t *testing.T, addr string) []uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	state, err := c.PurgeStream(ctx, idempotentStream)
	if err != nil {
		t.Fatal(err)
	}
	below := make([]uint64, idempotentPartitions)
	for i, partition := range state.Partitions {
		below[i] = partition.First
	}
	return below
}

// freeLoopbackAddr is a loopback address with a port free now, so that a
// restarted broker serves where the producers redial.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	return listener.Addr().String()
}

// idempotentWriter is one producer of the harness and its oracle: what it
// sent (its n-th Send carries "p<index>-<n>") and the Result of each Send.
type idempotentWriter struct {
	index    int
	addr     string
	restarts bool // restarts its Client and Producer every idempotentRestartEvery Sends

	mu      sync.Mutex
	sent    int
	results []client.Result // results[n] is the Result of Send n
	acks    int
}

func (w *idempotentWriter) name() string { return fmt.Sprintf("kill-p%d", w.index) }

func (w *idempotentWriter) partition() uint32 { return uint32(w.index % idempotentPartitions) }

// run sends until ctx ends, restarting itself when it is the restarting
// writer, and stops early (failing t) if its producer gives up.
func (w *idempotentWriter) run(ctx context.Context, t *testing.T) {
	for ctx.Err() == nil {
		if !w.incarnation(ctx, t) {
			return
		}
	}
}

// incarnation is one Client and Producer of the writer's name: it sends
// until ctx ends (or, for the restarting writer, idempotentRestartEvery
// Sends), then closes the producer, which waits for every Result. It
// reports whether the writer may go on.
func (w *idempotentWriter) incarnation(ctx context.Context, t *testing.T) bool {
	var c *client.Client
	for { // the broker may be down right now: a restarting process retries
		var err error
		dialCtx, cancel := context.WithTimeout(ctx, time.Second)
		c, err = client.Dial(dialCtx, w.addr, client.Options{})
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer c.Close()
	producer := c.NewProducerTo(client.ToPartition(idempotentStream, w.partition()),
		client.ProducerOptions{Name: w.name(), Window: 32, ReconnectTimeout: 30 * time.Second})
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for result := range producer.Results() {
			w.mu.Lock()
			w.results = append(w.results, result)
			if result.Err == nil {
				w.acks++
			}
			w.mu.Unlock()
		}
	}()
	healthy := true
	for sends := 0; ctx.Err() == nil && (!w.restarts || sends < idempotentRestartEvery); sends++ {
		w.mu.Lock()
		n := w.sent
		w.mu.Unlock()
		err := producer.Send(ctx, client.Record{Payload: []byte(fmt.Sprintf("p%d-%d", w.index, n))})
		if err != nil {
			if ctx.Err() == nil {
				t.Errorf("producer %s: Send %d: %v", w.name(), n, err)
				healthy = false
			}
			break
		}
		w.mu.Lock()
		w.sent++
		w.mu.Unlock()
		if n%idempotentBurst == idempotentBurst-1 {
			// Paced, so a long run's oracle fits in memory; a burst still
			// fills the window, so every kill finds records in flight.
			time.Sleep(idempotentPause)
		}
	}
	_ = producer.Close()
	<-drained
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.results) != w.sent {
		t.Errorf("producer %s: %d Sends accepted, %d Results", w.name(), w.sent, len(w.results))
		return false
	}
	return healthy
}

// waitForAcks waits until every writer has at least more acks than now,
// so each kill lands on producers that made progress since the last one.
func waitForAcks(t *testing.T, writers []*idempotentWriter, more int) {
	t.Helper()
	targets := make([]int, len(writers))
	for i, w := range writers {
		w.mu.Lock()
		targets[i] = w.acks + more
		w.mu.Unlock()
	}
	deadline := time.Now().Add(60 * time.Second)
	for i, w := range writers {
		for {
			w.mu.Lock()
			acks := w.acks
			w.mu.Unlock()
			if acks >= targets[i] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("producer %s made no progress for 60 s (%d acks)", w.name(), acks)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// storedRecord is one record of the log read back.
type storedRecord struct {
	offset  uint64
	payload string
}

// readIdempotentLog reads every partition of the stream from its first
// record through a new streaming group.
func readIdempotentLog(t *testing.T, addr string) [][]storedRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reader := fmt.Sprintf("check-%d", time.Now().UnixNano())
	stored := make([][]storedRecord, idempotentPartitions)
	for partition := range stored {
		for {
			batch, err := c.Fetch(ctx, idempotentStream, reader,
				client.FetchOptions{Type: client.GroupStreaming, Partition: uint32(partition), MaxRecords: 5000})
			if err != nil {
				t.Fatalf("reading partition %d back: %v", partition, err)
			}
			if len(batch.Messages) == 0 {
				break
			}
			for _, m := range batch.Messages {
				stored[partition] = append(stored[partition], storedRecord{offset: m.Offset, payload: string(m.Payload)})
			}
		}
	}
	return stored
}

func sameLog(a, b [][]storedRecord) bool {
	for partition := range a {
		if len(a[partition]) != len(b[partition]) {
			return false
		}
		for i := range a[partition] {
			if a[partition][i] != b[partition][i] {
				return false
			}
		}
	}
	return true
}

func countStored(stored [][]storedRecord) int {
	total := 0
	for _, records := range stored {
		total += len(records)
	}
	return total
}

// checkIdempotentLog is the oracle; it returns how many Sends were
// acknowledged, how many of those as duplicates, and how many failed.
func checkIdempotentLog(t testing.TB, writers []*idempotentWriter, stored [][]storedRecord, purgedBelow []uint64) (acked, duplicates, failed int) {
	t.Helper()
	type place struct {
		partition uint32
		offset    uint64
	}
	found := map[string]place{}
	for partition, records := range stored {
		lastOf := map[int]int{} // writer → the last number seen on this partition
		for i, r := range records {
			if i > 0 && r.offset <= records[i-1].offset {
				t.Errorf("partition %d: offset %d after %d", partition, r.offset, records[i-1].offset)
			}
			writer, n, ok := parseIdempotentPayload(r.payload)
			if !ok || writer >= len(writers) || n >= writers[writer].sent {
				t.Errorf("partition %d offset %d: %q was never sent", partition, r.offset, r.payload)
				continue
			}
			if uint32(partition) != writers[writer].partition() {
				t.Errorf("partition %d offset %d: %q belongs on partition %d", partition, r.offset, r.payload, writers[writer].partition())
			}
			if first, twice := found[r.payload]; twice {
				t.Errorf("%q stored twice: at %d and at %d", r.payload, first.offset, r.offset)
				continue
			}
			found[r.payload] = place{uint32(partition), r.offset}
			if last, seen := lastOf[writer]; seen && n <= last {
				t.Errorf("partition %d offset %d: %q stored after p%d-%d (out of send order)", partition, r.offset, r.payload, writer, last)
			}
			lastOf[writer] = n
		}
	}
	for _, w := range writers {
		for n, result := range w.results {
			payload := fmt.Sprintf("p%d-%d", w.index, n)
			where, present := found[payload]
			if result.Err != nil {
				// The broker always comes back well within the producers'
				// ReconnectTimeout: no Send has a reason to fail.
				failed++
				t.Errorf("%s failed (stored: %v): %v", payload, present, result.Err)
				continue
			}
			acked++
			if result.Ack.Duplicate {
				duplicates++
			}
			switch {
			case !present && result.Ack.Offset < purgedBelow[w.partition()] && !result.Ack.OffsetUnknown:
				// acknowledged before the purge, which deleted it
			case !present:
				t.Errorf("%s acknowledged at %d/%d (duplicate %v) but not stored", payload, result.Ack.Partition, result.Ack.Offset, result.Ack.Duplicate)
			case result.Ack.Duplicate && result.Ack.OffsetUnknown:
				// stored, and the broker said it no longer knows where
			case result.Ack.Partition != where.partition || result.Ack.Offset != where.offset:
				t.Errorf("%s acknowledged at %d/%d (duplicate %v) but stored at %d/%d",
					payload, result.Ack.Partition, result.Ack.Offset, result.Ack.Duplicate, where.partition, where.offset)
			}
		}
	}
	return acked, duplicates, failed
}

// parseIdempotentPayload splits "p<writer>-<n>".
func parseIdempotentPayload(payload string) (writer, n int, ok bool) {
	rest, found := strings.CutPrefix(payload, "p")
	if !found {
		return 0, 0, false
	}
	writerText, numberText, found := strings.Cut(rest, "-")
	if !found {
		return 0, 0, false
	}
	writer, errWriter := strconv.Atoi(writerText)
	n, errNumber := strconv.Atoi(numberText)
	if errors.Join(errWriter, errNumber) != nil || writer < 0 || n < 0 {
		return 0, 0, false
	}
	return writer, n, true
}

// oracleRecorder counts the failures checkIdempotentLog reports instead
// of failing the test.
type oracleRecorder struct {
	testing.TB
	failures []string
}

func (r *oracleRecorder) Helper() {}

func (r *oracleRecorder) Errorf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

func (r *oracleRecorder) Logf(string, ...any) {}

// TestIdempotentOracleCatchesEachViolation feeds the harness's oracle
// logs that break one property each: it must report every one.
func TestIdempotentOracleCatchesEachViolation(t *testing.T) {
	ack := func(offset uint64, duplicate bool) client.Result {
		return client.Result{Ack: client.Ack{Partition: 0, Offset: offset, Duplicate: duplicate}}
	}
	writer := func(results ...client.Result) []*idempotentWriter {
		return []*idempotentWriter{{index: 0, sent: len(results), results: results}}
	}
	log := func(records ...storedRecord) [][]storedRecord { return [][]storedRecord{records, nil} }
	none := []uint64{0, 0}
	cases := []struct {
		name    string
		writers []*idempotentWriter
		stored  [][]storedRecord
	}{
		{"stored twice", writer(ack(0, false), ack(1, false)), log(storedRecord{0, "p0-0"}, storedRecord{1, "p0-1"}, storedRecord{2, "p0-1"})},
		{"acknowledged, missing", writer(ack(0, false), ack(1, false)), log(storedRecord{0, "p0-0"})},
		{"out of send order", writer(ack(1, false), ack(0, false)), log(storedRecord{0, "p0-1"}, storedRecord{1, "p0-0"})},
		{"never sent", writer(ack(0, false)), log(storedRecord{0, "p0-0"}, storedRecord{1, "p0-7"})},
		{"duplicate pointing elsewhere", writer(ack(0, false), ack(0, true)), log(storedRecord{0, "p0-0"}, storedRecord{1, "p0-1"})},
		{"failed Send", writer(ack(0, false), client.Result{Err: client.ErrConnectionLost}), log(storedRecord{0, "p0-0"})},
	}
	for _, c := range cases {
		recorder := &oracleRecorder{TB: t}
		checkIdempotentLog(recorder, c.writers, c.stored, none)
		if len(recorder.failures) == 0 {
			t.Errorf("%s: the oracle reported nothing", c.name)
		}
	}
	valid := &oracleRecorder{TB: t}
	checkIdempotentLog(valid, writer(ack(0, false), ack(1, true)), log(storedRecord{0, "p0-0"}, storedRecord{1, "p0-1"}), none)
	if len(valid.failures) > 0 {
		t.Errorf("a valid log was reported: %v", valid.failures)
	}
}
