package client_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/internal/crashtest"
	"github.com/ironbus/ironbus/internal/testbroker"
)

// Property tests of conditional appends against a real broker: writers
// on several connections race to extend one chain, each appending with
// the last offset it believes in (ExpectLastOffset on a partition, or
// ExpectLastSubjectOffset on one subject among others). Whatever the
// interleaving:
//   - each expected value has at most one winner, and every link of the
//     chain exactly one;
//   - the stored chain links every record to the one before it (the
//     record's expected value is its predecessor's offset);
//   - every loser got an *ExpectationError whose actual offset is a
//     record of the chain stored after the one it expected;
//   - a winner's ack names the offset its record is stored at.
//
// The writer and connection counts and each writer's pauses come from a
// seed (IRONBUS_SEED replays one); IRONBUS_CAS_ROUNDS sets how many
// seeded runs each test makes.

// casNone is the expected value "no record yet" in payloads and maps.
const casNone = -1

// casAttempt is one conditional append and its outcome.
type casAttempt struct {
	writer   int
	expected int64 // casNone: ExpectNone
	won      bool
	offset   uint64 // the ack's offset, when won
	actual   int64  // the refusal's actual offset (casNone: no record yet), when lost
}

func TestConditionalAppendsUnderConcurrentWriters(t *testing.T) {
	runCASRounds(t, false)
}

func TestConditionalSubjectAppendsUnderConcurrentWriters(t *testing.T) {
	runCASRounds(t, true)
}

func runCASRounds(t *testing.T, bySubject bool) {
	base := crashtest.Seed(t)
	rounds := crashtest.Count(t, "IRONBUS_CAS_ROUNDS", 3)
	if crashtest.Replaying() {
		rounds = 1
	}
	broker := testbroker.Start(t, testbroker.Config(t))
	for round := range rounds {
		seed := base + uint64(round)
		stream := fmt.Sprintf("cas-%d", round)
		if !runCAS(t, broker.Addr(), stream, seed, bySubject) {
			t.Fatalf("round %d failed; replay with IRONBUS_SEED=%d", round, seed)
		}
	}
}

