package segment

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironbus/ironbus/segment/vfs"
)

func isDone(ticket Ticket) bool {
	select {
	case <-ticket.Done():
		return true
	default:
		return false
	}
}

// An idle log writes and syncs a TryCommitBatch on the caller's goroutine:
// the ticket is done when the call returns, with one fdatasync and no
// committer cycle.
func TestTryCommitBatchIdleCommitsInline(t *testing.T) {
	d := openDir(t, vfs.NewMemFS(), testOptions(0))
	defer d.Close()
	l := openLog(t, d)
	for i := range uint64(5) {
		before := d.Stats()
		b := body(i, 100)
		ticket, err := l.TryCommitBatch([][]byte{b}, []uint32{crc(b)})
		if err != nil {
			t.Fatal(err)
		}
		if !isDone(ticket) {
			t.Fatalf("record %d: ticket not done on return from an idle log", i)
		}
		if err := ticket.Err(); err != nil {
			t.Fatal(err)
		}
		if ticket.First != i || l.Committed() != i+1 {
			t.Fatalf("record %d: ticket first %d, committed %d", i, ticket.First, l.Committed())
		}
		after := d.Stats()
		if after.Syncs != before.Syncs+1 || after.Cycles != before.Cycles {
			t.Fatalf("record %d: syncs %d→%d, cycles %d→%d; want one sync outside any cycle", i,
				before.Syncs, after.Syncs, before.Cycles, after.Cycles)
		}
	}
	entries, _ := readAll(t, l)
	if len(entries) != 5 {
		t.Fatalf("read %d records, want 5", len(entries))
	}
}

// While a batch is still in flight (its fdatasync held back), a
// TryCommitBatch only stages: it returns at once with a ticket that
// completes with the next group commit, in offset order.
func TestTryCommitBatchBusyStages(t *testing.T) {
	syncing := make(chan struct{})
	release := make(chan struct{})
	var holding atomic.Bool
	fsys := vfs.Inject(vfs.NewMemFS(), vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpSyncData && strings.Contains(op.Path, "/streams/") && holding.CompareAndSwap(true, false) {
			close(syncing)
			<-release
		}
		return nil
	}))
	d := openDir(t, fsys, testOptions(0))
	defer d.Close()
	l := openLog(t, d)
	// The first record activates the segment (a sync of its own).
	waitTicket(t, appendBody(t, l, body(0, 100)))
	holding.Store(true)
	first := appendBody(t, l, body(1, 100))
	<-syncing
	// Once the appender is done with the first batch the token is free,
	// so TryCommitBatch gets it and must see the log busy by itself.
	l.writeMu.Lock()
	l.writeMu.Unlock()
	returned := make(chan Ticket, 1)
	go func() {
		second, err := l.TryCommitBatch([][]byte{body(2, 100)}, []uint32{crc(body(2, 100))})
		if err != nil {
			t.Error(err)
		}
		returned <- second
	}()
	var second Ticket
	select {
	case second = <-returned:
	case <-time.After(5 * time.Second):
		close(release)
		t.Fatal("TryCommitBatch blocked behind another batch's fdatasync instead of staging")
	}
	held := isDone(second) || isDone(first)
	close(release)
	if held {
		t.Fatal("a ticket completed while the first batch's fdatasync was held back")
	}
	waitTicket(t, first)
	waitTicket(t, second)
	if first.First != 1 || second.First != 2 || l.Committed() != 3 {
		t.Fatalf("offsets %d and %d, committed %d", first.First, second.First, l.Committed())
	}
}

// Inline and group commits from many goroutines, under the race detector:
// every record is acknowledged once, offsets are unique and in order, and
// everything survives a reopen.
func TestTryCommitBatchConcurrent(t *testing.T) {
	for _, mode := range []IOMode{IOBuffered, IODirect} {
		t.Run(mode.String(), func(t *testing.T) {
			mem := vfs.NewMemFS()
			opts := testOptions(0)
			opts.IOMode = mode
			d := openDir(t, mem, opts)
			l := openLog(t, d)
			const producers, each = 6, 150
			var inline atomic.Int64
			var wg sync.WaitGroup
			offsets := make([][]uint64, producers)
			for p := range producers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range each {
						index := uint64(p*each + i)
						b := body(index, bodySize(index))
						var ticket Ticket
						var err error
						if p%2 == 0 {
							ticket, err = commitWaitingForRoom(l, b)
							if err == nil && isDone(ticket) {
								inline.Add(1)
							}
						} else {
							ticket, err = l.Append(context.Background(), b, crc(b))
						}
						if err == nil {
							err = ticket.Wait(context.Background())
						}
						if err != nil {
							t.Error(err)
							return
						}
						offsets[p] = append(offsets[p], ticket.First)
					}
				}()
			}
			wg.Wait()
			if inline.Load() == 0 {
				t.Fatal("no batch was committed inline")
			}
			seen := map[uint64]bool{}
			for _, list := range offsets {
				for i, offset := range list {
					if seen[offset] {
						t.Fatalf("offset %d acknowledged twice", offset)
					}
					seen[offset] = true
					if i > 0 && offset <= list[i-1] {
						t.Fatalf("one producer's offsets out of order: %d after %d", offset, list[i-1])
					}
				}
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			d = openDir(t, mem, opts)
			defer d.Close()
			entries, _ := readAll(t, openLog(t, d))
			if len(entries) != producers*each {
				t.Fatalf("reopened log holds %d records, want %d", len(entries), producers*each)
			}
			t.Logf("%d of %d records committed inline", inline.Load(), producers*each/2)
		})
	}
}

