package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/wire"
)

// benchResult is the --json object of bench: flat, one number per field.
type benchResult struct {
	Schema          string  `json:"schema"`
	Mode            string  `json:"mode"`
	Broker          string  `json:"broker"` // "started" or "live"
	BrokerProfile   string  `json:"broker_profile,omitempty"`
	Durability      string  `json:"durability"`
	TLS             bool    `json:"tls"` // the load's connections speak TLS
	Producers       int     `json:"producers"`
	Consumers       int     `json:"consumers"`
	PubWindow       int     `json:"pubwindow"`
	PayloadBytes    int     `json:"payload_bytes"`
	Compression     string  `json:"compression"`
	PayloadFile     string  `json:"payload_file,omitempty"`
	ConsumeTier     string  `json:"consume_tier,omitempty"`
	Records         uint64  `json:"records"`
	Seconds         float64 `json:"seconds"`
	MsgsPerSec      float64 `json:"msgs_per_sec"`
	MBPerSec        float64 `json:"mb_per_sec"`
	AckP50          float64 `json:"ack_p50_us"`
	AckP99          float64 `json:"ack_p99_us"`
	AckP999         float64 `json:"ack_p999_us"`
	AckMax          float64 `json:"ack_max_us"`
	ConsumedRecords uint64  `json:"consumed_records,omitempty"`
	ConsumeSeconds  float64 `json:"consume_seconds,omitempty"`
	ConsumePerSec   float64 `json:"consume_msgs_per_sec,omitempty"`
	Subjects        int     `json:"subjects,omitempty"`
	Filter          string  `json:"filter,omitempty"`
	FilterSparse    int     `json:"filter_sparse,omitempty"`
	// With a filter, ConsumedRecords counts the matching records delivered
	// and TraversedRecords those plus the ones the filter skipped.
	TraversedRecords uint64  `json:"traversed_records,omitempty"`
	TraversePerSec   float64 `json:"traversed_per_sec,omitempty"`
	E2EP50           float64 `json:"e2e_p50_us,omitempty"`
	E2EP99           float64 `json:"e2e_p99_us,omitempty"`
	E2EP999          float64 `json:"e2e_p999_us,omitempty"`
	E2EMax           float64 `json:"e2e_max_us,omitempty"`
	Fsyncs           uint64  `json:"fsyncs"`
	FsyncsPerSec     float64 `json:"fsyncs_per_sec"`
	RecordsPerFsync  float64 `json:"records_per_fsync"`
	RSSBytes         int64   `json:"rss_bytes"`
	DiskPerPayload   float64 `json:"disk_bytes_per_payload_byte"`

	diskBytes int64
	ack, e2e  *hdrhistogram.Histogram
}

// newLatencyHistogram covers 1 µs to 60 s at 3 significant digits.
func newLatencyHistogram() *hdrhistogram.Histogram { return hdrhistogram.New(1, 60_000_000, 3) }

func (r *benchResult) fill(plan *benchPlan) {
	r.Schema, r.Mode, r.Durability = benchSchema, plan.mode, plan.durability
	r.Producers, r.PubWindow, r.PayloadBytes = plan.producers, plan.pubWindow, plan.payloadBytes
	r.Broker, r.BrokerProfile, r.TLS = "started", plan.profile, plan.connect.TLS != nil
	r.Compression, r.PayloadFile = plan.payloads.compression.String(), plan.payloadOptions.payloadFile
	if plan.addr != "" {
		r.Broker = "live"
	}
	if plan.mode != "publish" {
		r.Consumers, r.ConsumeTier = plan.consumers, plan.consumeTier
	}
	if r.Seconds > 0 {
		r.MsgsPerSec = float64(r.Records) / r.Seconds
		r.MBPerSec = r.MsgsPerSec * float64(plan.payloadBytes) / 1e6
		r.FsyncsPerSec = float64(r.Fsyncs) / r.Seconds
	}
	if r.ConsumeSeconds > 0 {
		r.ConsumePerSec = float64(r.ConsumedRecords) / r.ConsumeSeconds
		r.TraversePerSec = float64(r.TraversedRecords) / r.ConsumeSeconds
	}
	r.Subjects, r.FilterSparse = plan.subjectOptions.subjects, plan.subjectOptions.filterSparse
	r.Filter = plan.subjectOptions.consumerFilter()
	if r.Fsyncs > 0 {
		r.RecordsPerFsync = float64(r.Records) / float64(r.Fsyncs)
	}
	if payload := int64(r.Records) * int64(plan.payloadBytes); payload > 0 && r.diskBytes > 0 {
		r.DiskPerPayload = float64(r.diskBytes) / float64(payload)
	}
	r.AckP50, r.AckP99, r.AckP999, r.AckMax = percentiles(r.ack)
	r.E2EP50, r.E2EP99, r.E2EP999, r.E2EMax = percentiles(r.e2e)
}

