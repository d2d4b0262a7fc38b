// Package consumebench measures consuming stored records over loopback
// through the Go SDK: the streaming tier (DeliverBatch runs of stored
// frames, periodic commit) and work groups (leased fetches settled with
// one AckRange per fetch, several consumers).
package consumebench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironbus/ironbus/client"
)

// Result is one measurement.
type Result struct {
	Shape       string        `json:"shape"`
	RecordBytes int           `json:"record_bytes"`
	Consumers   int           `json:"consumers"`
	Records     uint64        `json:"records"`
	Elapsed     time.Duration `json:"elapsed_ns"`
	PerSecond   float64       `json:"records_per_sec"`
}

func (r Result) String() string {
	return fmt.Sprintf("%-10s %5d B  %2d consumer(s)  %9d records in %7.3fs  %11.0f msg/s  %7.1f MB/s",
		r.Shape, r.RecordBytes, r.Consumers, r.Records, r.Elapsed.Seconds(), r.PerSecond,
		r.PerSecond*float64(r.RecordBytes)/1e6)
}

// Fill stores count records of payloadBytes on stream through pipelined
// producers and returns the produce rate (records per second).
func Fill(addr, stream string, count, payloadBytes, producers int) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	began := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, producers)
	for p := range producers {
		share := count / producers
		if p == 0 {
			share += count % producers
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[p] = produce(ctx, addr, stream, share, payloadBytes)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return float64(count) / time.Since(began).Seconds(), nil
}

func produce(ctx context.Context, addr, stream string, count, payloadBytes int) error {
	c, err := client.Dial(ctx, addr, client.Options{ClientName: "consumebench-fill", Window: 4096})
	if err != nil {
		return err
	}
	defer c.Close()
	producer := c.NewProducer(stream, client.ProducerOptions{Window: 4096, Compression: client.CompressNone})
	go func() {
		for range producer.Results() { // Flush reports failures
		}
	}()
	record := client.Record{Payload: make([]byte, payloadBytes)}
	for range count {
		if err := producer.Send(ctx, record); err != nil {
			return err
		}
	}
	if err := producer.Flush(ctx); err != nil {
		return err
	}
	return producer.Close()
}

// Stream reads count records of stream with a new streaming group from
// the earliest offset, committing every 100 ms, and times it.
func Stream(addr, stream, group string, count, payloadBytes int) (Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.Options{ClientName: "consumebench-stream"})
	if err != nil {
		return Result{}, err
	}
	defer c.Close()
	reader, err := c.Stream(stream, group, client.StreamOptions{CommitEvery: 100 * time.Millisecond})
	if err != nil {
		return Result{}, err
	}
	began := time.Now()
	var records, checksum uint64
	for records < uint64(count) {
		batch, err := reader.Next(ctx)
		if err != nil {
			return Result{}, err
		}
		if len(batch.Messages) == 0 && len(batch.Gaps) == 0 {
			return Result{}, fmt.Errorf("consumebench: stream caught up after %d of %d records", records, count)
		}
		for i := range batch.Messages {
			checksum += uint64(len(batch.Messages[i].Payload)) // touch every message
		}
		records += uint64(len(batch.Messages))
	}
	if err := reader.Commit(ctx, reader.Position()); err != nil {
		return Result{}, err
	}
	elapsed := time.Since(began)
	if checksum != records*uint64(payloadBytes) {
		return Result{}, fmt.Errorf("consumebench: payload bytes %d, want %d", checksum, records*uint64(payloadBytes))
	}
	return Result{Shape: "streaming", RecordBytes: payloadBytes, Consumers: 1, Records: records,
		Elapsed: elapsed, PerSecond: float64(records) / elapsed.Seconds()}, nil
}

// WorkGroup consumes count records of stream with a new work group and
// consumers competing connections, each fetching up to batch records and
// settling each fetch with one AckRange, and times it.
func WorkGroup(addr, stream, group string, count, payloadBytes, consumers, batch int) (Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var done atomic.Uint64
	var wg sync.WaitGroup
	errs := make([]error, consumers)
	clients := make([]*client.Client, consumers)
	for i := range consumers {
		c, err := client.Dial(ctx, addr, client.Options{ClientName: "consumebench-work"})
		if err != nil {
			return Result{}, err
		}
		defer c.Close()
		clients[i] = c
	}
	began := time.Now()
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = work(ctx, c, stream, group, uint64(count), batch, &done)
		}()
	}
	wg.Wait()
	elapsed := time.Since(began)
	if err := errors.Join(errs...); err != nil {
		return Result{}, err
	}
	records := done.Load()
	return Result{Shape: "work-acked", RecordBytes: payloadBytes, Consumers: consumers, Records: records,
		Elapsed: elapsed, PerSecond: float64(records) / elapsed.Seconds()}, nil
}

func work(ctx context.Context, c *client.Client, stream, group string, count uint64, batch int, done *atomic.Uint64) error {
	opts := client.FetchOptions{MaxRecords: batch, MaxBytes: 4 << 20, Wait: 50 * time.Millisecond}
	for done.Load() < count {
		result, err := c.Fetch(ctx, stream, group, opts)
		if err != nil {
			return err
		}
		if len(result.Messages) == 0 {
			continue // others hold the rest, or it is all settled
		}
		from, to := result.Messages[0].Offset, result.Messages[0].Offset
		for _, m := range result.Messages {
			from, to = min(from, m.Offset), max(to, m.Offset)
		}
		status, err := c.AckRange(ctx, stream, group, 0, from, to+1)
		if err != nil {
			return err
		}
		if status != client.AckOK {
			return fmt.Errorf("consumebench: AckRange [%d, %d]: %v", from, to, status)
		}
		done.Add(uint64(len(result.Messages)))
	}
	return nil
}
