package load

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/ironbus/ironbus/benchrig"
	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/wire"
)

// Run loads the broker at addr as config says and returns the figures.
// On an error the Result holds what was measured up to it.
func Run(ctx context.Context, config Config, addr string) (Result, error) {
	result := Result{ack: newLatencyHistogram(), e2e: newLatencyHistogram()}
	if err := config.check(); err != nil {
		return result, err
	}
	result.describe(&config)
	err := runMode(ctx, &config, addr, &result)
	result.figure()
	return result, err
}

// runMode runs the mode's phases.
func runMode(ctx context.Context, config *Config, addr string, result *Result) error {
	if err := prepareSubjects(ctx, config, addr); err != nil {
		return err
	}
	switch config.Mode {
	case Publish:
		return publish(ctx, config, addr, result)
	case Subscribe:
		if err := publish(ctx, config, addr, result); err != nil {
			return err
		}
		return consume(ctx, config, addr, result, result.Records, nil)
	}
	// round-trip: consumers run beside the producers and stop once they
	// have what the producers stored.
	var stored atomic.Uint64
	stored.Store(^uint64(0))
	consumed := make(chan error, 1)
	go func() { consumed <- consume(ctx, config, addr, result, 0, &stored) }()
	err := publish(ctx, config, addr, result)
	stored.Store(result.Records)
	return errors.Join(err, <-consumed)
}