func percentiles(h *hdrhistogram.Histogram) (p50, p99, p999, maximum float64) {
	if h == nil || h.TotalCount() == 0 {
		return 0, 0, 0, 0
	}
	return float64(h.ValueAtQuantile(50)), float64(h.ValueAtQuantile(99)), float64(h.ValueAtQuantile(99.9)), float64(h.Max())
}

func (r *benchResult) print(opts *globalOptions, plan *benchPlan) {
	out := opts.stdout
	broker := r.Broker
	if r.BrokerProfile != "" {
		broker += " (profile " + r.BrokerProfile + ")"
	}
	fmt.Fprintf(out, "%s: %d producers × window %d, %d B payloads, durability %s, broker %s\n",
		r.Mode, r.Producers, r.PubWindow, r.PayloadBytes, r.Durability, broker)
	fmt.Fprintf(out, "  payloads    %s\n", plan.payloads.describe(r.PayloadFile))
	fmt.Fprintf(out, "  published   %d records in %.2f s: %.0f msg/s, %.1f MB/s\n", r.Records, r.Seconds, r.MsgsPerSec, r.MBPerSec)
	fmt.Fprintf(out, "  ack latency p50 %.0f µs  p99 %.0f µs  p99.9 %.0f µs  max %.0f µs\n", r.AckP50, r.AckP99, r.AckP999, r.AckMax)
	if r.Subjects > 0 {
		fmt.Fprintf(out, "  subjects    %d distinct, routed by subject (%s → %s)\n", r.Subjects, benchBindingPattern, plan.stream)
	}
	if r.ConsumedRecords > 0 {
		fmt.Fprintf(out, "  consumed    %d records (%s tier, %d consumers) in %.2f s: %.0f msg/s\n",
			r.ConsumedRecords, r.ConsumeTier, r.Consumers, r.ConsumeSeconds, r.ConsumePerSec)
	}
	if r.Filter != "" {
		fmt.Fprintf(out, "  filter      %s: %d records traversed, %.0f traversed/s (%.0f matching delivered/s)\n",
			r.Filter, r.TraversedRecords, r.TraversePerSec, r.ConsumePerSec)
	}
	if r.E2EP50 > 0 {
		fmt.Fprintf(out, "  end to end  p50 %.0f µs  p99 %.0f µs  p99.9 %.0f µs  max %.0f µs\n", r.E2EP50, r.E2EP99, r.E2EP999, r.E2EMax)
	}
	if r.Broker == "started" {
		fmt.Fprintf(out, "  broker      %.0f fdatasyncs/s, %.1f records per fdatasync, peak RSS %.1f MiB, %.2f disk bytes per payload byte\n",
			r.FsyncsPerSec, r.RecordsPerFsync, float64(r.RSSBytes)/(1<<20), r.DiskPerPayload)
	}
	if plan.durability != "sync" {
		fmt.Fprintf(out, "  NOTE: --durability %s acknowledges before the fdatasync; a power cut loses acknowledged records\n", plan.durability)
	}
}

// runLoad runs the mode's phases against target.
func runLoad(ctx context.Context, plan *benchPlan, target *benchTarget, _ *progress) (benchResult, error) {
	result := benchResult{ack: newLatencyHistogram(), e2e: newLatencyHistogram()}
	if err := prepareSubjects(ctx, plan, target.addr); err != nil {
		return result, err
	}
	switch plan.mode {
	case "publish":
		return result, publish(ctx, plan, target.addr, &result)
	case "subscribe":
		if err := publish(ctx, plan, target.addr, &result); err != nil {
			return result, err
		}
		return result, consume(ctx, plan, target.addr, &result, result.Records, nil)
	}
	// round-trip: consumers run beside the producers and stop once they
	// have what the producers stored.
	var stored atomic.Uint64
	stored.Store(^uint64(0))
	consumed := make(chan error, 1)
	go func() { consumed <- consume(ctx, plan, target.addr, &result, 0, &stored) }()
	err := publish(ctx, plan, target.addr, &result)
	stored.Store(result.Records)
	return result, errors.Join(err, <-consumed)
}

