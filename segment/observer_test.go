package segment

import (
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/segment/vfs"
)

// countingObserver sums what the engine reports.
type countingObserver struct {
	mu                        sync.Mutex
	appends, syncs            int
	appendedRecords, appended int
	syncedRecords             uint64
	negativeDurations         bool
}

func (o *countingObserver) ObserveAppend(elapsed time.Duration, records, bytes int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.appends++
	o.appendedRecords += records
	o.appended += bytes
	o.negativeDurations = o.negativeDurations || elapsed < 0
}

func (o *countingObserver) ObserveSync(elapsed time.Duration, records uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.syncs++
	o.syncedRecords += records
	o.negativeDurations = o.negativeDurations || elapsed < 0
}

// TestObserverSeesEveryRecordOnce: every record appended is reported
// written once and made durable by exactly one sync, and the log's
// counters agree, across a reopen that starts the counts afresh.
func TestObserverSeesEveryRecordOnce(t *testing.T) {
	mem := vfs.NewMemFS()
	observer := &countingObserver{}
	opts := testOptions(21)
	opts.Observer = observer
	d := openDir(t, mem, opts)
	l := openLog(t, d)
	var bytes int
	for i := uint64(0); i < 200; i++ {
		b := body(i, 100+int(i))
		bytes += len(b)
		waitTicket(t, appendBody(t, l, b))
	}
	_ = d.Close()
	observer.mu.Lock()
	if observer.appendedRecords != 200 || observer.syncedRecords != 200 || observer.syncs == 0 || observer.negativeDurations {
		t.Fatalf("observer saw %d records written and %d synced in %d syncs; want 200 and 200", observer.appendedRecords,
			observer.syncedRecords, observer.syncs)
	}
	observer.mu.Unlock()
	if counters := l.Counters(); counters.AppendedRecords != 200 || int(counters.AppendedBytes) < bytes {
		t.Fatalf("counters %+v after 200 records of %d body bytes", counters, bytes)
	}
	if stats := d.Stats(); stats.SyncRunning != 0 {
		t.Fatalf("a closed directory reports a sync running for %s", stats.SyncRunning)
	}

	reopened := &countingObserver{}
	opts.Observer = reopened
	d = openDir(t, mem, opts)
	defer d.Close()
	l = openLog(t, d)
	waitTicket(t, appendBody(t, l, body(200, 10)))
	reopened.mu.Lock()
	defer reopened.mu.Unlock()
	if reopened.syncedRecords != 1 || l.Counters().AppendedRecords != 1 {
		t.Fatalf("after a reopen one append synced %d records, counted %d; want 1 and 1", reopened.syncedRecords, l.Counters().AppendedRecords)
	}
}