// publish runs the producers and fills the publish figures of result.
func publish(ctx context.Context, config *Config, addr string, result *Result) error {
	var wait sync.WaitGroup
	var records atomic.Uint64
	errs := make(chan error, config.Producers)
	histograms := make([]*hdrhistogram.Histogram, config.Producers)
	began := time.Now()
	shape := producerShape{began: began}
	if config.Count == 0 {
		shape.deadline = began.Add(config.Duration)
	}
	if config.Rate > 0 {
		shape.interval = time.Duration(float64(time.Second) * float64(config.Producers) / config.Rate)
	}
	for i := range config.Producers {
		histograms[i] = newLatencyHistogram()
		share := shape
		if config.Count > 0 {
			share.count = config.Count / config.Producers
			if i < config.Count%config.Producers {
				share.count++
			}
		}
		share.index = i
		wait.Go(func() {
			n, err := runProducer(ctx, config, addr, share, histograms[i])
			records.Add(n)
			errs <- err
		})
	}
	wait.Wait()
	result.Seconds = time.Since(began).Seconds()
	result.Records = records.Load()
	for _, h := range histograms {
		result.ack.Merge(h)
	}
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// producerShape is one producer's share of the load.
type producerShape struct {
	began, deadline time.Time
	count           int           // 0: until deadline
	interval        time.Duration // open loop: one record due every interval; 0: closed loop
	index           int           // which producer: part of its message ids
}

// messageIDs makes a producer's message ids: the run's start, the
// producer and the sequence, so no two records of a run share one and a
// run against a live broker does not collide with an earlier run inside
// the dedup window.
type messageIDs struct {
	prefix []byte
	buffer []byte
}

func newMessageIDs(shape producerShape) *messageIDs {
	prefix := strconv.AppendInt([]byte("bench-"), shape.began.UnixNano(), 36)
	prefix = append(prefix, '-')
	prefix = strconv.AppendInt(prefix, int64(shape.index), 10)
	return &messageIDs{prefix: append(prefix, '-')}
}

func (m *messageIDs) next(sequence int) string {
	m.buffer = strconv.AppendInt(append(m.buffer[:0], m.prefix...), int64(sequence), 10)
	return string(m.buffer)
}

// runProducer publishes one connection's share, recording each ack's
// latency from when the record was due (sent, or scheduled with a rate).
func runProducer(ctx context.Context, config *Config, addr string, shape producerShape, latencies *hdrhistogram.Histogram) (uint64, error) {
	c, err := client.Dial(ctx, addr, config.clientOptions(config.Window))
	if err != nil {
		return 0, err
	}
	defer c.Close()
	producer := c.NewProducerTo(config.Subjects.destination(config.Stream),
		client.ProducerOptions{Window: config.Window, Compression: config.Payloads.Compression, Idempotence: config.Idempotence})
	var ids *messageIDs
	if config.MessageIDs {
		ids = newMessageIDs(shape)
	}
	subjects := config.Subjects.list()
	// When each sequence was due, by sequence: a sequence's result is read
	// at most two windows after it was sent (one in flight, one in the
	// results channel), plus the one being read.
	due := make([]atomic.Int64, config.Window*2+16)
	// Our own window, taken before a record's due time is read, so the
	// latency of a closed loop starts when the record could go out, not
	// while it waited for an earlier ack.
	window := make(chan struct{}, config.Window)
	var acked uint64
	var failure error
	results := make(chan struct{})
	go func() {
		defer close(results)
		for result := range producer.Results() {
			<-window
			if result.Err != nil {
				failure = result.Err
				continue
			}
			acked++
			sent := time.Unix(0, due[result.Sequence%uint64(len(due))].Load())
			_ = latencies.RecordValue(max(time.Since(sent).Microseconds(), 1))
		}
	}()
	pace := benchrig.NewPace(shape.began, shape.interval)
	payload := make([]byte, config.PayloadBytes)
	position := 0
	for sequence := 0; shape.count == 0 || sequence < shape.count; sequence++ {
		window <- struct{}{}
		at := time.Now()
		if !shape.deadline.IsZero() && !at.Before(shape.deadline) {
			break
		}
		if shape.interval > 0 {
			at = pace.Await(sequence)
		}
		due[sequence%len(due)].Store(at.UnixNano())
		position = config.Payloads.fill(payload, position)
		binary.LittleEndian.PutUint64(payload, uint64(at.UnixNano()))
		record := client.Record{Payload: payload}
		if ids != nil {
			record.MessageID = ids.next(sequence)
		}
		if subjects != nil {
			// Sequences are per producer: every producer spreads its share
			// over all the subjects.
			record.Subject = subjects[sequence%len(subjects)]
		}
		if err := producer.Send(ctx, record); err != nil {
			break
		}
	}
	closeErr := producer.Close()
	<-results
	return acked, errors.Join(failure, closeErr)
}

// consume reads want records (or, with stored set, until the consumers
// have what the producers stored) and fills the consume figures; with
// stored set it also records each record's end-to-end latency from its
// stamped send time.
func consume(ctx context.Context, config *Config, addr string, result *Result, want uint64, stored *atomic.Uint64) error {
	var total consumeCounts
	var wait sync.WaitGroup
	var mu sync.Mutex
	errs := make(chan error, config.Consumers)
	began := time.Now()
	for i := range config.Consumers {
		wait.Go(func() {
			h := newLatencyHistogram()
			err := runConsumer(ctx, config, addr, i, &total, want, stored, h)
			if stored != nil {
				mu.Lock()
				result.e2e.Merge(h)
				mu.Unlock()
			}
			errs <- err
		})
	}
	wait.Wait()
	result.ConsumedRecords = total.delivered.Load()
	if config.Subjects.ConsumerFilter() != "" {
		result.TraversedRecords = total.traversed.Load()
	}
	result.ConsumeSeconds = time.Since(began).Seconds()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// consumeCounts are the consumers' progress: records delivered, and
// records traversed (delivered, plus skipped by a subject filter). A
// consumer stops on traversal, which reaches what was stored whatever
// the filter lets through.
type consumeCounts struct {
	delivered, traversed atomic.Uint64
}

// runConsumer is one consuming connection. Work-tier consumers share one
// group; streaming consumers each read everything through a group of
// their own (a streaming position is per reader).
func runConsumer(ctx context.Context, config *Config, addr string, index int, total *consumeCounts, want uint64,
	stored *atomic.Uint64, latencies *hdrhistogram.Histogram) error {
	c, err := client.Dial(ctx, addr, config.clientOptions(0))
	if err != nil {
		return err
	}
	defer c.Close()
	group, kind := "bench-"+string(config.Mode), client.GroupWork
	if config.Tier == Streaming {
		group, kind = fmt.Sprintf("bench-%s-%d", config.Mode, index), client.GroupStreaming
		if want > 0 {
			want *= uint64(config.Consumers) // every streaming reader reads it all
		}
	}
	options := client.FetchOptions{Type: kind, MaxRecords: 1000, Wait: 100 * time.Millisecond, Filter: config.Subjects.ConsumerFilter()}
	idle := 0
	for {
		target := want
		if stored != nil {
			target = stored.Load()
		}
		if total.traversed.Load() >= target || idle > 20 {
			return nil
		}
		batch, err := c.Fetch(ctx, config.Stream, group, options)
		var refused *wire.Error
		if errors.As(err, &refused) && refused.Code == wire.CodeNotFound && stored != nil {
			time.Sleep(10 * time.Millisecond) // beside the producers: their first record creates the stream
			continue
		}
		if err != nil {
			return err
		}
		for _, gap := range batch.Gaps {
			if gap.Reason == client.GapFiltered {
				total.traversed.Add(gap.To - gap.From)
			}
		}
		if len(batch.Messages) == 0 {
			if len(batch.Gaps) == 0 && stored != nil && stored.Load() != ^uint64(0) {
				idle++ // the producers are done: give up after ~2 s of nothing
			}
			continue
		}
		idle = 0
		if stored != nil {
			now := time.Now()
			for _, m := range batch.Messages {
				sent := time.Unix(0, int64(binary.LittleEndian.Uint64(m.Payload)))
				_ = latencies.RecordValue(max(now.Sub(sent).Microseconds(), 1))
			}
		}
		total.delivered.Add(uint64(len(batch.Messages)))
		total.traversed.Add(uint64(len(batch.Messages)))
		last := batch.Messages[len(batch.Messages)-1]
		if kind == client.GroupStreaming {
			_, err = c.Commit(ctx, config.Stream, group, last.Partition, last.Offset+1)
		} else {
			_, err = c.Ack(ctx, config.Stream, group, batch.Messages...)
		}
		if err != nil {
			return err
		}
	}
}
