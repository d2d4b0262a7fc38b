package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/wire"
)

// residentMemory is one sample of /proc/PID/status, in bytes.
type residentMemory struct{ total, anonymous, file int64 }

func readResident(pid int) (residentMemory, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return residentMemory{}, err
	}
	var sample residentMemory
	fields := map[string]*int64{"VmRSS:": &sample.total, "RssAnon:": &sample.anonymous, "RssFile:": &sample.file}
	for line := range strings.Lines(string(status)) {
		words := strings.Fields(line)
		if len(words) == 3 && fields[words[0]] != nil {
			kilobytes, err := strconv.ParseInt(words[1], 10, 64)
			if err != nil {
				return residentMemory{}, err
			}
			*fields[words[0]] = kilobytes << 10
		}
	}
	return sample, nil
}

// sampleResident records the peak of each figure until stop closes.
func sampleResident(pid int, stop <-chan struct{}) <-chan residentMemory {
	peaks := make(chan residentMemory, 1)
	go func() {
		var peak residentMemory
		ticker := time.NewTicker(10 * time.Millisecond)
		defer ticker.Stop()
		for {
			if sample, err := readResident(pid); err == nil {
				peak.total = max(peak.total, sample.total)
				peak.anonymous = max(peak.anonymous, sample.anonymous)
				peak.file = max(peak.file, sample.file)
			}
			select {
			case <-stop:
				peaks <- peak
				return
			case <-ticker.C:
			}
		}
	}()
	return peaks
}

// TestRAMCeilingHoldsUnderLoad runs an --edge broker under a 64 MiB ceiling
// and loads every pool at once: pipelined producers on every connection
// the edge values allow, spread over streams, records larger than the read
// buffer, consumers fetching. The broker's anonymous resident memory (its
// heap, stacks and slabs; mapped segment files are page cache the kernel
// reclaims and are reported apart) must stay under the ceiling throughout.
func TestRAMCeilingHoldsUnderLoad(t *testing.T) {
	if ironbus.Emulator() != "" {
		t.Skip("under emulation the broker's resident memory includes the emulator's own (about 25 MiB)")
	}
	const ceiling = 64 << 20
	// --max-half-open 32 and --max-half-open-per-source 32: this test
	// loads memory, not the gate. Its 28 dials at once outrun edge-tiny's
	// 16 handshakes in flight (8 per address) on a loaded machine, and the
	// SDK does not retry a handshake closed to make room.
	broker := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0",
		"--edge", "--ram-ceiling", "64MiB", "--max-half-open", "32", "--max-half-open-per-source", "32")
	stop := make(chan struct{})
	peaks := sampleResident(broker.Pid(), stop)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := 0
	count := func(n int) { mu.Lock(); acked += n; mu.Unlock() }
	errs := make(chan error, 64)
	for i := range 24 {
		wg.Go(func() {
			n, err := loadProducer(ctx, broker.Addr(), fmt.Sprint("load-", i%8), 1<<10, 3_000)
			count(n)
			errs <- err
		})
	}
	for i := range 2 {
		wg.Go(func() {
			n, err := loadProducer(ctx, broker.Addr(), fmt.Sprint("large-", i), 900<<10, 24)
			count(n)
			errs <- err
		})
	}
	for i := range 2 {
		wg.Go(func() { errs <- loadConsumer(ctx, broker.Addr(), fmt.Sprint("load-", i)) })
	}
	wg.Wait()
	close(stop)
	peak := <-peaks
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("%v\nbroker log:\n%s", err, broker.Logs())
		}
	}
	t.Logf("%d records acknowledged; peak resident %.1f MiB: anonymous %.1f MiB, file-backed %.1f MiB (ceiling %d MiB)",
		acked, mebibytes(peak.total), mebibytes(peak.anonymous), mebibytes(peak.file), ceiling>>20)
	if peak.anonymous == 0 {
		t.Fatal("no sample of the broker's memory was read")
	}
	if peak.anonymous > ceiling {
		t.Fatalf("anonymous resident memory peaked at %.1f MiB, over the 64 MiB ceiling", mebibytes(peak.anonymous))
	}
	if code := broker.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("graceful stop exited %d:\n%s", code, broker.Logs())
	}
}

func mebibytes(n int64) float64 { return float64(n) / (1 << 20) }

// loadProducer sends count records of size bytes through one pipelined
// connection and returns how many were acknowledged.
func loadProducer(ctx context.Context, addr, stream string, size, count int) (int, error) {
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	producer := c.NewProducer(stream, client.ProducerOptions{})
	acked := make(chan int, 1)
	var firstErr error
	go func() {
		n := 0
		for result := range producer.Results() {
			if result.Err == nil {
				n++
			} else if firstErr == nil {
				firstErr = result.Err
			}
		}
		acked <- n
	}()
	payload := bytes.Repeat([]byte{'x'}, size)
	for range count {
		if err := producer.Send(ctx, client.Record{Payload: payload}); err != nil {
			break
		}
	}
	_ = producer.Close()
	n := <-acked
	if n != count {
		return n, fmt.Errorf("%s: %d of %d records of %d bytes acknowledged (first error: %v)", stream, n, count, size, firstErr)
	}
	return n, nil
}

// loadConsumer fetches and acknowledges a stream until it stays empty.
func loadConsumer(ctx context.Context, addr, stream string) error {
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		return err
	}
	defer c.Close()
	for empty := 0; empty < 3; {
		result, err := c.Fetch(ctx, stream, "readers", client.FetchOptions{MaxRecords: 500, Wait: 200 * time.Millisecond})
		var refused *wire.Error
		if errors.As(err, &refused) && refused.Code == wire.CodeNotFound {
			time.Sleep(50 * time.Millisecond) // the producers have not created the stream yet
			continue
		}
		if err != nil {
			return fmt.Errorf("fetch %s: %w", stream, err)
		}
		if len(result.Messages) == 0 {
			empty++
			continue
		}
		empty = 0
		if _, err := c.Ack(ctx, stream, "readers", result.Messages...); err != nil {
			return fmt.Errorf("ack %s: %w", stream, err)
		}
	}
	return nil
}
