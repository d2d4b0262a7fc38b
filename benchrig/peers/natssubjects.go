package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsCoreSubjects is S-pub on NATS core: one subscriber on pattern, one
// publisher cycling through subjects, counted as received from the first
// publish until the last delivery (at most once: nothing is stored). It
// publishes for duration or count messages, whichever ends first (count
// 0: no bound).
func natsCoreSubjects(url string, subjects []string, pattern string, size int, duration time.Duration, count uint64) (outcome, error) {
	subscriber, err := nats.Connect(url, nats.Name("peers-core-sub"))
	if err != nil {
		return outcome{}, err
	}
	defer subscriber.Close()
	var received atomic.Uint64
	var lastDelivery atomic.Int64
	subscription, err := subscriber.Subscribe(pattern, func(*nats.Msg) {
		received.Add(1)
		lastDelivery.Store(time.Now().UnixNano())
	})
	if err != nil {
		return outcome{}, err
	}
	// No client-side drop limit: a slow subscriber shows as a lower rate,
	// not as messages silently discarded.
	_ = subscription.SetPendingLimits(-1, -1)
	if err := subscriber.Flush(); err != nil {
		return outcome{}, err
	}
	publisher, err := nats.Connect(url, nats.Name("peers-core-pub"))
	if err != nil {
		return outcome{}, err
	}
	defer publisher.Close()
	payload := payloadOf(size)
	start := time.Now()
	var published uint64
	for stopAt := start.Add(duration); time.Now().Before(stopAt) && (count == 0 || published < count); published++ {
		if err := publisher.Publish(subjects[published%uint64(len(subjects))], payload); err != nil {
			return outcome{}, err
		}
	}
	if err := publisher.Flush(); err != nil {
		return outcome{}, err
	}
	waitForCount(&received, published, 10*time.Second)
	if received.Load() == 0 {
		return outcome{}, errors.New("nats core: the subscriber received nothing")
	}
	return outcome{messages: received.Load(), elapsed: time.Unix(0, lastDelivery.Load()).Sub(start)}, nil
}

// natsLoadSparse fills a fresh store with count sparse records on stream
// F (subjects f.>), as natsLoadStore does for C1: loaded under the
// default sync, then read by a server restarted with `always`.
func natsLoadSparse(dir string, count, size int) (storeDir string, err error) {
	if storeDir, err = os.MkdirTemp(dir, "peers-nats-sparse-"); err != nil {
		return "", err
	}
	if err := natsFillSparse(dir, storeDir, count, size); err != nil {
		return "", cleanupStore(storeDir, true, err)
	}
	return storeDir, nil
}

func natsFillSparse(dir, storeDir string, count, size int) error {
	ns, err := startNATS(dir, storeDir, false)
	if err != nil {
		return err
	}
	defer ns.stop()
	nc, js, err := connectJetStream(ns.url(), jetstream.WithPublishAsyncMaxPending(singleWindow))
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	config := benchStreamConfig(jetstreamSparse)
	config.Subjects = []string{sparseBinding}
	if _, err := js.CreateStream(ctx, config); err != nil {
		return err
	}
	payload := payloadOf(size)
	for i := range count {
		if _, err := js.PublishAsync(sparseSubject(i), payload, jetstream.WithStallWait(natsStallWait)); err != nil {
			return err
		}
	}
	if err := awaitAsyncComplete(js); err != nil {
		return err
	}
	stream, err := js.Stream(ctx, jetstreamSparse)
	if err != nil {
		return err
	}
	if stored := stream.CachedInfo().State.Msgs; stored != uint64(count) {
		return fmt.Errorf("nats: stored %d of %d messages", stored, count)
	}
	return nil
}

// natsTraverse reads stream F through an ordered consumer, filtered by
// filter ("" for none), until want messages arrived: the traversal rate
// is stored / the time that took (the data ends on a match, so the last
// match is the end of the stream).
func natsTraverse(url string, stored uint64, filter string, want uint64) (outcome, error) {
	nc, js, err := connectJetStream(url)
	if err != nil {
		return outcome{}, err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	config := jetstream.OrderedConsumerConfig{}
	if filter != "" {
		config.FilterSubjects = []string{filter}
	}
	consumer, err := js.OrderedConsumer(ctx, jetstreamSparse, config)
	if err != nil {
		return outcome{}, err
	}
	if _, err := readThrough(ctx, consumer, want, fmt.Sprintf("consumer (filter %q)", filter)); err != nil {
		return outcome{}, err
	}
	return outcome{messages: stored, elapsed: time.Since(start)}, nil
}
