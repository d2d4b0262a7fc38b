package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/ironbus/ironbus/client"
)

// A named idempotent producer: a restart of the process with the same
// name continues its sequences and fences the old incarnation, and after
// a reconnect its resends are stored once (Ack.Duplicate marks them).
func ExampleProducerOptions_name() {
	addr, stop := startExampleBroker()
	defer stop()

	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	p := c.NewProducerTo(client.ToPartition("payments", 0), client.ProducerOptions{Name: "payments-writer"})
	for _, amount := range []string{"10", "20"} {
		if err := p.Send(ctx, client.Record{Payload: []byte(amount)}); err != nil {
			log.Fatal(err)
		}
	}
	p.Close()
	for r := range p.Results() {
		fmt.Printf("offset %d duplicate %v err %v\n", r.Ack.Offset, r.Ack.Duplicate, r.Err)
	}
	// Output:
	// offset 0 duplicate false err <nil>
	// offset 1 duplicate false err <nil>
}

// A conditional append: store the record only if nobody wrote to the
// partition since offset 0 was read.
func ExampleExpectOffset() {
	addr, stop := startExampleBroker()
	defer stop()

	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	first, _ := c.Produce(ctx, "ledger", client.Record{Payload: []byte("open"), ExpectLastOffset: client.ExpectNone()})
	c.Produce(ctx, "ledger", client.Record{Payload: []byte("a concurrent write")})

	_, err = c.Produce(ctx, "ledger", client.Record{Payload: []byte("debit"), ExpectLastOffset: client.ExpectOffset(first.Offset)})
	var mismatch *client.ExpectationError
	if errors.As(err, &mismatch) {
		fmt.Printf("not stored: the last offset is %d, re-read and retry\n", mismatch.Actual)
	}
	// Output: not stored: the last offset is 1, re-read and retry
}

// An atomic batch: both records, or neither.
func ExampleClient_PublishBatch() {
	addr, stop := startExampleBroker()
	defer stop()

	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	acks, err := c.PublishBatch(ctx, client.ToStream("transfers"), []client.Record{
		{Key: []byte("alice"), Payload: []byte("-10")},
		{Key: []byte("bob"), Payload: []byte("+10")},
	})
	if err != nil {
		log.Fatal(err) // nothing of the batch was stored, or (ctx, connection) all of it may be
	}
	fmt.Println(len(acks), "records stored together")
	// Output: 2 records stored together
}
