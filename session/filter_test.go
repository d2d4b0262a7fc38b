package session

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/wire"
)

// subjects cycles through the test subjects; "orders.eu.*" matches
// every other record.
var subjects = []string{"orders.eu.fr", "orders.us.ny", "orders.eu.de", "billing.eu.x"}

// produceSubjects stores n records with cycling subjects in partition 0.
func produceSubjects(t *testing.T, c *rawClient, stream string, n int) {
	t.Helper()
	for i := range n {
		produceAt(t, c, stream, 0, "k", subjects[i%len(subjects)], fmt.Sprint(i))
	}
}

// checkFilteredAccounting fails unless deliveries are exactly the
// records matching orders.eu.* among the first n, and deliveries and
// gaps together cover [0, n) once, the gaps filtered and coalesced.
func checkFilteredAccounting(t *testing.T, n int, deliveries []wire.Deliver, gaps []wire.Gap) {
	t.Helper()
	covered := make([]int, n)
	for _, d := range deliveries {
		view, _ := record.Parse(d.Body)
		if !strings.HasPrefix(string(view.Subject), "orders.eu.") {
			t.Fatalf("offset %d with subject %q delivered", d.Offset, view.Subject)
		}
		covered[d.Offset]++
	}
	for i, g := range gaps {
		if g.Reason != wire.GapFiltered || g.Detail != "" {
			t.Fatalf("gap %+v: want filtered, with no detail text", g)
		}
		if i > 0 && gaps[i-1].To == g.From && gaps[i-1].Partition == g.Partition {
			t.Fatalf("gaps %+v and %+v are not coalesced", gaps[i-1], g)
		}
		for o := g.From; o < g.To; o++ {
			covered[o]++
		}
	}
	for o, times := range covered {
		if times != 1 {
			t.Fatalf("offset %d accounted for %d times (deliveries %v, gaps %+v)", o, times, offsetsOf(deliveries), gaps)
		}
	}
}

// consumeAll reads a group until an answer brings nothing, acking work
// deliveries, and returns every delivery and gap.
func consumeAll(t *testing.T, c *rawClient, m wire.Consume) ([]wire.Deliver, []wire.Gap) {
	t.Helper()
	var deliveries []wire.Deliver
	var gaps []wire.Gap
	for id := uint32(300); ; id++ {
		a := c.consume(id, m)
		if a.err != nil {
			t.Fatalf("consume: %+v", a.err)
		}
		deliveries, gaps = append(deliveries, a.deliveries...), append(gaps, a.gaps...)
		if m.Mode == wire.ModeWork {
			c.ackEach(id+1000, string(m.Stream), string(m.Group), wire.AckDone, a.deliveries)
		}
		if len(a.deliveries) == 0 && len(a.gaps) == 0 {
			return deliveries, gaps
		}
	}
}

func TestFilteredWorkGroup(t *testing.T) {
	addr, _ := testBroker(t, testConfig{})
	c := connect(t, addr)
	produceSubjects(t, c, "mixed", 41)
	open := wire.OpenGroup{Stream: []byte("mixed"), Group: []byte("eu"), Mode: wire.ModeWork, Filter: []byte("orders.eu.*")}
	if _, e := c.openGroup(1, open); e != nil {
		t.Fatal(e)
	}
	deliveries, gaps := consumeAll(t, c, wire.Consume{Stream: []byte("mixed"), Group: []byte("eu"), Mode: wire.ModeWork, MaxRecords: 3})
	checkFilteredAccounting(t, 41, deliveries, gaps)
	if info, e := c.openGroup(2, wire.OpenGroup{Stream: []byte("mixed"), Group: []byte("eu"), Mode: wire.ModeWork}); e != nil || info.Committed != 41 {
		t.Fatalf("after acking every match the cursor is %d (%v), want 41", info.Committed, e)
	}
}

