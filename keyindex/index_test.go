package keyindex

import (
	"errors"
	"fmt"
	"path"
	"testing"

	"github.com/ironbus/ironbus/segment/vfs"
)

// TestLastAnswersPutsBeforeAnyFlush: the overlay answers at once, for
// records not yet durable too; an unknown subject is "none".
func TestLastAnswersPutsBeforeAnyFlush(t *testing.T) {
	l := &fakeLog{}
	index := openReplayed(t, vfs.NewMemFS(), l, Options{Seed: 7})
	defer index.Close()
	l.putAll(index, "a", "b", "", "a", "c")
	checkAgainst(t, index, l, l.head(), false)
	if _, found, err := index.Last([]byte("zzz")); found || err != nil {
		t.Fatalf("unknown subject: found %v, %v", found, err)
	}
}

// TestFlushWritesOnlyDurable: a flush before the records are durable
// writes nothing and does not move CoversUpTo; after Durable it does.
func TestFlushWritesOnlyDurable(t *testing.T) {
	mem := vfs.NewMemFS()
	l := &fakeLog{}
	index := openReplayed(t, mem, l, Options{Seed: 7, CoverStep: 1})
	l.putAll(index, "a", "b", "a")
	if err := index.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := index.CoversUpTo(); got != 0 {
		t.Fatalf("covers %d before anything is durable", got)
	}
	l.durable = l.head()
	index.Durable(l.durable)
	if err := index.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := index.CoversUpTo(); got != 3 {
		t.Fatalf("covers %d after everything is durable, want 3", got)
	}
	checkAgainst(t, index, l, l.head(), false)
	if err := index.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened without replay: the table alone answers.
	index, err := Open(mem, testDir, Options{LogEnd: l.durable})
	if err != nil {
		t.Fatal(err)
	}
	defer index.Close()
	if index.Rebuilt() != "" || index.CoversUpTo() != 3 {
		t.Fatalf("reopen: rebuilt %q, covers %d", index.Rebuilt(), index.CoversUpTo())
	}
	checkAgainst(t, index, l, l.head(), false)
}

// TestTornTailNeverInTheTable: records put but never durable are lost to
// a crash; their offsets go to other subjects; the index never names the
// lost records.
func TestTornTailNeverInTheTable(t *testing.T) {
	mem := vfs.NewMemFS()
	l := &fakeLog{}
	index := openReplayed(t, mem, l, Options{Seed: 7, Overlay: 2})
	l.putAll(index, "a", "b")
	l.durable = l.head()
	index.Durable(l.durable)
	l.putAll(index, "a", "lost", "c", "d", "e")
	if err := index.Flush(); err != nil {
		t.Fatal(err)
	}
	image := mem.CrashClone(vfs.CrashOptions{KeepUnsynced: 1})
	_ = index.Close()
	l.crash()
	index = openReplayed(t, image, l, Options{})
	defer index.Close()
	checkAgainst(t, index, l, l.durable, false)
	// The lost offsets go to other records.
	l.putAll(index, "x", "y", "c")
	checkAgainst(t, index, l, l.head(), false)
}