// publish runs the producers and fills the publish figures of result.
func publish(ctx context.Context, plan *benchPlan, addr string, result *benchResult) error {
	var wait sync.WaitGroup
	var records atomic.Uint64
	errs := make(chan error, plan.producers)
	histograms := make([]*hdrhistogram.Histogram, plan.producers)
	began := time.Now()
	deadline := time.Time{}
	if plan.length > 0 {
		deadline = began.Add(plan.length)
	}
	for i := range plan.producers {
		histograms[i] = newLatencyHistogram()
		share := 0
		if plan.count > 0 {
			share = plan.count / plan.producers
			if i < plan.count%plan.producers {
				share++
			}
		}
		wait.Go(func() {
			n, err := runProducer(ctx, plan, addr, producerShape{began: began, deadline: deadline, count: share}, histograms[i])
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

type producerShape struct {
	began, deadline time.Time
	count           int // 0: until deadline
}

// runProducer publishes one connection's share, recording each ack's
// latency from when the record was due (sent, or scheduled with --rate).
func runProducer(ctx context.Context, plan *benchPlan, addr string, shape producerShape, latencies *hdrhistogram.Histogram) (uint64, error) {
	c, err := client.Dial(ctx, addr, plan.clientOptions(plan.pubWindow))
	if err != nil {
		return 0, err
	}
	defer c.Close()
	producer := c.NewProducerTo(plan.subjectOptions.destination(plan.stream), client.ProducerOptions{Window: plan.pubWindow, Compression: plan.payloads.compression})
	subjects := plan.subjectOptions.subjectList()
	// When each sequence was due, by sequence: a sequence's result is read
	// at most two windows after it was sent (one in flight, one in the
	// results channel), plus the one being read.
	due := make([]atomic.Int64, plan.pubWindow*2+16)
	// Our own window, taken before a record's due time is read, so the
	// latency of a closed loop starts when the record could go out, not
	// while it waited for an earlier ack.
	window := make(chan struct{}, plan.pubWindow)
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
	interval := time.Duration(0)
	if plan.rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(plan.producers) / plan.rate)
	}
	payload := make([]byte, plan.payloadBytes)
	position := 0
	for sequence := 0; shape.count == 0 || sequence < shape.count; sequence++ {
		window <- struct{}{}
		now := time.Now()
		if !shape.deadline.IsZero() && !now.Before(shape.deadline) {
			break
		}
		at := now
		if interval > 0 {
			at = shape.began.Add(time.Duration(sequence) * interval)
			if now.Before(at) {
				// The window let this record go before it was due, so any
				// lateness from here is the generator's own: Go's timers
				// wake up to a millisecond late on a kernel with 1 ms
				// epoll timeouts. Count from the actual send then; a record
				// the broker held back (no window by its due time) still
				// counts from when it was due.
				time.Sleep(time.Until(at))
				at = time.Now()
			}
		}
		due[sequence%len(due)].Store(at.UnixNano())
		position = plan.payloads.fill(payload, position)
		binary.LittleEndian.PutUint64(payload, uint64(at.UnixNano()))
		record := client.Record{Payload: payload}
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
// e2e it records each record's latency from its stamped send time.
func consume(ctx context.Context, plan *benchPlan, addr string, result *benchResult, want uint64, stored *atomic.Uint64) error {
	var total consumeCounts
	var wait sync.WaitGroup
	var mu sync.Mutex
	errs := make(chan error, plan.consumers)
	began := time.Now()
	for i := range plan.consumers {
		wait.Go(func() {
			h := newLatencyHistogram()
			err := runConsumer(ctx, plan, addr, i, &total, want, stored, h)
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
	if plan.subjectOptions.consumerFilter() != "" {
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
func runConsumer(ctx context.Context, plan *benchPlan, addr string, index int, total *consumeCounts, want uint64,
	stored *atomic.Uint64, latencies *hdrhistogram.Histogram) error {
	c, err := client.Dial(ctx, addr, plan.clientOptions(0))
	if err != nil {
		return err
	}
	defer c.Close()
	group, kind := "bench-"+plan.mode, client.GroupWork
	if plan.consumeTier == "streaming" {
		group, kind = fmt.Sprintf("bench-%s-%d", plan.mode, index), client.GroupStreaming
		if want > 0 {
			want *= uint64(plan.consumers) // every streaming reader reads it all
		}
	}
	idle := 0
	for {
		target := want
		if stored != nil {
			target = stored.Load()
		}
		if total.traversed.Load() >= target || idle > 20 {
			return nil
		}
		batch, err := c.Fetch(ctx, plan.stream, group, client.FetchOptions{Type: kind, MaxRecords: 1000, Wait: 100 * time.Millisecond,
			Filter: plan.subjectOptions.consumerFilter()})
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
			if len(batch.Gaps) > 0 {
				continue
			}
			if stored != nil && stored.Load() != ^uint64(0) {
				idle++ // the producers are done: give up after ~2 s of nothing
			}
			continue
		}
		idle = 0
		now := time.Now()
		if stored != nil {
			for _, m := range batch.Messages {
				sent := time.Unix(0, int64(binary.LittleEndian.Uint64(m.Payload)))
				_ = latencies.RecordValue(max(now.Sub(sent).Microseconds(), 1))
			}
		}
		total.delivered.Add(uint64(len(batch.Messages)))
		total.traversed.Add(uint64(len(batch.Messages)))
		last := batch.Messages[len(batch.Messages)-1]
		if kind == client.GroupStreaming {
			_, err = c.Commit(ctx, plan.stream, group, last.Partition, last.Offset+1)
		} else {
			_, err = c.Ack(ctx, plan.stream, group, batch.Messages...)
		}
		if err != nil {
			return err
		}
	}
}