func TestFilterIsFixedAtCreation(t *testing.T) {
	addr, _ := testBroker(t, testConfig{})
	c := connect(t, addr)
	produceSubjects(t, c, "mixed", 4)
	if _, e := c.openGroup(1, wire.OpenGroup{Stream: []byte("mixed"), Group: []byte("eu"), Mode: wire.ModeWork, Filter: []byte("orders.eu.*")}); e != nil {
		t.Fatal(e)
	}
	_, e := c.openGroup(2, wire.OpenGroup{Stream: []byte("mixed"), Group: []byte("eu"), Mode: wire.ModeWork, Filter: []byte("orders.>")})
	if e == nil || e.Code != wire.CodeGroupModeMismatch || !strings.Contains(e.Message, "orders.eu.*") || !strings.Contains(e.Message, "orders.>") {
		t.Fatalf("another filter: %+v, want group_mode_mismatch naming both", e)
	}
	a := c.consume(3, wire.Consume{Stream: []byte("mixed"), Group: []byte("eu"), Mode: wire.ModeWork, MaxRecords: 10, Filter: []byte("billing.>")})
	if a.err == nil || a.err.Code != wire.CodeGroupModeMismatch {
		t.Fatalf("a work Consume with another filter: %+v", a.err)
	}
	if _, e := c.openGroup(4, wire.OpenGroup{Stream: []byte("mixed"), Group: []byte("plain"), Mode: wire.ModeWork}); e != nil {
		t.Fatal(e)
	}
	if _, e := c.openGroup(5, wire.OpenGroup{Stream: []byte("mixed"), Group: []byte("plain"), Mode: wire.ModeWork, Filter: []byte("orders.>")}); e == nil || !strings.Contains(e.Message, "none") {
		t.Fatalf("a filter on an unfiltered group: %+v", e)
	}
	for i, bad := range []string{"orders..eu", "orders.>.eu", "orders eu", "a.\x01"} {
		_, e := c.openGroup(uint32(10+i), wire.OpenGroup{Stream: []byte("mixed"), Group: []byte("bad"), Mode: wire.ModeWork, Filter: []byte(bad)})
		if e == nil || e.Code != wire.CodeInvalidRequest {
			t.Errorf("filter %q: %+v, want invalid_request", bad, e)
		}
		a := c.consume(uint32(20+i), wire.Consume{Stream: []byte("mixed"), Group: []byte("bad"), Mode: wire.ModeStreaming, Filter: []byte(bad)})
		if a.err == nil || a.err.Code != wire.CodeInvalidRequest {
			t.Errorf("streaming filter %q: %+v, want invalid_request", bad, a.err)
		}
	}
}

func TestFilterSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	addr, b := testBroker(t, testConfig{engine: broker.Config{DataDir: dir}})
	c := connect(t, addr)
	produceSubjects(t, c, "mixed", 8)
	if _, e := c.openGroup(1, wire.OpenGroup{Stream: []byte("mixed"), Group: []byte("eu"), Mode: wire.ModeBroadcast, Filter: []byte("orders.eu.*")}); e != nil {
		t.Fatal(e)
	}
	_ = c.conn.Close()
	b.Drain()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	addr, _ = testBroker(t, testConfig{engine: broker.Config{DataDir: dir}})
	c = connect(t, addr)
	deliveries, gaps := consumeAll(t, c, wire.Consume{Stream: []byte("mixed"), Group: []byte("eu"), Mode: wire.ModeBroadcast, MaxRecords: 100})
	checkFilteredAccounting(t, 8, deliveries, gaps)
	if _, e := c.openGroup(2, wire.OpenGroup{Stream: []byte("mixed"), Group: []byte("eu"), Mode: wire.ModeBroadcast, Filter: []byte("billing.>")}); e == nil {
		t.Fatal("the restarted group accepted another filter")
	}
}

