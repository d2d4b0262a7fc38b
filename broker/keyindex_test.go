package broker

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/ironbus/ironbus/keyindex"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// publishSubject appends one record of subject to part (every append
// stages and indexes under checkMu) and waits until it is durable.
func publishSubject(t testing.TB, part *Partition, subject string) uint64 {
	t.Helper()
	return publishSized(t, part, subject, 5)
}

// publishSized is publishSubject with a payload of size bytes.
func publishSized(t testing.TB, part *Partition, subject string, size int) uint64 {
	t.Helper()
	body, err := record.AppendBody(nil, record.Body{Subject: []byte(subject), Payload: make([]byte, size)})
	if err != nil {
		t.Fatal(err)
	}
	ticket, err := part.Append(context.Background(), [][]byte{body}, []uint32{record.Checksum(body)}, record.FrameSize(len(body)))
	if err != nil {
		t.Fatal(err)
	}
	<-ticket.Done()
	if err := ticket.Err(); err != nil {
		t.Fatal(err)
	}
	return ticket.First
}

// wantLast checks the subject index's answer for subject.
func wantLast(t testing.TB, part *Partition, subject string, offset uint64, found bool) {
	t.Helper()
	part.checkMu.Lock()
	got, ok, err := part.lastSubjectOffset([]byte(subject))
	part.checkMu.Unlock()
	if err != nil || ok != found || ok && got != offset {
		t.Fatalf("Last(%q) = %d, %v, %v; want %d, %v", subject, got, ok, err, offset, found)
	}
}

// syncBuffer is a log sink safe for the broker's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func openLogged(t *testing.T, cfg Config) (*Broker, *syncBuffer) {
	t.Helper()
	sink := &syncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(sink, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b, sink
}

