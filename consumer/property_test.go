package consumer

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ironbus/ironbus/segment/vfs"
)

// propertySeeds returns fixed seeds plus one from the clock; every
// failure message names its seed, so a run replays with that seed.
func propertySeeds() []uint64 {
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8}
	return append(seeds, uint64(time.Now().UnixNano()))
}

// workModel is what the test knows about a work group from the outside.
type workModel struct {
	t        *testing.T
	seed     uint64
	latest   map[uint64]uint64 // offset -> token of its most recent delivery
	live     map[uint64]uint64 // offset -> owner, for leases the model believes current
	settled  map[uint64]bool   // acked or terminated with StatusOK
	attempts map[uint64]uint32
}

func (m *workModel) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("seed %d: %s", m.seed, fmt.Sprintf(format, args...))
}

func (m *workModel) delivered(ds []Delivery, maxDeliver int) {
	m.t.Helper()
	for _, d := range ds {
		if m.settled[d.Offset] {
			m.fatalf("offset %d delivered after a confirmed ack", d.Offset)
		}
		if int(d.Attempt) > maxDeliver {
			m.fatalf("offset %d delivered %d times, max-deliver %d", d.Offset, d.Attempt, maxDeliver)
		}
		if d.Attempt != m.attempts[d.Offset]+1 {
			m.fatalf("offset %d attempt %d after %d deliveries", d.Offset, d.Attempt, m.attempts[d.Offset])
		}
		m.attempts[d.Offset] = d.Attempt
		m.latest[d.Offset] = d.Lease
	}
}

// pick returns a random delivered, unsettled offset.
func (m *workModel) pick(rng *rand.Rand) (uint64, bool) {
	if len(m.latest) == 0 {
		return 0, false
	}
	n := rng.IntN(len(m.latest))
	for offset := range m.latest {
		if n == 0 {
			return offset, !m.settled[offset]
		}
		n--
	}
	return 0, false
}

func TestPropertyWorkGroup(t *testing.T) {
	dead := 0
	for _, seed := range propertySeeds() {
		dead += runWorkProperty(t, seed)
	}
	if dead == 0 {
		t.Fatal("no run dead-lettered anything: the property is vacuous")
	}
}

func runWorkProperty(t *testing.T, seed uint64) int {
	rng := rand.New(rand.NewPCG(seed, seed))
	r := mustRig(t, vfs.NewMemFS())
	const records = 120
	r.appendRecords(records, nil)
	clock := &manualClock{now: time.Unix(0, 0)}
	opts := Options{MaxInFlight: 1 + rng.IntN(8), MaxDeliver: 3, Visibility: 10 * time.Second,
		MaxLease: 30 * time.Second, DeadLetters: r.queue, CheckpointEvery: 1 + rng.IntN(20), Now: clock.Now}
	g := r.open("prop", opts)
	m := &workModel{t: t, seed: seed, latest: map[uint64]uint64{}, settled: map[uint64]bool{}, attempts: map[uint64]uint32{}}
	for step := 0; step < 600; step++ {
		m.step(rng, g, clock, opts)
		s := g.Stats()
		if s.Leased > g.opts.MaxInFlight || s.Unsettled > g.opts.MaxUnsettled || s.AckedAheadRanges > s.Unsettled+1 {
			m.fatalf("bounds broken at step %d: %+v (max in flight %d)", step, s, g.opts.MaxInFlight)
		}
	}
	// Drain: with time enough for every delay and lease, a fresh consumer
	// must reach the end: credits never wedge.
	clock.advance(time.Hour)
	for i := 0; i < records*4 && g.Committed() < records; i++ {
		got, _, err := g.Fetch(99, 10, 1<<20, 0)
		if err != nil {
			m.fatalf("drain fetch: %v", err)
		}
		m.delivered(got, opts.MaxDeliver)
		for _, d := range got {
			if g.Ack(d.Offset, d.Lease) == StatusOK {
				m.settled[d.Offset] = true
			}
		}
		clock.advance(time.Minute)
	}
	m.checkFinal(r, g, records, opts.MaxDeliver)
	return len(r.deadLetters())
}

