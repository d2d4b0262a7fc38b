package segment

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/segment/vfs"
)

// A lone producer awaiting each record keeps its log idle: under a linger
// every record still commits inline and nothing is ever held.
func TestLingerIdleLogCommitsInline(t *testing.T) {
	opts := testOptions(0)
	opts.CommitLinger = MaxCommitLinger
	d := openDir(t, vfs.NewMemFS(), opts)
	defer d.Close()
	l := openLog(t, d)
	for i := range uint64(20) {
		b := body(i, 100)
		ticket, err := l.TryCommitBatch([][]byte{b}, []uint32{crc(b)})
		if err != nil {
			t.Fatal(err)
		}
		if !isDone(ticket) {
			t.Fatalf("record %d: an idle log did not commit inline under a linger", i)
		}
	}
	if held := d.Stats().Held; held != 0 {
		t.Fatalf("an idle log was held %d times", held)
	}
}

// A busy log (its last sync covered several records) is held: a lone
// record waits out the linger, never less, and records that reach the
// count the last sync covered are synced without waiting it out.
func TestLingerHoldsBusyLog(t *testing.T) {
	opts := testOptions(0)
	opts.CommitLinger = MaxCommitLinger
	d := openDir(t, vfs.NewMemFS(), opts)
	defer d.Close()
	l := openLog(t, d)
	l.roundRecords.Store(4)
	began := time.Now()
	b := body(0, 100)
	ticket, err := l.TryCommitBatch([][]byte{b}, []uint32{crc(b)})
	if err != nil {
		t.Fatal(err)
	}
	if isDone(ticket) {
		t.Fatal("a busy log committed inline under a linger")
	}
	waitTicket(t, ticket)
	if waited := time.Since(began); waited < MaxCommitLinger*9/10 {
		t.Fatalf("a lone record on a busy log was synced after %v, before the linger of %v", waited, MaxCommitLinger)
	}
	if l.roundRecords.Load() != 1 || d.Stats().Held == 0 {
		t.Fatalf("after a lone record: last covered %d, held %d; want 1 and some", l.roundRecords.Load(), d.Stats().Held)
	}
	// Four producers' records reach the count of the previous sync.
	l.roundRecords.Store(4)
	var wg sync.WaitGroup
	tickets := make([]Ticket, 4)
	for p := range tickets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := body(uint64(1+p), 100)
			ticket, err := l.AppendBatch(context.Background(), [][]byte{b}, []uint32{crc(b)})
			if err != nil {
				t.Error(err)
			}
			tickets[p] = ticket
		}()
	}
	wg.Wait()
	for _, ticket := range tickets {
		waitTicket(t, ticket)
	}
	if l.Committed() != 5 {
		t.Fatalf("committed %d, want 5", l.Committed())
	}
}

// Without a linger the committer keeps no account of what syncs covered
// and never holds a log.
func TestNoLingerHoldsNothing(t *testing.T) {
	d := openDir(t, vfs.NewMemFS(), testOptions(0))
	defer d.Close()
	l := openLog(t, d)
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				b := body(uint64(p*100+i), 100)
				ticket, err := l.AppendBatch(context.Background(), [][]byte{b}, []uint32{crc(b)})
				if err != nil {
					t.Error(err)
					return
				}
				waitTicket(t, ticket)
			}
		}()
	}
	wg.Wait()
	if held, covered := d.Stats().Held, l.roundRecords.Load(); held != 0 || covered != 0 {
		t.Fatalf("without a linger: held %d, last covered %d", held, covered)
	}
}

func TestCommitLingerBounds(t *testing.T) {
	for _, linger := range []time.Duration{-time.Nanosecond, MaxCommitLinger + time.Nanosecond} {
		opts := testOptions(0)
		opts.CommitLinger = linger
		if _, err := Open(vfs.NewMemFS(), "/data", opts); err == nil {
			t.Fatalf("commit linger %v accepted", linger)
		}
	}
}