// commitWaitingForRoom is TryCommitBatch for one record, waiting for room
// when the staging buffer is full.
func commitWaitingForRoom(l *Log, b []byte) (Ticket, error) {
	for {
		ticket, err := l.TryCommitBatch([][]byte{b}, []uint32{crc(b)})
		if !errors.Is(err, ErrFull) {
			return ticket, err
		}
		<-l.RoomFor(len(b) + 64)
	}
}

// Close waits for an inline commit that holds the write token: the files
// it writes are not closed under it.
func TestCloseWaitsForInlineCommit(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	var armed atomic.Bool
	fsys := vfs.Inject(vfs.NewMemFS(), vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpWrite && strings.Contains(op.Path, "/streams/") && armed.CompareAndSwap(true, false) {
			close(entered)
			<-release
		}
		return nil
	}))
	d := openDir(t, fsys, testOptions(0))
	l := openLog(t, d)
	armed.Store(true)
	committed := make(chan error, 1)
	go func() {
		b := body(0, 100)
		ticket, err := l.TryCommitBatch([][]byte{b}, []uint32{crc(b)})
		if err == nil {
			err = ticket.Wait(context.Background())
		}
		committed <- err
	}()
	<-entered
	closed := make(chan struct{})
	go func() {
		_ = l.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while an inline commit was writing")
	case <-committed:
		t.Fatal("the inline commit returned before its write finished")
	default:
	}
	close(release)
	<-closed
	if err := <-committed; err != nil && !errors.Is(err, ErrClosed) {
		t.Fatalf("inline commit across Close: %v", err)
	}
	_ = d.Close()
}

// OnDone runs its callback once the ticket completes, after Done has
// closed, whether the records commit or fail, and at once for a ticket
// already complete.
func TestTicketOnDone(t *testing.T) {
	d := openDir(t, vfs.NewMemFS(), testOptions(0))
	defer d.Close()
	l := openLog(t, d)

	called := make(chan bool, 1)
	ticket := appendBody(t, l, body(0, 100))
	ticket.OnDone(func() { called <- isDone(ticket) })
	select {
	case closed := <-called:
		if !closed {
			t.Fatal("the callback ran before Done closed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the callback never ran for a committed ticket")
	}

	ran := false
	ticket.OnDone(func() { ran = true })
	if !ran {
		t.Fatal("OnDone on a complete ticket did not call at once")
	}

	// A ticket that fails (the log closes under a staged batch whose
	// write is held back) calls back too.
	release := make(chan struct{})
	var hold atomic.Bool
	fsys := vfs.Inject(vfs.NewMemFS(), vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpSyncData && strings.Contains(op.Path, "/streams/") && hold.Load() {
			<-release
			return vfs.ErrInjected
		}
		return nil
	}))
	d2 := openDir(t, fsys, testOptions(0))
	defer d2.Close()
	l2 := openLog(t, d2)
	waitTicket(t, appendBody(t, l2, body(0, 100)))
	hold.Store(true)
	failing := appendBody(t, l2, body(1, 100))
	errs := make(chan error, 1)
	failing.OnDone(func() { errs <- failing.Err() })
	close(release)
	select {
	case err := <-errs:
		if err == nil {
			t.Fatal("the callback saw a failed ticket succeed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the callback never ran for a failed ticket")
	}
}