// runCAS runs one seeded race on stream and checks it; false when it
// failed.
func runCAS(t *testing.T, addr, stream string, seed uint64, bySubject bool) bool {
	t.Helper()
	random := rand.New(rand.NewPCG(seed, seed^0xca5))
	connections, writers, links := 2+random.IntN(3), 4+random.IntN(6), 60+random.IntN(60)
	t.Logf("seed %d: %d writers on %d connections, %d links, by subject %v", seed, writers, connections, links, bySubject)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	clients := make([]*client.Client, connections)
	for i := range clients {
		c, err := client.Dial(ctx, addr, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients[i] = c
	}
	if _, err := clients[0].CreateStream(ctx, stream, client.StreamSettings{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		attempts []casAttempt
		won      int
	)
	var race sync.WaitGroup
	for w := range writers {
		pauses := rand.New(rand.NewPCG(seed, uint64(w)))
		c := clients[w%connections]
		race.Go(func() {
			believed := int64(casNone)
			for k := 0; ; k++ {
				mu.Lock()
				done := won >= links
				mu.Unlock()
				if done || ctx.Err() != nil {
					return
				}
				if pause := pauses.IntN(4); pause > 0 {
					time.Sleep(time.Duration(pause) * 100 * time.Microsecond)
				}
				if bySubject && pauses.IntN(3) == 0 {
					// Noise: another subject's records move the partition's
					// last offset, not the chain's.
					if _, err := c.Produce(ctx, stream, client.Record{Subject: "cas.noise", Payload: []byte("noise")}); err != nil {
						t.Errorf("writer %d: noise: %v", w, err)
						return
					}
				}
				attempt := casAttempt{writer: w, expected: believed}
				ack, err := c.Produce(ctx, stream, casRecord(w, k, believed, bySubject))
				var refusal *client.ExpectationError
				switch {
				case err == nil:
					attempt.won, attempt.offset, believed = true, ack.Offset, int64(ack.Offset)
				case errors.As(err, &refusal):
					attempt.actual = casNone
					if refusal.HasActual {
						attempt.actual = int64(refusal.Actual)
					}
					believed = attempt.actual
				default:
					if ctx.Err() == nil {
						t.Errorf("writer %d: a conditional append failed other than by expectation: %v", w, err)
					}
					return
				}
				mu.Lock()
				attempts = append(attempts, attempt)
				if attempt.won {
					won++
				}
				mu.Unlock()
			}
		})
	}
	race.Wait()
	if t.Failed() {
		return false
	}
	chain := readCASChain(t, ctx, clients[0], stream, bySubject)
	return checkCAS(t, attempts, chain)
}

// casRecord is writer w's k-th attempt: its payload names the expected
// value, so the stored chain can be checked link by link.
func casRecord(w, k int, expected int64, bySubject bool) client.Record {
	r := client.Record{Payload: fmt.Appendf(nil, "w%d/%d/%d", w, k, expected)}
	expectation := client.ExpectNone()
	if expected != casNone {
		expectation = client.ExpectOffset(uint64(expected))
	}
	if bySubject {
		r.Subject, r.ExpectLastSubjectOffset = "cas.chain", expectation
	} else {
		r.ExpectLastOffset = expectation
	}
	return r
}

// casLink is one stored record of the chain.
type casLink struct {
	offset   uint64
	payload  string
	expected int64
}

// readCASChain reads the stream back: the chain's records (the subject's,
// or every record) in offset order.
func readCASChain(t *testing.T, ctx context.Context, c *client.Client, stream string, bySubject bool) []casLink {
	t.Helper()
	var chain []casLink
	for {
		batch, err := c.Fetch(ctx, stream, "check", client.FetchOptions{Type: client.GroupStreaming, MaxRecords: 1000})
		if err != nil {
			t.Fatalf("reading %s back: %v", stream, err)
		}
		if len(batch.Messages) == 0 {
			return chain
		}
		for _, m := range batch.Messages {
			if bySubject && m.Subject != "cas.chain" {
				continue
			}
			fields := strings.Split(string(m.Payload), "/")
			expected, err := strconv.ParseInt(fields[len(fields)-1], 10, 64)
			if len(fields) != 3 || err != nil {
				t.Fatalf("offset %d: %q is not a chain record", m.Offset, m.Payload)
			}
			chain = append(chain, casLink{offset: m.Offset, payload: string(m.Payload), expected: expected})
		}
	}
}

// checkCAS checks the properties of the package comment; false when one
// fails.
func checkCAS(t testing.TB, attempts []casAttempt, chain []casLink) bool {
	t.Helper()
	ok := true
	fail := func(format string, args ...any) {
		t.Errorf(format, args...)
		ok = false
	}
	linkAt := map[uint64]int{} // offset → index in chain
	for i, link := range chain {
		want := int64(casNone)
		if i > 0 {
			want = int64(chain[i-1].offset)
		}
		if link.expected != want {
			fail("chain link %d (offset %d, %q) expected %d, but the record before it is %d", i, link.offset, link.payload, link.expected, want)
		}
		linkAt[link.offset] = i
	}
	winners := map[int64]int{}
	wins := 0
	for _, a := range attempts {
		if a.won {
			wins++
			winners[a.expected]++
			i, stored := linkAt[a.offset]
			if !stored || chain[i].expected != a.expected {
				fail("writer %d won on %d at offset %d, but the chain does not hold that link there", a.writer, a.expected, a.offset)
			}
			continue
		}
		if a.actual == casNone {
			fail("writer %d lost on %d, told there was no record yet", a.writer, a.expected)
			continue
		}
		if _, stored := linkAt[uint64(a.actual)]; !stored {
			fail("writer %d lost on %d to actual %d, which is no record of the chain", a.writer, a.expected, a.actual)
		}
		if a.expected != casNone && a.actual <= a.expected {
			fail("writer %d lost on %d to actual %d, not a later record", a.writer, a.expected, a.actual)
		}
	}
	for expected, count := range winners {
		if count > 1 {
			fail("%d writers won on expected value %d", count, expected)
		}
	}
	t.Logf("%d links, %d appends refused as expectations", len(chain), len(attempts)-wins)
	if wins != len(chain) {
		fail("%d appends won, but the chain holds %d records", wins, len(chain))
	}
	for i, link := range chain {
		if winners[link.expected] != 1 {
			fail("chain link %d (expected %d) has %d winners", i, link.expected, winners[link.expected])
		}
	}
	return ok
}

// casRecorder collects what checkCAS reports instead of failing the test.
type casRecorder struct {
	testing.TB
	failures int
}

func (r *casRecorder) Helper()               {}
func (r *casRecorder) Logf(string, ...any)   {}
func (r *casRecorder) Errorf(string, ...any) { r.failures++ }

// TestConditionalOracleCatchesEachViolation feeds checkCAS races that
// break one property each.
func TestConditionalOracleCatchesEachViolation(t *testing.T) {
	chain := []casLink{{offset: 0, expected: casNone}, {offset: 1, expected: 0}, {offset: 2, expected: 1}}
	wins := []casAttempt{{won: true, expected: casNone, offset: 0}, {won: true, expected: 0, offset: 1}, {won: true, expected: 1, offset: 2}}
	cases := []struct {
		name     string
		attempts []casAttempt
		chain    []casLink
	}{
		{"two winners on one value", append(wins[:3:3], casAttempt{won: true, expected: 1, offset: 3}),
			append(chain[:3:3], casLink{offset: 3, expected: 1})},
		{"a broken link", wins, []casLink{chain[0], chain[1], {offset: 2, expected: 0}}},
		{"a loser told of no record", append(wins[:3:3], casAttempt{expected: 0, actual: casNone}), chain},
		{"a loser told of a record not in the chain", append(wins[:3:3], casAttempt{expected: 0, actual: 9}), chain},
		{"a loser told of an earlier record", append(wins[:3:3], casAttempt{expected: 1, actual: 0}), chain},
		{"a win the chain lacks", wins[:2], chain},
	}
	for _, c := range cases {
		recorder := &casRecorder{TB: t}
		if checkCAS(recorder, c.attempts, c.chain) || recorder.failures == 0 {
			t.Errorf("%s: checkCAS reported nothing", c.name)
		}
	}
	valid := &casRecorder{TB: t}
	if !checkCAS(valid, append(wins[:3:3], casAttempt{expected: 0, actual: 2}), chain) {
		t.Errorf("a valid race was reported (%d failures)", valid.failures)
	}
}
