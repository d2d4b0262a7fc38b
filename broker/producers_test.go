package broker

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/internal/crashtest"
	"github.com/ironbus/ironbus/producer"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// producerTestConfig is an engine on mem with small segments, so a few
// records seal one (and snapshot the producer tables).
func producerTestConfig(fsys vfs.FS) Config {
	return Config{DataDir: "/data", FS: fsys, Storage: segment.Options{SegmentSize: segment.MinSegmentSize}}
}

// appendIdempotent does what the append path does with a batch of one
// producer through the checked append path, then waits until it is
// durable. It returns the batch's first offset, or the verdict's when the
// batch was a duplicate.
func appendIdempotent(t testing.TB, p *Partition, id, first uint64, n, payload int) (uint64, producer.Verdict, error) {
	t.Helper()
	bodies, crcs, frames := make([][]byte, n), make([]uint32, n), 0
	for i := range n {
		body, err := record.AppendBody(nil, record.Body{HasProducer: true, ProducerID: id, Sequence: first + uint64(i),
			Payload: []byte(strings.Repeat("x", payload))})
		if err != nil {
			t.Fatal(err)
		}
		bodies[i], crcs[i] = body, record.Checksum(body)
		frames += record.FrameSize(len(body))
	}
	epoch, _ := p.broker.ProducerEpoch(id)
	run := &CheckedRun{Bodies: bodies, CRCs: crcs, FrameBytes: frames}
	for i := range n {
		run.Checks = append(run.Checks, Check{Producer: true, ProducerID: id, Sequence: first + uint64(i), Epoch: epoch})
	}
	for {
		ticket, err := p.TryAppendChecked(run)
		if errors.Is(err, ErrFull) {
			<-p.RoomFor(frames)
			continue
		}
		if err != nil {
			return 0, producer.Verdict{}, err
		}
		<-ticket.Done()
		switch o := run.Outcomes[0]; o.Kind {
		case Refused:
			return 0, producer.Verdict{}, o.Err
		case Duplicate:
			return o.Offset, producer.Verdict{Duplicate: true, Offset: o.Offset, OffsetKnown: o.OffsetKnown}, ticket.Err()
		}
		return run.Outcomes[0].Offset, producer.Verdict{}, ticket.Err()
	}
}

// producerAnswers describes what a partition's table answers for ids at
// sequences 0..maxSeq: a recovered table must answer the same.
func producerAnswers(p *Partition, ids []uint64, maxSeq uint64) string {
	p.checkMu.Lock()
	defer p.checkMu.Unlock()
	var out strings.Builder
	for _, id := range ids {
		next, held := p.producers.Next(id)
		fmt.Fprintf(&out, "producer %d: next %d %v\n", id, next, held)
		for seq := range maxSeq + 1 {
			verdict, err := p.producers.Check(id, seq)
			fmt.Fprintf(&out, "  %d: %+v %v\n", seq, verdict, err)
		}
	}
	return out.String()
}

