package main

import (
	"cmp"
	"context"
	"errors"
	"github.com/ironbus/ironbus/benchrig"
	"sync/atomic"
	"time"

	"github.com/ironbus/ironbus/benchrig/netbench"
	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/segment"
)

// ironbusBroker is an in-process IronBus broker on loopback, as netbench
// runs it: durability sync (the default), io mode buffered (the default
// of ironbus serve; auto would pick O_DIRECT here, under which consumers
// reading just-written records read them from the device), the network
// backend auto picks.
type ironbusBroker struct {
	addr    string
	backend string
	stop    func()
}

func startIronBus(dir string) (*ironbusBroker, error) {
	addr, backend, stop, err := netbench.InProcess(dir, segment.Options{IOMode: segment.IOBuffered}, "")
	if err != nil {
		return nil, err
	}
	return &ironbusBroker{addr: addr, backend: backend, stop: stop}, nil
}

// ironbusAwaited is P1 and P2a: connections clients, each producing one
// record and waiting for its durable ack before the next.
func ironbusAwaited(addr, stream string, connections, size int, duration time.Duration) (outcome, error) {
	record := client.Record{Payload: payloadOf(size)}
	stopAt := time.Now().Add(duration)
	return inParallel(connections, func(acked *atomic.Uint64) error {
		ctx := context.Background()
		c, err := client.Dial(ctx, addr, client.Options{ClientName: "peers", Window: 1, Compression: client.CompressNone})
		if err != nil {
			return err
		}
		defer c.Close()
		return awaitedLoop(stopAt, acked, func() error {
			_, err := c.Produce(ctx, stream, record)
			return err
		})
	})
}

// ironbusPipelined is P2b and P2c: connections producers, each on its
// own connection with window records in flight. Sending stops at the end
// of duration, every record sent counts once acknowledged, and the clock
// runs until the last ack: the same rule as the JetStream side.
func ironbusPipelined(addr, stream string, connections, window, size int, duration time.Duration) (outcome, error) {
	record := client.Record{Payload: payloadOf(size)}
	stopAt := time.Now().Add(duration)
	return inParallel(connections, func(acked *atomic.Uint64) error {
		ctx := context.Background()
		c, err := client.Dial(ctx, addr, client.Options{ClientName: "peers", Window: window})
		if err != nil {
			return err
		}
		defer c.Close()
		producer := c.NewProducer(stream, client.ProducerOptions{Window: window, Compression: client.CompressNone})
		failed := collectResults(producer, acked)
		for time.Now().Before(stopAt) {
			if err := producer.Send(ctx, record); err != nil {
				break
			}
		}
		closeErr := producer.Close()
		return errors.Join(<-failed, closeErr)
	})
}

// ironbusLatency is L1 on IronBus: one producer at a fixed rate, each
// produce awaited.
func ironbusLatency(addr, stream string, size, rate int, duration time.Duration) ([]time.Duration, error) {
	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{ClientName: "peers-latency", Window: 1, Compression: client.CompressNone})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	record := client.Record{Payload: payloadOf(size)}
	return benchrig.OpenLoop(rate, duration, func() error {
		_, err := c.Produce(ctx, stream, record)
		return err
	})
}

// collectResults drains a producer's results until they close: it counts
// the acknowledged records into acked (when not nil) and then sends the
// first failure, or nil, on the channel it returns.
func collectResults(producer *client.Producer, acked *atomic.Uint64) <-chan error {
	failed := make(chan error, 1)
	go func() {
		var first error
		for result := range producer.Results() {
			if result.Err != nil {
				first = cmp.Or(first, result.Err)
				continue
			}
			if acked != nil {
				acked.Add(1)
			}
		}
		failed <- first
	}()
	return failed
}