// TestSubjectIndexAcrossRestarts: the index answers the last offset of
// each subject before and after a clean restart and after a restart whose
// index directory was deleted (rebuilt from the log); the directory
// beside the segments troubles neither recovery nor the stream list.
func TestSubjectIndexAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	b, sink := openLogged(t, Config{DataDir: dir})
	createTestStream(t, b, "state", 2)
	part := partitionOf(t, b, "state", 1)
	wantLast(t, part, "device.1", 0, false)
	first := publishSubject(t, part, "device.1")
	publishSubject(t, part, "device.2")
	last := publishSubject(t, part, "device.1")
	wantLast(t, part, "device.1", last, true)
	b.Drain()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for round, remove := range []bool{false, true} {
		if remove {
			if err := removeAll(vfs.OS{}, path.Join(dir, "streams", "state", "1", segment.KeyIndexDirName)); err != nil {
				t.Fatal(err)
			}
		}
		b, sink = openLogged(t, Config{DataDir: dir})
		part = partitionOf(t, b, "state", 1)
		wantLast(t, part, "device.1", last, true)
		wantLast(t, part, "device.2", first+1, true)
		wantLast(t, partitionOf(t, b, "state", 0), "device.1", 0, false)
		if logged := sink.String(); strings.Contains(logged, "unknown file") || strings.Contains(logged, "adopted") {
			t.Fatalf("round %d: the index directory was taken for something else:\n%s", round, logged)
		}
		if remove != strings.Contains(sink.String(), "subject index rebuilt") {
			t.Fatalf("round %d: rebuilt logged %v, index removed %v", round, !remove, remove)
		}
		if len(b.Streams()) != 1 {
			t.Fatalf("round %d: streams %+v", round, b.Streams())
		}
		b.Drain()
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// removeAll deletes a directory tree.
func removeAll(fsys vfs.FS, dir string) error {
	names, err := fsys.List(dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := fsys.Remove(path.Join(dir, name)); err != nil {
			return err
		}
	}
	return fsys.Remove(dir)
}

// TestPurgeKeepsSubjectOffsets: a purge drops the records but not their
// place in the log's history: the index answers the purged last offsets
// (so a create-only append after a purge fails), across a restart too.
func TestPurgeKeepsSubjectOffsets(t *testing.T) {
	dir := t.TempDir()
	b := openOnce(t, dir)
	part := partitionOf(t, b, "state", 0)
	publishSubject(t, part, "a")
	last := publishSubject(t, part, "a")
	if _, _, err := b.PurgeStream(context.Background(), "state"); err != nil {
		t.Fatal(err)
	}
	part = partitionOf(t, b, "state", 0)
	wantLast(t, part, "a", last, true)
	next := publishSubject(t, part, "b")
	wantLast(t, part, "b", next, true)
	b.Drain()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openOnce(t, dir)
	defer b.Close()
	part = partitionOf(t, b, "state", 0)
	wantLast(t, part, "a", last, true)
	wantLast(t, part, "b", next, true)
}

// TestRemovedStreamForgetsSubjects: removing a stream removes its index
// with its directory; the stream created again under the name starts
// with none.
func TestRemovedStreamForgetsSubjects(t *testing.T) {
	dir := t.TempDir()
	b := openOnce(t, dir)
	defer b.Close()
	publishSubject(t, partitionOf(t, b, "state", 0), "a")
	if _, _, err := b.RemoveStream("state"); err != nil {
		t.Fatal(err)
	}
	if names, _ := (vfs.OS{}).List(path.Join(dir, "streams")); len(names) != 0 {
		t.Fatalf("left in streams/: %v", names)
	}
	wantLast(t, partitionOf(t, b, "state", 0), "a", 0, false)
}

// TestSubjectIndexAfterPowerCut: records acknowledged before a power cut
// are answered after it, whether or not the index was written; the
// index's files survive as the cut left them.
func TestSubjectIndexAfterPowerCut(t *testing.T) {
	for _, flushed := range []bool{false, true} {
		mem := vfs.NewMemFS()
		b, err := Open(Config{DataDir: "/data", FS: mem})
		if err != nil {
			t.Fatal(err)
		}
		part := partitionOf(t, b, "state", 0)
		last := map[string]uint64{}
		for n := range 300 {
			subject := []string{"a", "b", "c", "d", "e"}[n%5] + string(rune('0'+n%7))
			last[subject] = publishSubject(t, part, subject)
			if flushed && n == 200 {
				if err := part.syncSubjectIndex(); err != nil {
					t.Fatal(err)
				}
			}
		}
		image := mem.CrashClone(vfs.CrashOptions{Seed: 1, KeepUnsynced: 0.5, Reorder: true, Tear: true})
		b.Drain()
		_ = b.Close()
		reopened, err := Open(Config{DataDir: "/data", FS: image})
		if err != nil {
			t.Fatal(err)
		}
		part = partitionOf(t, reopened, "state", 0)
		for subject, offset := range last {
			wantLast(t, part, subject, offset, true)
		}
		reopened.Drain()
		if err := reopened.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRetentionKeepsSubjectOffsets: retention deleting a subject's last
// record does not forget it; the index covered the deleted records
// before they went, so a restart needs none of them.
func TestRetentionKeepsSubjectOffsets(t *testing.T) {
	dir := t.TempDir()
	clocks := newClocks()
	b := openRetentionBroker(t, Config{DataDir: dir, Retention: RetentionConfig{Stream: StreamRetention{MaxRecords: 40}}}, clocks)
	part := partitionOf(t, b, "state", 0)
	old := publishSized(t, part, "rarely.updated", 4<<10)
	var last uint64
	for range 120 {
		last = publishSized(t, part, "often.updated", 4<<10)
	}
	b.retentionPass()
	first := part.Log().FirstOffset()
	if first <= old {
		t.Fatalf("retention kept offset %d (first %d)", old, first)
	}
	if covers := part.subjects.CoversUpTo(); covers < first {
		t.Fatalf("the index covers up to %d, below the first retained offset %d", covers, first)
	}
	wantLast(t, part, "rarely.updated", old, true)
	b.Drain()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b, sink := openLogged(t, Config{DataDir: dir, Storage: segment.Options{SegmentSize: segment.MinSegmentSize}})
	defer b.Close()
	part = partitionOf(t, b, "state", 0)
	wantLast(t, part, "rarely.updated", old, true)
	wantLast(t, part, "often.updated", last, true)
	if strings.Contains(sink.String(), "did not cover") {
		t.Fatalf("the index lost records to retention:\n%s", sink.String())
	}
}

// TestLastSubjectOffsetErrors: without an index, an expectation is a
// storage failure; an index that cannot be sure is a retryable busy.
func TestLastSubjectOffsetErrors(t *testing.T) {
	b := openTestBroker(t, Config{})
	part := partitionOf(t, b, "state", 0)
	index := part.subjects
	part.subjects = nil
	if _, _, err := part.lastSubjectOffset([]byte("a")); !errors.Is(err, ErrStorage) {
		t.Fatalf("no index: %v", err)
	}
	part.subjects = index
	// A batch of mixed records: one without a subject.
	bodies := make([][]byte, 3)
	for n, subject := range []string{"a", "", "b"} {
		bodies[n], _ = record.AppendBody(nil, record.Body{Subject: []byte(subject), Payload: []byte("x")})
	}
	part.checkMu.Lock()
	part.indexSubjects(bodies, 10)
	part.checkMu.Unlock()
	wantLast(t, part, "a", 10, true)
	wantLast(t, part, "b", 12, true)
	wantLast(t, part, "", 0, false)

	// An index whose overlay is full while nothing is durable leaves
	// updates out: the answer is a retryable busy, not a guess.
	small, err := keyindex.Open(vfs.NewMemFS(), "/keyindex", keyindex.Options{Overlay: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	part.subjects = small
	defer func() { part.subjects = index }()
	third, _ := record.AppendBody(nil, record.Body{Subject: []byte("c"), Payload: []byte("x")})
	part.checkMu.Lock()
	part.indexSubjects(append(bodies, third), 10)
	_, _, err = part.lastSubjectOffset([]byte("c"))
	part.checkMu.Unlock()
	var retryable *RetryableError
	if !errors.Is(err, ErrBusy) || !errors.Is(err, keyindex.ErrFull) || !errors.As(err, &retryable) {
		t.Fatalf("a left-out subject: %v", err)
	}
}
