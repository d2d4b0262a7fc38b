package client_test

import (
	"context"
	"fmt"
	"log"
	"slices"
	"time"

	"github.com/ironbus/ironbus/client"
)

// startStreamsExampleBroker stands in for a broker with stream "orders"
// of 4 partitions, stream "invoices", and the bindings orders.> →
// orders and invoices.> → invoices (ironbus stream create/bind, or
// Client.CreateStream and Client.Bind).
func startStreamsExampleBroker() (addr string, stop func()) {
	b := startFake(nil, func(b *fakeBroker) {
		b.partitions = map[string]uint32{"orders": 4}
		b.bindings = map[string]string{"orders.>": "orders", "invoices.>": "invoices"}
	})
	return b.addr(), b.stop
}

// Publish by subject: the broker stores each record in the stream whose
// binding matches its subject, in the partition its key hashes to.
func ExampleBySubject() {
	addr, stop := startStreamsExampleBroker()
	defer stop()
	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	producer := c.NewProducerTo(client.BySubject(), client.ProducerOptions{})
	for _, customer := range []string{"c-1", "c-2", "c-1"} {
		record := client.Record{Key: []byte(customer), Subject: "orders.eu.created", Payload: []byte("{}")}
		if err := producer.Send(ctx, record); err != nil {
			log.Fatal(err) // for example client.ErrInvalidSubject: nothing was sent
		}
	}
	if err := producer.Close(); err != nil {
		log.Fatal(err) // a subject no binding matches fails its record with no_route
	}
	var partitions []uint32
	for result := range producer.Results() {
		partitions = append(partitions, result.Ack.Partition)
	}
	fmt.Println("one key, one partition:", partitions[0] == partitions[2])
	// Output: one key, one partition: true
}

// Read every partition of a stream through a subject filter: positions
// are kept per partition, and CommitPositions commits them all.
func ExampleStream_CommitPositions() {
	addr, stop := startStreamsExampleBroker()
	defer stop()
	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for i, subject := range []string{"orders.eu.created", "orders.us.created", "orders.eu.paid"} {
		if _, err := c.ProduceTo(ctx, client.ToPartition("orders", uint32(i)), client.Record{Subject: subject}); err != nil {
			log.Fatal(err)
		}
	}

	stream, err := c.Stream("orders", "eu-audit", client.StreamOptions{Partition: client.AllPartitions, Filter: "orders.eu.*"})
	if err != nil {
		log.Fatal(err)
	}
	batch, err := stream.Next(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range batch.Messages {
		fmt.Printf("%s partition %d offset %d\n", m.Subject, m.Partition, m.Offset)
	}
	for _, gap := range batch.Gaps {
		fmt.Printf("partition %d: %d..%d %s\n", gap.Partition, gap.From, gap.To, gap.Reason)
	}
	fmt.Println("positions:", stream.Positions())
	if err := stream.CommitPositions(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// orders.eu.created partition 0 offset 0
	// orders.eu.paid partition 2 offset 0
	// partition 1: 0..1 filtered
	// positions: [{0 1} {1 1} {2 1}]
}

// Subscribe to a wildcard that spans streams: every stream bound to a
// matching subject is consumed with the pattern as its filter, and each
// message names its stream and offset. Order holds per stream partition
// only.
func ExampleClient_ConsumeSubject() {
	addr, stop := startStreamsExampleBroker()
	defer stop()
	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for _, subject := range []string{"orders.eu", "orders.us", "invoices.eu"} {
		if _, err := c.ProduceTo(ctx, client.BySubject(), client.Record{Subject: subject}); err != nil {
			log.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var seen []string
	handler := func(_ context.Context, m client.Message) error {
		seen = append(seen, fmt.Sprintf("%s from %s/%d@%d", m.Subject, m.Stream, m.Partition, m.Offset))
		if len(seen) == 2 {
			cancel()
		}
		return nil // acknowledged
	}
	err = c.ConsumeSubject(ctx, "*.eu", "eu-desk", handler, client.ConsumeOptions{Wait: 10 * time.Millisecond})
	if err != context.Canceled {
		log.Fatal(err)
	}
	slices.Sort(seen) // streams interleave in any order
	for _, line := range seen {
		fmt.Println(line)
	}
	// Output:
	// invoices.eu from invoices/0@0
	// orders.eu from orders/0@0
}