// TestGrowsOnline: far more subjects than the first capacity, all answered,
// across a reopen; the file grew.
func TestGrowsOnline(t *testing.T) {
	mem := vfs.NewMemFS()
	l := &fakeLog{}
	opts := Options{Seed: 7, Capacity: 100, MaxCapacity: 10_000, Overlay: 64}
	index := openReplayed(t, mem, l, opts)
	for n := range 3000 {
		l.putAll(index, fmt.Sprint("subject-", n%2000))
		if n%50 == 0 {
			l.durable = l.head()
			index.Durable(l.durable)
			if err := index.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkAgainst(t, index, l, l.head(), false)
	l.durable = l.head()
	index.Durable(l.durable)
	if err := index.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := mem.Stat(path.Join(testDir, tableFileName))
	if err != nil || info.Size <= tableSize(pagesFor(100)) {
		t.Fatalf("table size %d (%v), first size %d", info.Size, err, tableSize(pagesFor(100)))
	}
	index = openReplayed(t, mem, l, opts)
	defer index.Close()
	checkAgainst(t, index, l, l.head(), false)
}

// TestFullAnswersErrFull: past MaxCapacity new subjects get ErrFull,
// never "none"; the ones held still answer; the flag survives a reopen.
func TestFullAnswersErrFull(t *testing.T) {
	mem := vfs.NewMemFS()
	l := &fakeLog{}
	opts := Options{Seed: 7, Capacity: 95, MaxCapacity: 95, Overlay: 32}
	index := openReplayed(t, mem, l, opts)
	for n := range 1000 {
		l.putAll(index, fmt.Sprint("subject-", n))
		l.durable = l.head()
		index.Durable(l.durable)
		if n%10 == 0 {
			if err := index.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := index.Flush(); err != nil {
		t.Fatal(err)
	}
	full := checkAgainst(t, index, l, l.head(), true)
	if full == 0 || full == 1001 {
		t.Fatalf("%d of 1001 subjects answered ErrFull", full)
	}
	if _, _, err := index.Last([]byte("never-published")); !errors.Is(err, ErrFull) {
		t.Fatalf("an unknown subject in a full index: %v", err)
	}
	if err := index.Close(); err != nil {
		t.Fatal(err)
	}
	index = openReplayed(t, mem, l, opts)
	if !errors.Is(ignoreValue(index.Last([]byte("never-published"))), ErrFull) {
		t.Fatal("the full flag did not survive a reopen")
	}
	_ = index.Close()
	// A larger maximum: rebuilt from the log, everything answers.
	opts.MaxCapacity = 4000
	index = openReplayed(t, mem, l, opts)
	defer index.Close()
	if index.Rebuilt() == "" {
		t.Fatal("a full table was kept although it may grow now")
	}
	checkAgainst(t, index, l, l.head(), false)
}

func ignoreValue(_ uint64, _ bool, err error) error { return err }

// TestLeftOutUpdatesCatchUp: with both generations full and nothing
// durable, Puts are left out; those subjects answer ErrFull until a flush
// reads them back from the log; nobody gets a wrong answer.
func TestLeftOutUpdatesCatchUp(t *testing.T) {
	l := &fakeLog{}
	index := openReplayed(t, vfs.NewMemFS(), l, Options{Seed: 7, Overlay: 4})
	defer index.Close()
	for n := range 40 {
		l.putAll(index, fmt.Sprint("s", n%13))
	}
	if full := checkAgainst(t, index, l, l.head(), true); full == 0 {
		t.Fatal("no subject was left out with an overlay of 4")
	}
	reads := l.reads
	l.durable = l.head()
	index.Durable(l.durable)
	if err := index.Flush(); err != nil {
		t.Fatal(err)
	}
	if l.reads == reads {
		t.Fatal("the flush did not read the left-out range back")
	}
	checkAgainst(t, index, l, l.head(), false)
}

// TestCoversPastLogEndRebuilds: a table covering past the log's end (a log
// recovery cut or a restore) is not trusted.
func TestCoversPastLogEndRebuilds(t *testing.T) {
	mem := vfs.NewMemFS()
	l := &fakeLog{}
	index := openReplayed(t, mem, l, Options{Seed: 7, CoverStep: 1})
	l.putAll(index, "a", "b", "c", "d")
	l.durable = l.head()
	index.Durable(l.durable)
	if err := index.Close(); err != nil {
		t.Fatal(err)
	}
	l.durable = 2
	l.crash()
	index = openReplayed(t, mem, l, Options{})
	defer index.Close()
	if index.Rebuilt() == "" {
		t.Fatal("a table covering past the log's end was kept")
	}
	checkAgainst(t, index, l, l.durable, false)
}

// TestCorruptPageIsRebuilt: both copies of a page damaged: Last reports
// ErrCorrupt, Close removes the file, the next open rebuilds it.
func TestCorruptPageIsRebuilt(t *testing.T) {
	mem := vfs.NewMemFS()
	l := &fakeLog{}
	index := openReplayed(t, mem, l, Options{Seed: 7, Capacity: 95})
	l.putAll(index, "a", "b")
	l.durable = l.head()
	index.Durable(l.durable)
	if err := index.Close(); err != nil {
		t.Fatal(err)
	}
	file, err := mem.OpenFile(path.Join(testDir, tableFileName), vfs.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, 2*blockSize)
	for n := range junk {
		junk[n] = byte(n)
	}
	if _, err := file.WriteAt(junk, pageOffset(0, 0)); err != nil {
		t.Fatal(err)
	}
	_ = file.Close()
	index, err = Open(mem, testDir, Options{LogEnd: l.durable})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := index.Last([]byte("a")); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Last over a corrupt page: %v", err)
	}
	if _, _, err := index.Last([]byte("b")); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("the index answered after finding corruption: %v", err)
	}
	_ = index.Close()
	index = openReplayed(t, mem, l, Options{})
	defer index.Close()
	if index.Rebuilt() == "" {
		t.Fatal("the corrupt table was kept")
	}
	checkAgainst(t, index, l, l.durable, false)
}