func openProducerBroker(t *testing.T, fsys vfs.FS) *Broker {
	t.Helper()
	b, err := Open(producerTestConfig(fsys))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestProducerTablesSurviveRestartAndCrash(t *testing.T) {
	mem := vfs.NewMemFS()
	b := openProducerBroker(t, mem)
	if _, _, err := b.CreateStream(StreamSettings{Name: "orders", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	a, positions, err := b.InitProducer("a")
	if err != nil || len(positions) != 0 {
		t.Fatalf("InitProducer: %+v %v %v", a, positions, err)
	}
	c, _, _ := b.InitProducer("c")
	p0, p1 := partitionOf(t, b, "orders", 0), partitionOf(t, b, "orders", 1)
	// 2 KiB records seal a 64 KiB segment every ~30 records.
	for batch := range uint64(12) {
		if _, _, err := appendIdempotent(t, p0, a.ID, batch*5, 5, 2048); err != nil {
			t.Fatal(err)
		}
		if batch%3 == 0 {
			if _, _, err := appendIdempotent(t, p0, c.ID, batch/3, 1, 10); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, _, err := appendIdempotent(t, p1, a.ID, 100, 3, 10); err != nil {
		t.Fatal(err)
	}
	if segments := len(p0.log.Segments()); segments < 2 {
		t.Fatalf("%d segments: the test wants seals", segments)
	}
	ids := []uint64{a.ID, c.ID, 99}
	want0, want1 := producerAnswers(p0, ids, 70), producerAnswers(p1, ids, 105)
	crashed := mem.CrashClone(vfs.CrashOptions{})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	for name, image := range map[string]*vfs.MemFS{"clean restart": mem, "crash": crashed} {
		reopened := openProducerBroker(t, image)
		r0, r1 := partitionOf(t, reopened, "orders", 0), partitionOf(t, reopened, "orders", 1)
		if got := producerAnswers(r0, ids, 70); got != want0 {
			t.Fatalf("%s: partition 0 answers\n%s\nwant\n%s", name, got, want0)
		}
		if got := producerAnswers(r1, ids, 105); got != want1 {
			t.Fatalf("%s: partition 1 answers\n%s\nwant\n%s", name, got, want1)
		}
		again, positions, err := reopened.InitProducer("a")
		if err != nil || again.ID != a.ID || again.Epoch != a.Epoch+1 {
			t.Fatalf("%s: InitProducer again: %+v %v", name, again, err)
		}
		wantPositions := []ProducerPosition{{"orders", 0, 60}, {"orders", 1, 103}}
		if fmt.Sprint(positions) != fmt.Sprint(wantPositions) {
			t.Fatalf("%s: positions %v, want %v", name, positions, wantPositions)
		}
		if epoch, ok := reopened.ProducerEpoch(a.ID); !ok || epoch != again.Epoch {
			t.Fatalf("%s: epoch %d %v", name, epoch, ok)
		}
		if err := reopened.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestProducerStateOnPurgeAndRemoval(t *testing.T) {
	mem := vfs.NewMemFS()
	b := openProducerBroker(t, mem)
	a, _, _ := b.InitProducer("a")
	p := partitionOf(t, b, "s", 0)
	if _, _, err := appendIdempotent(t, p, a.ID, 0, 4, 10); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.PurgeStream(t.Context(), "s"); err != nil {
		t.Fatal(err)
	}
	want := producerAnswers(p, []uint64{a.ID}, 6)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openProducerBroker(t, mem)
	defer b.Close()
	p = partitionOf(t, b, "s", 0)
	if got := producerAnswers(p, []uint64{a.ID}, 6); got != want {
		t.Fatalf("after purge and restart:\n%s\nwant\n%s", got, want)
	}
	if _, verdict, err := appendIdempotent(t, p, a.ID, 2, 1, 10); err != nil || !verdict.Duplicate {
		t.Fatalf("a resend after the purge: %+v %v", verdict, err)
	}
	if _, _, err := b.RemoveStream("s"); err != nil {
		t.Fatal(err)
	}
	p = partitionOf(t, b, "s", 0)
	if _, held := p.producers.Next(a.ID); held {
		t.Fatal("a recreated stream kept the removed one's producer state")
	}
	if _, verdict, err := appendIdempotent(t, p, a.ID, 2, 1, 10); err != nil || verdict.Duplicate {
		t.Fatalf("first record on the recreated stream: %+v %v", verdict, err)
	}
}

func TestProducerSnapshotDamageIsNotFatal(t *testing.T) {
	mem := vfs.NewMemFS()
	b := openProducerBroker(t, mem)
	a, _, _ := b.InitProducer("a")
	p := partitionOf(t, b, "s", 0)
	if _, _, err := appendIdempotent(t, p, a.ID, 0, 3, 10); err != nil {
		t.Fatal(err)
	}
	want := producerAnswers(p, []uint64{a.ID}, 4)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// Both copies of the snapshot: garbage.
	dir := "/data/streams/s/0/checkpoints/"
	for _, name := range []string{"producers.ckpt", "producers.ckpt.prev"} {
		if err := vfs.WriteFileAtomic(mem, dir+name, []byte("IBCK not a checkpoint")); err != nil {
			t.Fatal(err)
		}
	}
	b = openProducerBroker(t, mem)
	defer b.Close()
	if got := producerAnswers(partitionOf(t, b, "s", 0), []uint64{a.ID}, 4); got != want {
		t.Fatalf("rebuilt from the log:\n%s\nwant\n%s", got, want)
	}
}

// producerCut loses power at the k-th mutating operation: under one
// lock with the acknowledgements, it keeps the acknowledgements made so
// far and a crash image, and fails that operation and every later one. An
// operation racing the cut either runs before it (its acknowledgement may
// come after, unrecorded) or fails.
type producerCut struct {
	mem *vfs.MemFS
	k   int

	mu      sync.Mutex
	ops     int
	dead    bool
	acked   []producerAck
	atCut   []producerAck
	image   *vfs.MemFS
	cutPath string
}

type producerAck struct{ id, seq, offset uint64 }

func (c *producerCut) MaybeFail(op vfs.Op) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return crashtest.ErrPowerCut
	}
	if !op.Kind.IsMutation() {
		return nil
	}
	if c.ops++; c.ops-1 != c.k {
		return nil
	}
	c.atCut = append([]producerAck(nil), c.acked...)
	c.image = c.mem.CrashClone(vfs.CrashOptions{})
	c.dead, c.cutPath = true, op.Kind.String()+" "+op.Path
	return crashtest.ErrPowerCut
}

func (c *producerCut) ack(records ...producerAck) {
	c.mu.Lock()
	c.acked = append(c.acked, records...)
	c.mu.Unlock()
}

// TestProducerCrashAtEveryWrite cuts the power at each write of a run
// that registers producers, appends batches across segment seals
// (snapshots) and stops cleanly (snapshots again), then recovers the
// image: every acknowledged record is a duplicate at its own offset, and
// each producer's next sequence follows its last stored record.
func TestProducerCrashAtEveryWrite(t *testing.T) {
	for k := 0; ; k++ {
		cut := &producerCut{mem: vfs.NewMemFS(), k: k}
		runProducerWorkload(t, vfs.Inject(cut.mem, cut), cut)
		if cut.image == nil {
			if k < 50 {
				t.Fatalf("only %d writes", k)
			}
			t.Logf("%d cuts", k)
			return
		}
		b, err := Open(producerTestConfig(cut.image))
		if err != nil {
			t.Fatalf("cut at write %d (%s): reopen: %v", k, cut.cutPath, err)
		}
		served, ok := b.existingStream("s")
		if !ok {
			if len(cut.atCut) > 0 {
				t.Fatalf("cut at write %d (%s): the stream is gone", k, cut.cutPath)
			}
			_ = b.Close()
			continue
		}
		p := &served.partitions[0]
		for _, r := range cut.atCut {
			p.checkMu.Lock()
			verdict, err := p.producers.Check(r.id, r.seq)
			p.checkMu.Unlock()
			if err != nil || !verdict.Duplicate || (verdict.OffsetKnown && verdict.Offset != r.offset) {
				t.Fatalf("cut at write %d (%s): acked producer %d seq %d at %d: %+v %v", k, cut.cutPath, r.id, r.seq, r.offset, verdict, err)
			}
		}
		checkNextFollowsLog(t, p, k)
		_ = b.Close()
	}
}

// runProducerWorkload registers two producers and appends ten batches of
// four 4 KiB records, alternating, then closes the broker; it stops at
// the first failure.
func runProducerWorkload(t *testing.T, fsys vfs.FS, cut *producerCut) {
	b, err := Open(producerTestConfig(fsys))
	if err != nil {
		return
	}
	defer b.Close()
	a, _, errA := b.InitProducer("a")
	c, _, errC := b.InitProducer("c")
	served, errS := b.ProduceStream([]byte("s"), "")
	if errA != nil || errC != nil || errS != nil {
		return
	}
	p := &served.partitions[0]
	for batch := range uint64(10) {
		id, first := []uint64{a.ID, c.ID}[batch%2], batch/2*4
		offset, _, err := appendIdempotent(t, p, id, first, 4, 4096)
		if err != nil {
			return
		}
		for i := range uint64(4) {
			cut.ack(producerAck{id, first + i, offset + i})
		}
	}
}

// checkNextFollowsLog checks each producer's next sequence against the
// last record of it the log holds.
func checkNextFollowsLog(t *testing.T, p *Partition, k int) {
	t.Helper()
	last := map[uint64]uint64{}
	reader := p.log.NewReader(0)
	defer reader.Close()
	for {
		entry, err := reader.Next()
		if err != nil {
			break
		}
		if entry.Gap != nil {
			continue
		}
		view, err := record.Parse(entry.Body)
		if err == nil && view.HasProducer {
			last[view.ProducerID] = view.Sequence
		}
	}
	for id, seq := range last {
		if next, held := p.producers.Next(id); !held || next != seq+1 {
			t.Fatalf("cut at write %d: producer %d next %d %v, the log's last sequence %d", k, id, next, held, seq)
		}
	}
}

// TestProducerIDsAboveTheLogs: a registry older than the logs (here:
// none at all) never gives a new name an id whose state a log holds.
func TestProducerIDsAboveTheLogs(t *testing.T) {
	mem := vfs.NewMemFS()
	b := openProducerBroker(t, mem)
	a, _, _ := b.InitProducer("a")
	c, _, _ := b.InitProducer("c")
	p := partitionOf(t, b, "s", 0)
	for _, id := range []uint64{a.ID, c.ID} {
		if _, _, err := appendIdempotent(t, p, id, 0, 2, 10); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mem.Remove("/data/" + producer.RegistryFileName); err != nil {
		t.Fatal(err)
	}
	b = openProducerBroker(t, mem)
	defer b.Close()
	fresh, _, err := b.InitProducer("fresh")
	if err != nil || fresh.ID <= c.ID {
		t.Fatalf("a new name after the registry was lost: %+v %v (the log knows ids up to %d)", fresh, err, c.ID)
	}
}

// TestProducerIdleStopWritesNothing: a stop rewrites no snapshot that
// already covers the log, and a broker that never saw a ProducerInit
// leaves no registry file.
func TestProducerIdleStopWritesNothing(t *testing.T) {
	mem := vfs.NewMemFS()
	b := openProducerBroker(t, mem)
	produceN(t, b, "s", 3)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Stat("/data/" + producer.RegistryFileName); err == nil {
		t.Fatal("a registry file without a ProducerInit")
	}
	var writes []string
	fsys := vfs.Inject(mem, vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind.IsMutation() && strings.Contains(op.Path, producerCheckpoint) {
			writes = append(writes, op.Kind.String()+" "+op.Path)
		}
		return nil
	}))
	b = openProducerBroker(t, fsys)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if len(writes) > 0 {
		t.Fatalf("an idle open and stop wrote %v", writes)
	}
}

// TestProducerIdleExpiryOnBrokerTime: a producer idle past the expiry on
// the broker's monotonic clock answers expired; after a new ProducerInit
// it starts afresh once the snapshot holding the drop is written.
func TestProducerIdleExpiryOnBrokerTime(t *testing.T) {
	clock := &manualMonotonic{}
	cfg := producerTestConfig(vfs.NewMemFS())
	cfg.Clock, cfg.TimeSource = clock, clock // idle expiry runs on broker time
	cfg.Producers.IdleExpiry = time.Minute
	b, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a, _, _ := b.InitProducer("a")
	p := partitionOf(t, b, "s", 0)
	if _, _, err := appendIdempotent(t, p, a.ID, 0, 2, 10); err != nil {
		t.Fatal(err)
	}
	clock.advance(time.Minute + time.Second)
	if _, _, err := appendIdempotent(t, p, a.ID, 2, 1, 10); !errors.Is(err, producer.ErrExpired) {
		t.Fatalf("after the idle expiry: %v", err)
	}
	if stats := b.ProducerStats(); stats.Expired != 1 || stats.ExpiredAnswers != 1 || stats.Names != 1 {
		t.Fatalf("stats %+v", stats)
	}
	if _, positions, _ := b.InitProducer("a"); len(positions) != 0 {
		t.Fatalf("positions after the expiry: %v", positions)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, verdict, err := appendIdempotent(t, p, a.ID, 0, 1, 10)
		if err == nil && !verdict.Duplicate {
			break
		}
		if !errors.Is(err, producer.ErrExpired) || time.Now().After(deadline) {
			t.Fatalf("a new incarnation after the drop's snapshot: %+v %v", verdict, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
