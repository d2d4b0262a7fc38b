package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/ironbus/ironbus/client"
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
