package crashtest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
)

// Stream is the stream the workload publishes to and reads back.
const Stream = "orders"

// RecordsPerProducer bounds what one producer publishes per round, so
// reading the whole log back after every kill stays cheap.
const RecordsPerProducer = 1500

// producerWindow is small so that one producer's records spread over the
// round: kills land mid-batch, mid-roll and after it alike.
const producerWindow = 16

// Ledger records every acknowledgement of a run and how far the consuming
// group's acknowledged prefix reached, and when. Its methods are safe for
// concurrent use.
type Ledger struct {
	mu    sync.Mutex
	acked map[uint64]string // offset → payload
	// through is the group's contiguous acknowledged prefix; marks say
	// when each prefix was reached, for the redelivery bound.
	through uint64
	marks   []consumedMark
	kills   []time.Time
	// cut is set from a power cut until the next broker serves: the old
	// broker may go on acknowledging on its old image, and those acks are
	// not the cut image's to keep.
	cut bool
}

type consumedMark struct {
	through uint64
	at      time.Time
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger { return &Ledger{acked: map[uint64]string{}} }

// Acknowledged is the number of records acknowledged so far.
func (l *Ledger) Acknowledged() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// Through is the group's contiguous acknowledged prefix.
func (l *Ledger) Through() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.through
}

// Killed notes the moment the broker was killed, for CheckGroup.
func (l *Ledger) Killed(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.kills = append(l.kills, at)
}

// Cut runs take (which takes the crash image) with the ledger held, then
// stops recording acknowledgements until Resume: every ack the ledger
// holds came back before the image was taken, so its sync finished before
// it too.
func (l *Ledger) Cut(take func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	take()
	l.cut = true
}

// Resume records acknowledgements again, once a broker serves the image.
func (l *Ledger) Resume() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = false
}

// acknowledged records one ack; an offset acknowledged twice with
// different payloads is a reused offset.
func (l *Ledger) acknowledged(t testing.TB, offset uint64, payload string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut {
		return
	}
	if previous, taken := l.acked[offset]; taken && previous != payload {
		t.Errorf("offset %d acknowledged twice: %q, then %q", offset, previous, payload)
	}
	l.acked[offset] = payload
}

// Produce publishes records prefix+"0", prefix+"1", … to Stream through a
// pipelined producer until ctx ends, the broker is gone or
// RecordsPerProducer are sent, recording every ack in l. Prefixes must
// differ between producers and rounds.
func Produce(ctx context.Context, t testing.TB, addr string, l *Ledger, prefix string) {
	c, err := client.Dial(ctx, addr, client.Options{Window: producerWindow})
	if err != nil {
		return
	}
	defer c.Close()
	// The harness kills the broker under its producers and restarts it
	// only once they have stopped: a producer that kept reconnecting (the
	// SDK's default) would hold every cycle for its reconnect timeout.
	// Each producer is one broker lifetime here (its records stamped and
	// checked all the same); the idempotent kill -9 harness tests
	// producers that live across kills.
	producer := c.NewProducer(Stream, client.ProducerOptions{Window: producerWindow, ReconnectTimeout: -1})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for result := range producer.Results() {
			if result.Err == nil {
				l.acknowledged(t, result.Ack.Offset, prefix+strconv.FormatUint(result.Sequence, 10))
			}
		}
	}()
	for i := 0; ctx.Err() == nil && i < RecordsPerProducer; i++ {
		if producer.Send(ctx, client.Record{Payload: []byte(prefix + strconv.Itoa(i))}) != nil {
			break
		}
	}
	_ = producer.Close()
	<-done
}

