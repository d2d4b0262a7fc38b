package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/server"
	"github.com/ironbus/ironbus/wire"
)

// startExampleBroker stands in for `ironbus serve` so that the examples
// run anywhere: it is the in-process fake broker of this package's tests.
// Real code dials a broker's address, such as "127.0.0.1:4222".
func startExampleBroker() (addr string, stop func()) {
	b := startFake(nil, nil)
	return b.addr(), b.stop
}

// Produce one record and wait until it is durable.
func ExampleClient_Produce() {
	addr, stop := startExampleBroker()
	defer stop()

	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{ClientName: "billing-api"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ack, err := c.Produce(ctx, "orders", client.Record{
		Key:     []byte("order-1001"),
		Subject: "orders.created",
		Headers: []client.Header{{Name: "content-type", Value: []byte("application/json")}},
		Payload: []byte(`{"total":42}`),
	})
	var serverErr *wire.Error
	switch {
	case errors.As(err, &serverErr) && serverErr.Retryable:
		// For example no_space or busy: the broker did not store it.
		log.Fatalf("retry after %v: %v", serverErr.RetryAfter, err)
	case err != nil:
		// A broken connection (client.ErrConnectionLost) or a cancelled
		// context: the record may or may not be stored. Dial again to
		// retry, accepting a possible duplicate (at-least-once).
		log.Fatal(err)
	}
	fmt.Printf("durable at partition %d, offset %d\n", ack.Partition, ack.Offset)
	// Output: durable at partition 0, offset 0
}

// Stream records through a pipelined producer: Send does not wait for
// acks, and the results come back in send order.
func ExampleProducer() {
	addr, stop := startExampleBroker()
	defer stop()

	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{ClientName: "sensor-gateway"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	p := c.NewProducer("readings", client.ProducerOptions{})
	acked := make(chan int)
	go func() { // read the results while sending: each record gets one
		n := 0
		for r := range p.Results() {
			if r.Err != nil {
				log.Printf("record %d not stored: %v", r.Sequence, r.Err)
				continue
			}
			n++
		}
		acked <- n
	}()
	for i := range 1000 {
		record := client.Record{Key: []byte("sensor-7"), Payload: fmt.Appendf(nil, "%d.5C", 20+i%5)}
		if err := p.Send(ctx, record); err != nil {
			log.Fatal(err) // the connection broke or ctx ended: this record was not sent
		}
	}
	if err := p.Close(); err != nil { // waits for every result, then closes Results
		log.Print(err)
	}
	fmt.Println("durable records:", <-acked)
	// Output: durable records: 1000
}

// Lease records to a consumer group, process them, and acknowledge them.
func ExampleClient_Fetch() {
	addr, stop := startExampleBroker()
	defer stop()

	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{ClientName: "thumbnailer"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for i := 1; i <= 3; i++ {
		if _, err := c.Produce(ctx, "images", client.Record{Payload: fmt.Appendf(nil, "resize photo-%d.jpg", i)}); err != nil {
			log.Fatal(err)
		}
	}

	result, err := c.Fetch(ctx, "images", "thumbnailers", client.FetchOptions{
		MaxRecords: 10,
		Wait:       5 * time.Second,  // long poll when nothing is ready
		Lease:      30 * time.Second, // redelivered if not acked by then
	})
	var rejected *client.DeliveryError
	switch {
	case errors.As(err, &rejected):
		// Some records failed their CRC: result holds the intact ones.
		// Ask for the others again rather than wait for their leases.
		for _, r := range rejected.Rejected {
			c.Nack(ctx, "images", "thumbnailers", 0, r.Message)
		}
	case err != nil:
		log.Fatal(err)
	}
	for _, m := range result.Messages {
		fmt.Printf("offset %d, attempt %d: %s\n", m.Offset, m.Attempt, m.Payload)
	}
	statuses, err := c.Ack(ctx, "images", "thumbnailers", result.Messages...)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ack:", statuses)
	// Output:
	// offset 0, attempt 1: resize photo-1.jpg
	// offset 1, attempt 1: resize photo-2.jpg
	// offset 2, attempt 1: resize photo-3.jpg
	// ack: [ok ok ok]
}

// startServedBroker runs a real broker in this process on a temporary
// data directory, through package server as `ironbus serve` does, for the
// examples that need the whole consumer model.
func startServedBroker() (addr string, stop func()) {
	dir, err := os.MkdirTemp("", "ironbus-example-")
	if err != nil {
		log.Fatal(err)
	}
	cfg := server.DefaultConfig()
	cfg.DataDir, cfg.Addr, cfg.HealthAddr = dir, "127.0.0.1:0", server.HealthOff
	srv, err := server.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		log.Fatal(err)
	}
	return srv.Addr(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Stop(ctx)
		_ = os.RemoveAll(dir)
	}
}

// Run a handler on every record of a work group: nil acknowledges, an
// error returns the record for a retry, and long handlers keep their
// leases. Consume returns when its context ends.
func ExampleClient_Consume() {
	addr, stop := startServedBroker()
	defer stop()

	c, err := client.Dial(context.Background(), addr, client.Options{ClientName: "mailer"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for _, to := range []string{"ada", "grace", "linus"} {
		if _, err := c.Produce(context.Background(), "emails", client.Record{Payload: []byte(to)}); err != nil {
			log.Fatal(err)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	failedOnce := false
	handler := func(ctx context.Context, m client.Message) error {
		if string(m.Payload) == "grace" && !failedOnce {
			failedOnce = true
			return client.RetryAfter(0, errors.New("smtp: try again"))
		}
		fmt.Printf("sent to %s (attempt %d)\n", m.Payload, m.Attempt)
		if string(m.Payload) == "grace" {
			cancel() // done for this example
		}
		return nil
	}
	err = c.Consume(ctx, "emails", "mailers", handler, client.ConsumeOptions{
		Lease: 10 * time.Second,
		OnGap: func(g client.Gap) { log.Printf("records %d-%d are gone: %s", g.From, g.To, g.Reason) },
	})
	fmt.Println("stopped:", err)
	// Output:
	// sent to ada (attempt 1)
	// sent to linus (attempt 1)
	// sent to grace (attempt 2)
	// stopped: context canceled
}

// Create a broadcast group that starts at the latest record, read what
// follows and settle it with one cumulative ack.
func ExampleClient_OpenGroup() {
	addr, stop := startServedBroker()
	defer stop()

	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	c.Produce(ctx, "ticks", client.Record{Payload: []byte("old")})

	info, err := c.OpenGroup(ctx, "ticks", "dashboard", client.GroupOptions{
		Type: client.GroupBroadcast, Start: client.StartPosition{Kind: client.StartLatest}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("starts at", info.Committed)
	c.Produce(ctx, "ticks", client.Record{Payload: []byte("new")})

	result, err := c.Fetch(ctx, "ticks", "dashboard", client.FetchOptions{Type: client.GroupBroadcast, Wait: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range result.Messages {
		fmt.Printf("offset %d: %s\n", m.Offset, m.Payload)
	}
	last := result.Messages[len(result.Messages)-1]
	status, err := c.CumulativeAck(ctx, "ticks", "dashboard", 0, last.Offset+1)
	fmt.Println("cumulative ack:", status, err)
	// Output:
	// starts at 1
	// offset 1: new
	// cumulative ack: ok <nil>
}