func (m *workModel) step(rng *rand.Rand, g *Group, clock *manualClock, opts Options) {
	m.t.Helper()
	switch op := rng.IntN(10); {
	case op < 3:
		got, _, err := g.Fetch(uint64(1+rng.IntN(3)), 1+rng.IntN(5), 1<<20, 0)
		if err != nil {
			m.fatalf("fetch: %v", err)
		}
		m.delivered(got, opts.MaxDeliver)
	case op < 7:
		offset, ok := m.pick(rng)
		if !ok {
			return
		}
		token := m.latest[offset]
		if rng.IntN(4) == 0 {
			token-- // a token this record was never granted
		}
		m.settle(rng, g, offset, token)
	case op == 7:
		clock.advance(time.Duration(rng.IntN(15000)) * time.Millisecond)
	case op == 8:
		g.Release(uint64(1 + rng.IntN(3)))
	default:
		if err := g.Checkpoint(); err != nil {
			m.fatalf("checkpoint: %v", err)
		}
	}
}

func (m *workModel) settle(rng *rand.Rand, g *Group, offset, token uint64) {
	m.t.Helper()
	current := token == m.latest[offset]
	var status Status
	switch rng.IntN(4) {
	case 0, 1:
		status = g.Ack(offset, token)
	case 2:
		status = g.Term(offset, token)
	default:
		delay := time.Duration(rng.IntN(3)-1) * time.Second // -1 s = backoff
		status = g.Nack(offset, token, delay)
		if status == StatusOK && !current {
			m.fatalf("nack of offset %d with an old token succeeded", offset)
		}
		return
	}
	if status == StatusOK {
		if !current {
			m.fatalf("ack of offset %d with an old token succeeded", offset)
		}
		m.settled[offset] = true
	}
}

// checkFinal: everything settled exactly once, either acked or
// dead-lettered, and the cursor covers exactly that.
func (m *workModel) checkFinal(r *rig, g *Group, records uint64, maxDeliver int) {
	m.t.Helper()
	dead := map[uint64]int{}
	for _, letter := range r.deadLetters() {
		dead[letter.Offset]++
		if dead[letter.Offset] > 1 || m.settled[letter.Offset] || int(letter.Attempts) != maxDeliver {
			m.fatalf("dead letter %+v: copies %d, also acked %v", letter, dead[letter.Offset], m.settled[letter.Offset])
		}
	}
	for offset := uint64(0); offset < records; offset++ {
		if !m.settled[offset] && dead[offset] == 0 {
			m.fatalf("offset %d neither acked nor dead-lettered; cursor %d, stats %+v", offset, g.Committed(), g.Stats())
		}
		if m.attempts[offset] > uint32(maxDeliver) {
			m.fatalf("offset %d delivered %d times", offset, m.attempts[offset])
		}
	}
	if c := g.Committed(); c != records {
		m.fatalf("cursor %d, want %d", c, records)
	}
}

// TestPropertyCursorOnlyOverAckedPrefix acks in random order and checks
// after every ack that the cursor is exactly the first unacked offset.
func TestPropertyCursorOnlyOverAckedPrefix(t *testing.T) {
	for _, seed := range propertySeeds() {
		rng := rand.New(rand.NewPCG(seed, 0))
		r := mustRig(t, vfs.NewMemFS())
		r.appendRecords(64, nil)
		g := r.open("prefix", Options{})
		got, _, _ := g.Fetch(1, 64, 1<<20, 0)
		rng.Shuffle(len(got), func(i, j int) { got[i], got[j] = got[j], got[i] })
		acked := map[uint64]bool{}
		for _, d := range got {
			g.Ack(d.Offset, d.Lease)
			acked[d.Offset] = true
			want := uint64(0)
			for acked[want] {
				want++
			}
			if c := g.Committed(); c != want {
				t.Fatalf("seed %d: cursor %d, first unacked %d", seed, c, want)
			}
		}
	}
}
