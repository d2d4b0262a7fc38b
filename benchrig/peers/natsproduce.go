package main

import (
	"context"
	"fmt"
	"github.com/ironbus/ironbus/benchrig"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsStallWait lets an async publish at its max pending wait for room
// instead of failing after the client's default 200 ms: a full window is
// the backpressure being measured, not an error.
const natsStallWait = 30 * time.Second

func connectJetStream(url string, options ...jetstream.JetStreamOpt) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(url, nats.Name("peers"))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc, options...)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// natsAwaited is P1 and P2a: connections clients, each publishing to the
// stream and waiting for its PubAck before the next.
func natsAwaited(url string, connections, size int, duration time.Duration) (outcome, error) {
	payload := payloadOf(size)
	stopAt := time.Now().Add(duration)
	return inParallel(connections, func(acked *atomic.Uint64) error {
		nc, js, err := connectJetStream(url)
		if err != nil {
			return err
		}
		defer nc.Close()
		ctx := context.Background()
		return awaitedLoop(stopAt, acked, func() error {
			_, err := js.Publish(ctx, benchStreamSubject, payload)
			return err
		})
	})
}

// natsPipelined is P2b and P2c: connections clients, each with async
// publishes keeping up to window unacknowledged (the client's max
// pending). As on the IronBus side, publishing stops at the end of
// duration, every publish made counts once acknowledged, and the clock
// runs until the last answer. (Counting only acks that arrive before the
// end would wrongly show JetStream with `always` near zero in short
// cells: its server answers a read buffer's worth of publishes only
// after syncing each of them, so its first acks come late.)
func natsPipelined(url string, connections, window, size int, duration time.Duration) (outcome, error) {
	payload := payloadOf(size)
	stopAt := time.Now().Add(duration)
	return inParallel(connections, func(acked *atomic.Uint64) error {
		var failed atomic.Pointer[error]
		onAck := func(jetstream.JetStream, *nats.Msg, *jetstream.PubAck) { acked.Add(1) }
		onError := func(_ jetstream.JetStream, _ *nats.Msg, err error) { failed.CompareAndSwap(nil, &err) }
		nc, js, err := connectJetStream(url, jetstream.WithPublishAsyncMaxPending(window),
			jetstream.WithPublishAsyncAckHandler(onAck), jetstream.WithPublishAsyncErrHandler(onError))
		if err != nil {
			return err
		}
		defer nc.Close()
		for time.Now().Before(stopAt) && failed.Load() == nil {
			if _, err := js.PublishAsync(benchStreamSubject, payload, jetstream.WithStallWait(natsStallWait)); err != nil {
				return err
			}
		}
		if err := awaitAsyncComplete(js); err != nil {
			return err
		}
		if err := failed.Load(); err != nil {
			return *err
		}
		return nil
	})
}

func awaitAsyncComplete(js jetstream.JetStream) error {
	select {
	case <-js.PublishAsyncComplete():
		return nil
	case <-time.After(natsStallWait):
		return fmt.Errorf("nats: %d async publishes unanswered after %v", js.PublishAsyncPending(), natsStallWait)
	}
}

// natsLatency is L1 on JetStream: one publisher at a fixed rate, each
// publish awaited.
func natsLatency(url string, size, rate int, duration time.Duration) ([]time.Duration, error) {
	nc, js, err := connectJetStream(url)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	payload := payloadOf(size)
	ctx := context.Background()
	return benchrig.OpenLoop(rate, duration, func() error {
		_, err := js.Publish(ctx, benchStreamSubject, payload)
		return err
	})
}

// natsCorePubSub is the at-most-once reference: one publisher and one
// subscriber on core NATS (nothing stored), on the one subject "core"
// (natsCoreSubjects).
func natsCorePubSub(url string, size int, duration time.Duration, count uint64) (outcome, error) {
	return natsCoreSubjects(url, []string{"core"}, "core", size, duration, count)
}

// waitForCount waits until counter reaches want or stops moving for half
// a second (core NATS may drop messages for a slow consumer).
func waitForCount(counter *atomic.Uint64, want uint64, limit time.Duration) {
	last, lastMoved := counter.Load(), time.Now()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		now := counter.Load()
		if now >= want || time.Since(lastMoved) > 500*time.Millisecond {
			return
		}
		if now != last {
			last, lastMoved = now, time.Now()
		}
	}
}
