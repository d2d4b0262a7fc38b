package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ironbus/ironbus/client"
)

// consumeFetchRecords is how many records one work-group Fetch (IronBus)
// or pull Fetch (JetStream) asks for.
const consumeFetchRecords = 1000

// consumeStreamAPI says which IronBus API the streaming row used; it goes
// into the row's note.
const consumeStreamAPI = "IronBus reads with client.Stream (DeliverBatch of stored frames, one batch read ahead)"

// ironbusLoad stores count records of size bytes through one pipelined
// producer with a window of 4,096: IronBus's fast path, fsynced before
// each ack like every other IronBus row.
func ironbusLoad(addr, stream string, count, size int) error {
	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{ClientName: "peers-load", Window: singleWindow})
	if err != nil {
		return err
	}
	defer c.Close()
	producer := c.NewProducer(stream, client.ProducerOptions{Window: singleWindow, Compression: client.CompressNone})
	failed := collectResults(producer, nil)
	record := client.Record{Payload: payloadOf(size)}
	for range count {
		if err := producer.Send(ctx, record); err != nil {
			break
		}
	}
	closeErr := producer.Close()
	return errors.Join(<-failed, closeErr)
}

// ironbusWorkConsume drains count stored records through a work group
// with consumers competing connections: each Fetches up to 1,000 leased
// records and settles them with one AckRange, awaited, before its next
// Fetch.
func ironbusWorkConsume(addr, stream string, consumers int, count uint64) (outcome, error) {
	const group = "work"
	var settled atomic.Uint64
	return inParallel(consumers, func(processed *atomic.Uint64) error {
		ctx := context.Background()
		c, err := client.Dial(ctx, addr, client.Options{ClientName: "peers-work"})
		if err != nil {
			return err
		}
		defer c.Close()
		options := client.FetchOptions{Type: client.GroupWork, MaxRecords: consumeFetchRecords, Wait: 20 * time.Millisecond}
		for settled.Load() < count {
			fetched, err := c.Fetch(ctx, stream, group, options)
			if err != nil {
				return err
			}
			if len(fetched.Messages) == 0 {
				continue // the rest is leased to the other consumers
			}
			first, last := fetched.Messages[0].Offset, fetched.Messages[len(fetched.Messages)-1].Offset
			status, err := c.AckRange(ctx, stream, group, 0, first, last+1)
			if err != nil {
				return err
			}
			if status != client.AckOK {
				return fmt.Errorf("ironbus: AckRange [%d, %d): %v", first, last+1, status)
			}
			settled.Add(uint64(len(fetched.Messages)))
			processed.Add(uint64(len(fetched.Messages)))
		}
		return nil
	})
}

// ironbusStreamConsume reads count stored records through a streaming
// group with client.Stream on one connection, then commits the position.
func ironbusStreamConsume(addr, stream string, count uint64) (outcome, error) {
	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{ClientName: "peers-stream"})
	if err != nil {
		return outcome{}, err
	}
	defer c.Close()
	start := time.Now()
	reader, err := c.Stream(stream, "reader", client.StreamOptions{})
	if err != nil {
		return outcome{}, err
	}
	var read, next uint64
	for read < count {
		batch, err := reader.Next(ctx)
		if err != nil {
			return outcome{}, err
		}
		read += uint64(len(batch.Messages))
		next = batch.Next
	}
	if err := reader.Commit(ctx, next); err != nil {
		return outcome{}, err
	}
	return outcome{messages: read, elapsed: time.Since(start)}, nil
}
