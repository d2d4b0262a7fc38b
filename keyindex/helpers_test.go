package keyindex

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ironbus/ironbus/segment/vfs"
)

const testDir = "/data/streams/s/0/keyindex"

// fakeLog stands in for a partition log: record i has subjects[i] (nil:
// no subject); records below durable survive a crash.
type fakeLog struct {
	subjects [][]byte
	durable  uint64
	reads    int
	// ever holds every subject appended, lost ones included, so a check
	// asks about records a torn tail took away too.
	ever map[string]bool
}

func (l *fakeLog) append(subject string) uint64 {
	var s []byte
	if subject != "" {
		s = []byte(subject)
		if l.ever == nil {
			l.ever = map[string]bool{}
		}
		l.ever[subject] = true
	}
	l.subjects = append(l.subjects, s)
	return uint64(len(l.subjects) - 1)
}

func (l *fakeLog) head() uint64 { return uint64(len(l.subjects)) }

// read is Options.ReadLog: committed records only.
func (l *fakeLog) read(from, to uint64, visit func([]byte, uint64)) error {
	l.reads++
	if to > l.durable {
		return fmt.Errorf("read to %d past the durable end %d", to, l.durable)
	}
	for offset := from; offset < to; offset++ {
		if s := l.subjects[offset]; s != nil {
			visit(s, offset)
		}
	}
	return nil
}

// crash keeps the durable records only, as recovery of a torn tail does.
func (l *fakeLog) crash() { l.subjects = l.subjects[:l.durable] }

// oracle is every subject's last offset among the records below end.
func (l *fakeLog) oracle(end uint64) map[string]uint64 {
	last := map[string]uint64{}
	for offset, s := range l.subjects[:end] {
		if s != nil {
			last[string(s)] = uint64(offset)
		}
	}
	return last
}

// putAll appends subjects to the log and Puts them.
func (l *fakeLog) putAll(index *Index, subjects ...string) {
	for _, s := range subjects {
		offset := l.append(s)
		if s != "" {
			index.Put([]byte(s), offset)
		}
	}
}

// openReplayed opens the index in fsys over log l and replays the log from
// CoversUpTo to its durable end, as the broker does at boot.
func openReplayed(t testing.TB, fsys vfs.FS, l *fakeLog, opts Options) *Index {
	t.Helper()
	opts.LogEnd = l.durable
	opts.ReadLog = l.read
	index, err := Open(fsys, testDir, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	from := index.CoversUpTo()
	for offset := from; offset < l.durable; offset++ {
		if s := l.subjects[offset]; s != nil {
			index.Replay(s, offset)
		}
	}
	index.Durable(l.durable)
	if err := index.Flush(); err != nil {
		t.Fatalf("flush after replay: %v", err)
	}
	return index
}

// checkAgainst compares Last for every subject the log ever held (and
// one it never did) with the oracle of the records below end. ErrFull is
// allowed only when allowFull; it is counted.
func checkAgainst(t testing.TB, index *Index, l *fakeLog, end uint64, allowFull bool) (full int) {
	t.Helper()
	want := l.oracle(end)
	seen := map[string]bool{"never-published": true}
	for s := range l.ever {
		seen[s] = true
	}
	for subject := range seen {
		got, found, err := index.Last([]byte(subject))
		if errors.Is(err, ErrFull) && allowFull {
			full++
			continue
		}
		if err != nil {
			t.Fatalf("Last(%q): %v", subject, err)
		}
		expected, exists := want[subject]
		if found != exists || found && got != expected {
			t.Fatalf("Last(%q) = %d, %v; the log says %d, %v", subject, got, found, expected, exists)
		}
	}
	return full
}
