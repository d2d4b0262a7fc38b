package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ironbus/ironbus/client"
)

// ironbusRoutedPublish is S-pub on IronBus: one connection with a
// pipelined producer (window 4,096) routing every record by its subject,
// cycling through subjects, for duration; every record sent counts once
// acknowledged, and the clock runs until the last ack.
func ironbusRoutedPublish(addr string, subjects []string, size int, duration time.Duration) (outcome, error) {
	ctx := context.Background()
	if err := ironbusBind(ctx, addr, subjectsBinding, subjectsStream); err != nil {
		return outcome{}, err
	}
	payload := payloadOf(size)
	stopAt := time.Now().Add(duration)
	return inParallel(1, func(acked *atomic.Uint64) error {
		c, err := client.Dial(ctx, addr, client.Options{ClientName: "peers-subjects", Window: singleWindow})
		if err != nil {
			return err
		}
		defer c.Close()
		producer := c.NewProducerTo(client.BySubject(), client.ProducerOptions{Window: singleWindow, Compression: client.CompressNone})
		failed := collectResults(producer, acked)
		for i := 0; time.Now().Before(stopAt); i++ {
			if err := producer.Send(ctx, client.Record{Subject: subjects[i%len(subjects)], Payload: payload}); err != nil {
				break
			}
		}
		closeErr := producer.Close()
		return errors.Join(<-failed, closeErr)
	})
}

// ironbusBind creates stream and binds pattern to it.
func ironbusBind(ctx context.Context, addr, pattern, stream string) error {
	c, err := client.Dial(ctx, addr, client.Options{ClientName: "peers-admin"})
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.CreateStream(ctx, stream, client.StreamSettings{}); err != nil {
		return err
	}
	_, err = c.Bind(ctx, pattern, stream)
	return err
}

// ironbusFilteredRows loads count sparse records and reads them through
// with client.Stream, unfiltered and filtered, filteredTraversals times
// each (alternating), every read in a group of its own.
func ironbusFilteredRows(addr string, count int) (all, sparse []outcome, err error) {
	if err := ironbusLoadSparse(addr, count); err != nil {
		return nil, nil, fmt.Errorf("load: %w", err)
	}
	settleWriteback()
	for k := range filteredTraversals {
		one, err := ironbusTraverse(addr, fmt.Sprintf("all-%d", k), "", uint64(count))
		if err != nil {
			return nil, nil, fmt.Errorf("unfiltered: %w", err)
		}
		all = append(all, one)
		if one, err = ironbusTraverse(addr, fmt.Sprintf("sparse-%d", k), sparseMatch, uint64(count)); err != nil {
			return nil, nil, fmt.Errorf("filtered: %w", err)
		}
		sparse = append(sparse, one)
	}
	return all, sparse, nil
}

// ironbusLoadSparse stores count records, 1 in sparseEvery with the
// matching subject, through one pipelined producer (fsynced acks).
func ironbusLoadSparse(addr string, count int) error {
	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{ClientName: "peers-load", Window: singleWindow})
	if err != nil {
		return err
	}
	defer c.Close()
	producer := c.NewProducer(filteredStream, client.ProducerOptions{Window: singleWindow, Compression: client.CompressNone})
	failed := collectResults(producer, nil)
	payload := payloadOf(subjectPayload)
	for i := range count {
		if err := producer.Send(ctx, client.Record{Subject: sparseSubject(i), Payload: payload}); err != nil {
			break
		}
	}
	closeErr := producer.Close()
	return errors.Join(<-failed, closeErr)
}

// ironbusTraverse reads the filtered stream from the start until its
// position reaches count, through filter ("" for none), and counts the
// records traversed: the clock covers the whole stream whatever the
// filter delivers. The group is opened before the clock starts: its
// creation is a durable write (two syncs, from one to twenty milliseconds
// on this disk after the load), setup rather than traversal, and
// JetStream's ordered consumer is ephemeral, kept in memory only.
func ironbusTraverse(addr, group, filter string, count uint64) (outcome, error) {
	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{ClientName: "peers-filtered"})
	if err != nil {
		return outcome{}, err
	}
	defer c.Close()
	if _, err := c.OpenGroup(ctx, filteredStream, group, client.GroupOptions{Type: client.GroupStreaming}); err != nil {
		return outcome{}, err
	}
	start := time.Now()
	reader, err := c.Stream(filteredStream, group, client.StreamOptions{Filter: filter})
	if err != nil {
		return outcome{}, err
	}
	var delivered uint64
	for reader.Position() < count {
		batch, err := reader.Next(ctx)
		if err != nil {
			return outcome{}, err
		}
		delivered += uint64(len(batch.Messages))
	}
	elapsed := time.Since(start)
	if want := expectedDelivered(filter, count); delivered != want {
		return outcome{}, fmt.Errorf("ironbus: %d records delivered through filter %q, want %d", delivered, filter, want)
	}
	return outcome{messages: count, elapsed: elapsed}, nil
}

// expectedDelivered is how many of count sparse records a filter passes.
func expectedDelivered(filter string, count uint64) uint64 {
	if filter == "" {
		return count
	}
	return count / sparseEvery
}