// Consume works through the work group in order until ctx ends or the
// broker is gone, acknowledging in batches (so group checkpoints are being
// written when the kill comes), and notes in l how far the group's
// contiguous acknowledged prefix reached, and when.
func Consume(ctx context.Context, addr string, l *Ledger, group string) {
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		return
	}
	defer c.Close()
	for ctx.Err() == nil {
		batch, err := c.Fetch(ctx, Stream, group, client.FetchOptions{MaxRecords: 200, Wait: 50 * time.Millisecond})
		if err != nil {
			return
		}
		if len(batch.Messages) == 0 {
			continue
		}
		statuses, err := c.Ack(ctx, Stream, group, batch.Messages...)
		if err != nil {
			return
		}
		l.mu.Lock()
		for i, m := range batch.Messages {
			if statuses[i] == client.AckOK && m.Offset == l.through {
				l.through++
			}
		}
		l.marks = append(l.marks, consumedMark{through: l.through, at: time.Now()})
		l.mu.Unlock()
	}
}

// Check reads the whole of Stream through a new streaming group (named
// for round) and fails t unless the offsets ascend and every acknowledged
// record is there, at its offset, byte-identical.
func (l *Ledger) Check(t testing.TB, addr string, round int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		t.Fatalf("round %d: %v", round, err)
	}
	defer c.Close()
	reader := fmt.Sprint("check-", round)
	stored := map[uint64]string{}
	last, first := uint64(0), true
	for {
		batch, err := c.Fetch(ctx, Stream, reader, client.FetchOptions{Type: client.GroupStreaming, MaxRecords: 5000})
		if err != nil {
			t.Fatalf("round %d: reading back: %v", round, err)
		}
		if len(batch.Messages) == 0 {
			break
		}
		for _, m := range batch.Messages {
			if !first && m.Offset <= last {
				t.Fatalf("round %d: offset %d after %d", round, m.Offset, last)
			}
			first, last = false, m.Offset
			stored[m.Offset] = string(m.Payload)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for offset, payload := range l.acked {
		if stored[offset] != payload {
			t.Fatalf("round %d: acknowledged offset %d (%s) came back as %q", round, offset, payload, stored[offset])
		}
	}
}

// CheckGroup fails t if group, after a restart, redelivers a record it
// had acknowledged (as part of its contiguous prefix) more than slack
// before the last kill: slack is the checkpoint interval plus the time
// its syncs may take. It then hands the lease back, so the next round's
// consumer starts there, and counts the group's progress from there.
func (l *Ledger) CheckGroup(t testing.TB, addr, group string, round int, slack time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		t.Fatalf("round %d: %v", round, err)
	}
	defer c.Close()
	l.mu.Lock()
	if len(l.kills) == 0 {
		l.mu.Unlock()
		t.Fatalf("round %d: CheckGroup before any kill was noted (Ledger.Killed)", round)
	}
	killedAt := l.kills[len(l.kills)-1]
	l.mu.Unlock()
	held := l.throughAt(killedAt.Add(-slack))
	batch, err := c.Fetch(ctx, Stream, group, client.FetchOptions{MaxRecords: 1, Lease: time.Millisecond})
	if err != nil {
		t.Fatalf("round %d: %v", round, err)
	}
	if len(batch.Messages) > 0 && batch.Messages[0].Offset < held {
		t.Fatalf("round %d: the group redelivered offset %d, acknowledged (through %d) over %v before the kill",
			round, batch.Messages[0].Offset, held, slack)
	}
	if len(batch.Messages) > 0 {
		_, _ = c.Nack(ctx, Stream, group, 0, batch.Messages...)
		l.rewind(batch.Messages[0].Offset)
	}
}

// throughAt returns the contiguous prefix the group had acknowledged at
// or before instant.
func (l *Ledger) throughAt(instant time.Time) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	through := uint64(0)
	for _, mark := range l.marks {
		if mark.at.After(instant) {
			break
		}
		through = mark.through
	}
	return through
}

// rewind notes that the group, after a restart, delivers again from
// offset to: work it had acknowledged from there on counts again only once
// it is acknowledged again, so every earlier mark is capped at to. Without
// this, a kill soon after a restart (before the re-acknowledged work was
// checkpointed) would blame the group for the previous kill's redelivery.
func (l *Ledger) rewind(to uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if to >= l.through {
		return
	}
	l.through = to
	for i := range l.marks {
		l.marks[i].through = min(l.marks[i].through, to)
	}
}
