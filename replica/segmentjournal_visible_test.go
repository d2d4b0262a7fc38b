package replica

import (
	"testing"

	"github.com/ironbus/ironbus/segment/vfs"
)

// TestSegmentJournalReadersSeeOnlyCommitted: records a replica synced but
// did not yet commit stay invisible to the partition's readers, also
// after a restart that recovers them from disk; the commit shows them.
func TestSegmentJournalReadersSeeOnlyCommitted(t *testing.T) {
	fsys := vfs.NewMemFS()
	j := openJournal(t, fsys)
	committed := []Entry{dataEntry(1, 1, 0, 3, 40), dataEntry(2, 1, 3, 2, 40)}
	pending := []Entry{dataEntry(3, 1, 5, 4, 40)}
	if err := j.Append(append(append([]Entry(nil), committed...), pending...)); err != nil {
		t.Fatal(err)
	}
	if err := j.SaveState(State{Term: 1, Commit: 2}); err != nil {
		t.Fatal(err)
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := len(readRecords(t, j.log)); got != 0 {
		t.Fatalf("before any commit readers see %d records", got)
	}
	j.SetVisible(5)
	requireRecords(t, j.log, committed, "committed up to offset 5")
	j.close()

	j = openJournal(t, fsys)
	defer j.close()
	requireRecords(t, j.log, committed, "reopened with commit 2")
	j.SetVisible(9)
	requireRecords(t, j.log, append(committed, pending...), "all committed")
}

// TestSegmentJournalVisibleAcrossRolls: entries synced and made visible
// one at a time, as a replica applies them, stay readable past segment
// rolls.
func TestSegmentJournalVisibleAcrossRolls(t *testing.T) {
	j := openJournal(t, vfs.NewMemFS())
	defer j.close()
	var all []Entry
	next := uint64(0)
	for index := uint64(1); index <= 300; index++ {
		e := dataEntry(index, 1, next, 4, 300)
		next += 4
		all = append(all, e)
		if err := j.Append([]Entry{e}); err != nil {
			t.Fatal(err)
		}
		if err := j.Sync(); err != nil {
			t.Fatal(err)
		}
		j.SetVisible(next)
	}
	if len(j.log.Segments()) < 3 {
		t.Fatalf("%d segments: the test wants rolls", len(j.log.Segments()))
	}
	requireRecords(t, j.log, all, "visible one entry at a time")
}
