package main

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// consumeStreamName is the JetStream stream the consume rows read.
const consumeStreamName = "C1"

// natsLoadStore fills a fresh store directory with count messages: a
// server with the default sync interval takes async publishes (window
// 4,096), then shuts down, which flushes the store to disk. Loading at
// `always` speed (one fsync per message, ~4k/s here) would take most of a
// minute per run; the consume rows then run on a server restarted with
// `always` on this directory, so the records are on disk before the
// clock starts.
func natsLoadStore(dir string, count, size int) (storeDir string, err error) {
	if storeDir, err = os.MkdirTemp(dir, "peers-nats-consume-"); err != nil {
		return "", err
	}
	if err := natsFill(dir, storeDir, count, size); err != nil {
		return "", cleanupStore(storeDir, true, err)
	}
	return storeDir, nil
}

func natsFill(dir, storeDir string, count, size int) error {
	ns, err := startNATS(dir, storeDir, false)
	if err != nil {
		return err
	}
	defer ns.stop()
	if err := ns.freshStream(consumeStreamName); err != nil {
		return err
	}
	nc, js, err := connectJetStream(ns.url(), jetstream.WithPublishAsyncMaxPending(singleWindow))
	if err != nil {
		return err
	}
	defer nc.Close()
	payload := payloadOf(size)
	for range count {
		if _, err := js.PublishAsync(benchStreamSubject, payload, jetstream.WithStallWait(natsStallWait)); err != nil {
			return err
		}
	}
	if err := awaitAsyncComplete(js); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, consumeStreamName)
	if err != nil {
		return err
	}
	if stored := stream.CachedInfo().State.Msgs; stored != uint64(count) {
		return fmt.Errorf("nats: stored %d of %d messages", stored, count)
	}
	return nil
}

// natsWorkConsume drains count stored messages through one durable pull
// consumer with explicit acks, shared by consumers connections: each
// Fetches up to 1,000 and acks every message (the client's Ack, which the
// server does not answer), and the clock stops once the server shows
// nothing pending and nothing awaiting an ack. MaxAckPending is raised
// from its default of 1,000 so that it does not cap the consumers.
func natsWorkConsume(url string, consumers int, count uint64) (outcome, error) {
	admin, js, err := connectJetStream(url)
	if err != nil {
		return outcome{}, err
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	config := jetstream.ConsumerConfig{Durable: "work", AckPolicy: jetstream.AckExplicitPolicy,
		MaxAckPending: consumers * consumeFetchRecords * 4}
	consumer, err := js.CreateOrUpdateConsumer(ctx, consumeStreamName, config)
	if err != nil {
		return outcome{}, err
	}
	var fetched atomic.Uint64
	start := time.Now()
	result, err := inParallel(consumers, func(processed *atomic.Uint64) error {
		nc, js, err := connectJetStream(url)
		if err != nil {
			return err
		}
		defer nc.Close()
		mine, err := js.Consumer(ctx, consumeStreamName, "work")
		if err != nil {
			return err
		}
		for fetched.Load() < count {
			batch, err := mine.Fetch(consumeFetchRecords, jetstream.FetchMaxWait(100*time.Millisecond))
			if err != nil {
				return err
			}
			for message := range batch.Messages() {
				if err := message.Ack(); err != nil {
					return err
				}
				fetched.Add(1)
				processed.Add(1)
			}
			if err := batch.Error(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return outcome{}, err
	}
	if err := waitSettled(ctx, consumer); err != nil {
		return outcome{}, err
	}
	return outcome{messages: result.messages, elapsed: time.Since(start)}, nil
}

// waitSettled polls the consumer until the server has processed every
// ack: acks are not answered, so this is the only way to know the work is
// done rather than merely handed out.
func waitSettled(ctx context.Context, consumer jetstream.Consumer) error {
	for {
		info, err := consumer.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumAckPending == 0 && info.NumPending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nats: consumer not settled: %d awaiting ack, %d pending: %w", info.NumAckPending, info.NumPending, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// natsOrderedConsume reads count stored messages through an ordered
// consumer (no acks; the client checks sequences and recreates the
// consumer on a gap): JetStream's nearest match to a streaming read.
func natsOrderedConsume(url string, count uint64) (outcome, error) {
	nc, js, err := connectJetStream(url)
	if err != nil {
		return outcome{}, err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	consumer, err := js.OrderedConsumer(ctx, consumeStreamName, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return outcome{}, err
	}
	read, err := readThrough(ctx, consumer, count, "ordered consumer")
	if err != nil {
		return outcome{}, err
	}
	return outcome{messages: read, elapsed: time.Since(start)}, nil
}

// readThrough consumes until want messages arrived (or ctx ends), and
// returns how many did; what names the consumer in an error.
func readThrough(ctx context.Context, consumer jetstream.Consumer, want uint64, what string) (uint64, error) {
	var read atomic.Uint64
	done := make(chan struct{})
	consuming, err := consumer.Consume(func(jetstream.Msg) {
		if read.Add(1) == want {
			close(done)
		}
	})
	if err != nil {
		return 0, err
	}
	defer consuming.Stop()
	select {
	case <-done:
		return read.Load(), nil
	case <-ctx.Done():
		return read.Load(), fmt.Errorf("nats: %s read %d of %d: %w", what, read.Load(), want, ctx.Err())
	}
}