// Behind a device whose fdatasync stalls, TryCommitBatch stops committing
// inline (its caller would wait on the disk with it) and starts again
// once a sync is fast: after a slow sync, and while one runs long. The
// committer's record of syncs is set by hand, so background syncs (a
// segment being prepared) cannot blur the test. Each way of telling is
// certain in one direction only, so each assertion uses the certain one:
// an inline commit is always done on return (the group commit path can
// be done by then too, rarely), and a commit through the committer
// always counts a committer cycle (a cycle left over from an earlier
// write can be counted beside an inline commit too). Where inline is
// expected, a few attempts are allowed: the appender may hold the write
// token for a moment after a write (installing the next prepared
// segment), and then a healthy log rightly stages.
func TestTryCommitBatchAvoidsAStallingDevice(t *testing.T) {
	d := openDir(t, vfs.NewMemFS(), testOptions(0))
	defer d.Close()
	l := openLog(t, d)
	c := d.committer
	commit := func(index uint64) (doneOnReturn, cycled bool) {
		t.Helper()
		before := d.Stats()
		b := body(index, 100)
		ticket, err := l.TryCommitBatch([][]byte{b}, []uint32{crc(b)})
		if err != nil {
			t.Fatal(err)
		}
		doneOnReturn = isDone(ticket)
		waitTicket(t, ticket)
		return doneOnReturn, d.Stats().Cycles != before.Cycles
	}
	next := uint64(1)
	commitsInline := func() bool {
		t.Helper()
		for range 50 {
			done, _ := commit(next)
			next++
			if done {
				return true
			}
			time.Sleep(time.Millisecond)
		}
		return false
	}
	waitTicket(t, appendBody(t, l, body(0, 100))) // activates the segment
	if !commitsInline() {
		t.Fatal("an idle log on a healthy device did not commit inline")
	}
	c.lastSync.Store(int64(2 * inlineSlowSync))
	if _, cycled := commit(next); !cycled {
		t.Fatal("committed inline right after a sync took 40 ms")
	}
	next++
	// That commit went through the committer, whose fast sync cleared
	// the mark.
	if !commitsInline() {
		t.Fatal("did not commit inline again after a fast sync")
	}
	// An fdatasync of the directory that has been running since the
	// directory opened, over 4 ms ago.
	for time.Since(c.started) <= 2*inlineRunningLimit {
		time.Sleep(time.Millisecond)
	}
	c.syncStarted.Store(1)
	// The committer's own sync of this commit clears the mark as it ends.
	if _, cycled := commit(next); !cycled {
		t.Fatal("committed inline while another fdatasync had been running for 4 ms")
	}
}

// A full disk under an inline commit fails its ticket with the typed
// ErrNoSpace, on return, and leaves the log writable: the next inline
// commit after space returns succeeds and nothing acknowledged is lost.
func TestTryCommitBatchOnAFullDisk(t *testing.T) {
	mem := vfs.NewMemFS()
	fault := &vfs.Toggle{Match: vfs.KindIs(vfs.OpWrite), Err: vfs.InjectedNoSpace}
	opts := testOptions(4)
	d := openDir(t, vfs.Inject(mem, fault), opts)
	l := openLog(t, d)
	acked := map[uint64]uint64{}
	next := uint64(0)
	commit := func() (Ticket, error) {
		b := body(next, bodySize(next))
		ticket, err := l.TryCommitBatch([][]byte{b}, []uint32{crc(b)})
		if err == nil {
			err = ticket.Wait(context.Background())
		}
		return ticket, err
	}
	for range 20 {
		ticket, err := commit()
		if err != nil {
			t.Fatal(err)
		}
		acked[ticket.First] = next
		next++
	}
	fault.Set(true)
	for range 3 {
		if _, err := commit(); !errors.Is(err, ErrNoSpace) {
			t.Fatalf("inline commit on a full disk: %v, want ErrNoSpace", err)
		}
	}
	if l.Err() != nil {
		t.Fatalf("no space must not freeze the log: %v", l.Err())
	}
	fault.Set(false)
	for range 20 {
		ticket, err := commit()
		if err != nil {
			t.Fatalf("after space returned: %v", err)
		}
		acked[ticket.First] = next
		next++
	}
	assertLogAndReopened(t, d, l, mem, opts, acked)
}

// A failed fdatasync under an inline commit freezes the log as the
// committer's would: the ticket fails with ErrFrozen, nothing after it is
// acknowledged, and committed records stay readable.
func TestTryCommitBatchSyncFailureFreezes(t *testing.T) {
	mem := vfs.NewMemFS()
	fault := &vfs.Toggle{Match: vfs.KindIs(vfs.OpSyncData), Err: vfs.ErrInjected}
	d := openDir(t, vfs.Inject(mem, fault), testOptions(5))
	defer d.Close()
	l := openLog(t, d)
	b := body(0, 100)
	ticket, err := l.TryCommitBatch([][]byte{b}, []uint32{crc(b)})
	if err != nil || ticket.Wait(context.Background()) != nil {
		t.Fatalf("first commit: %v / %v", err, ticket.Err())
	}
	fault.Set(true)
	b = body(1, 100)
	ticket, err = l.TryCommitBatch([][]byte{b}, []uint32{crc(b)})
	if err == nil {
		err = ticket.Wait(context.Background())
	}
	if !errors.Is(err, ErrFrozen) {
		t.Fatalf("inline commit with a failing fdatasync: %v, want ErrFrozen", err)
	}
	fault.Set(false)
	b = body(2, 100)
	if _, err := l.TryCommitBatch([][]byte{b}, []uint32{crc(b)}); !errors.Is(err, ErrFrozen) {
		t.Fatalf("a commit after the failure: %v, want ErrFrozen (never retried)", err)
	}
	if l.Committed() != 1 {
		t.Fatalf("committed %d, want 1", l.Committed())
	}
	entries, _ := readAll(t, l)
	if len(entries) != 1 {
		t.Fatalf("read %d committed records, want 1", len(entries))
	}
}