// TestStreamingConsumeFilter: a streaming Consume's own filter applies to
// that request only; gaps come coalesced; a group filter wins over it.
func TestStreamingConsumeFilter(t *testing.T) {
	addr, _ := testBroker(t, testConfig{})
	c := connect(t, addr)
	produceSubjects(t, c, "mixed", 40)
	m := wire.Consume{Stream: []byte("mixed"), Group: []byte("s"), Mode: wire.ModeStreaming, MaxRecords: 5, Filter: []byte("orders.eu.*")}
	deliveries, gaps := consumeAll(t, c, m)
	checkFilteredAccounting(t, 40, deliveries, gaps)
	other := connect(t, addr) // the same group, unfiltered, on a new connection
	m.Filter, m.MaxRecords = nil, 100
	if all, gaps := consumeAll(t, other, m); len(all) != 40 || len(gaps) != 0 {
		t.Fatalf("unfiltered: %d records, gaps %+v", len(all), gaps)
	}
	if _, e := c.openGroup(1, wire.OpenGroup{Stream: []byte("mixed"), Group: []byte("f"), Mode: wire.ModeStreaming, Filter: []byte("billing.>")}); e != nil {
		t.Fatal(e)
	}
	m.Group, m.Filter = []byte("f"), []byte("orders.>")
	all, _ := consumeAll(t, c, m)
	if len(all) != 10 || !slices.ContainsFunc(all, func(d wire.Deliver) bool { return d.Offset == 3 }) {
		t.Fatalf("the group's filter did not win: %v", offsetsOf(all))
	}
}

// TestFilterAcrossPartitions: a filtered group over four partitions,
// work and streaming, accounts for every offset of every partition.
func TestFilterAcrossPartitions(t *testing.T) {
	addr, b := testBroker(t, testConfig{})
	c := connect(t, addr)
	createStream(t, b, "mixed", 4)
	for p := range uint32(4) {
		for i := range 23 {
			produceAt(t, c, "mixed", p, "k", subjects[(i+int(p))%len(subjects)], fmt.Sprint(i))
		}
	}
	for _, mode := range []uint8{wire.ModeWork, wire.ModeStreaming} {
		group := []byte(fmt.Sprint("eu", mode))
		if _, e := c.openGroup(1, wire.OpenGroup{Stream: []byte("mixed"), Partition: wire.PartitionAll, Group: group, Mode: mode, Filter: []byte("orders.eu.*")}); e != nil {
			t.Fatal(e)
		}
		deliveries, gaps := consumeAll(t, c, wire.Consume{Stream: []byte("mixed"), Partition: wire.PartitionAll, Group: group, Mode: mode, MaxRecords: 4})
		for p := range uint32(4) {
			var mine []wire.Deliver
			var theirs []wire.Gap
			for _, d := range deliveries {
				if d.Partition == p {
					mine = append(mine, d)
				}
			}
			for _, g := range gaps {
				if g.Partition == p {
					theirs = append(theirs, g)
				}
			}
			slices.SortFunc(theirs, func(x, y wire.Gap) int { return int(x.From) - int(y.From) })
			checkFilteredAccounting(t, 23, mine, theirs)
		}
	}
}

// TestStreamingFilteredAnswerInPieces: a filtered answer of hundreds of
// runs and gaps goes to the connection in pieces while it is read
// (streamFlushParts); the client still sees one answer, every offset
// accounted for once, in order.
func TestStreamingFilteredAnswerInPieces(t *testing.T) {
	addr, _ := testBroker(t, testConfig{})
	c := connect(t, addr)
	const n = 1200 // every other record matches: 600 runs and 600 gaps
	produceSubjects(t, c, "pieces", n)
	m := wire.Consume{Stream: []byte("pieces"), Group: []byte("s"), Mode: wire.ModeStreaming, MaxRecords: 10_000,
		MaxBytes: 4 << 20, Filter: []byte("orders.eu.*")}
	a := c.consume(1, m)
	if a.err != nil {
		t.Fatalf("consume: %+v", a.err)
	}
	if a.end.Delivered != n/2 || len(a.deliveries) != n/2 || a.batches != n/2 {
		t.Fatalf("one answer: ConsumeEnd counts %d, %d records in %d batches, want %d in %d", a.end.Delivered,
			len(a.deliveries), a.batches, n/2, n/2)
	}
	if !slices.IsSortedFunc(a.deliveries, func(x, y wire.Deliver) int { return int(x.Offset) - int(y.Offset) }) {
		t.Fatalf("deliveries out of order: %v", offsetsOf(a.deliveries))
	}
	checkFilteredAccounting(t, n, a.deliveries, a.gaps)
}
