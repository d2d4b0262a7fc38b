package broker

import (
	"context"
	"testing"

	"github.com/ironbus/ironbus/record"
)

// openTestBroker opens an engine on a temporary data directory (unless cfg
// names one), closed when the test ends.
func openTestBroker(t testing.TB, cfg Config) *Broker {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	b, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// partitionOf is one partition of a stream, created by a first publish
// when it does not exist.
func partitionOf(t testing.TB, b *Broker, stream string, partition uint32) *Partition {
	t.Helper()
	served, err := b.ProduceStream([]byte(stream), "")
	if err != nil {
		t.Fatal(err)
	}
	part, err := served.Partition(partition)
	if err != nil {
		t.Fatal(err)
	}
	return part
}

// appendRecord appends one record of payload to a partition and waits
// until it is durable; it returns the engine's error, if any.
func appendRecord(t testing.TB, part *Partition, payload []byte) (uint64, error) {
	t.Helper()
	body, err := record.AppendBody(nil, record.Body{Key: []byte("k"), Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	ticket, err := part.Append(context.Background(), [][]byte{body}, []uint32{record.Checksum(body)}, record.FrameSize(len(body)))
	if err != nil {
		return 0, err
	}
	<-ticket.Done()
	return ticket.First, ticket.Err()
}

// produceN appends n small records to partition 0 of a stream.
func produceN(t testing.TB, b *Broker, stream string, n int) {
	t.Helper()
	part := partitionOf(t, b, stream, 0)
	for range n {
		if _, err := appendRecord(t, part, []byte("payload")); err != nil {
			t.Fatal(err)
		}
	}
}
