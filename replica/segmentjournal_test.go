package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// The tests run the journal on real segment files in a MemFS, with the
// smallest segments, so a few dozen entries roll several times.

var journalLog = segment.LogID{Stream: "orders", Partition: 3}

type fixedClock struct{}

func (fixedClock) Now() time.Time { return time.Unix(1_800_000_000, 0) }

// seeded is a deterministic source of segment tokens; a log draws them
// from two goroutines (a roll, and the next segment prepared meanwhile).
type seeded struct {
	mu  *sync.Mutex
	rng *rand.Rand
}

func (s seeded) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range p {
		p[i] = byte(s.rng.Uint32())
	}
	return len(p), nil
}

func journalOptions(seed uint64) segment.Options {
	return segment.Options{SegmentSize: segment.MinSegmentSize, StagingBytes: 16 << 10, Clock: fixedClock{},
		Random: seeded{&sync.Mutex{}, rand.New(rand.NewPCG(seed, seed+1))}}
}

// openedJournal is a journal with the directory and log under it.
type openedJournal struct {
	*SegmentJournal
	dir *segment.Dir
	log *segment.Log
}

func openJournalOn(fsys vfs.FS, seed uint64) (*openedJournal, error) {
	return openJournalWith(fsys, journalOptions(seed))
}

func openJournalWith(fsys vfs.FS, opts segment.Options) (*openedJournal, error) {
	dir, err := segment.Open(fsys, "/data", opts)
	if err != nil {
		return nil, err
	}
	log, err := dir.OpenLog(journalLog)
	if err != nil {
		_ = dir.Close()
		return nil, err
	}
	j, err := OpenSegmentJournal(log)
	if err != nil {
		_ = dir.Close()
		return nil, err
	}
	return &openedJournal{SegmentJournal: j, dir: dir, log: log}, nil
}

func openJournal(t testing.TB, fsys vfs.FS) *openedJournal {
	t.Helper()
	j, err := openJournalOn(fsys, 1)
	if err != nil {
		t.Fatalf("open journal: %v", err)
	}
	return j
}

func (j *openedJournal) close() { _ = j.dir.Close() }

// recordBody is a record body that names its offset and the entry's term,
// so a reader can tell a replaced record from the one that replaced it.
func recordBody(offset, term uint64, size int) []byte {
	payload := make([]byte, max(size, 16))
	binary.LittleEndian.PutUint64(payload, offset)
	binary.LittleEndian.PutUint64(payload[8:], term)
	for i := 16; i < len(payload); i++ {
		payload[i] = byte(offset*31 + term + uint64(i))
	}
	body, err := record.AppendBody(nil, record.Body{Key: []byte("k"), Payload: payload})
	if err != nil {
		panic(err)
	}
	return body
}

// dataEntry is a data entry of count records from offset base.
func dataEntry(index, term, base uint64, count int, size int) Entry {
	data := AppendDataHeader(nil, DataHeader{Count: uint32(count), BaseOffset: base})
	for i := range count {
		body := recordBody(base+uint64(i), term, size+i*7)
		data = record.AppendFrame(data, base+uint64(i), int64(1_700_000_000_000_000_000+index), body, record.Checksum(body), 0)
	}
	return Entry{Index: index, Term: term, Type: EntryNormal, Data: data}
}

func noopEntry(index, term uint64) Entry { return Entry{Index: index, Term: term} }

func controlEntry(index, term uint64, body string) Entry {
	return Entry{Index: index, Term: term, Data: AppendControl(nil, 7, []byte(body))}
}

func confEntry(index, term uint64, body string) Entry {
	return Entry{Index: index, Term: term, Type: EntryConfChange, Data: []byte(body)}
}

// entrySource builds entries of a log the way a leader does: data
// entries take offsets from where the last one ended.
type entrySource struct {
	next uint64 // next offset
}

func (s *entrySource) entry(rng *rand.Rand, index, term uint64) Entry {
	switch k := rng.IntN(10); {
	case k == 0:
		return noopEntry(index, term)
	case k == 1:
		return controlEntry(index, term, fmt.Sprint("cursor ", index))
	case k == 2:
		return confEntry(index, term, fmt.Sprint("conf ", index))
	default:
		count := 1 + rng.IntN(4)
		size := 20 + rng.IntN(3000)
		if rng.IntN(20) == 0 {
			size = 20_000
		}
		e := dataEntry(index, term, s.next, count, size)
		s.next += uint64(count)
		return e
	}
}

// nextOffsetAfter is the offset after the last data entry of entries, or
// from when none is.
func nextOffsetAfter(entries []Entry, from uint64) uint64 {
	for i := len(entries) - 1; i >= 0; i-- {
		if p, err := DecodePayload(entries[i].Data); err == nil && entries[i].Type == EntryNormal && p.Kind == PayloadData {
			return p.Data.BaseOffset + uint64(p.Data.Count)
		}
	}
	return from
}

func requireEntries(t testing.TB, j Journal, want []Entry, label string) {
	t.Helper()
	if len(want) == 0 {
		return
	}
	got, err := j.Entries(want[0].Index, want[len(want)-1].Index+1, 1<<40)
	if err != nil {
		t.Fatalf("%s: entries [%d, %d]: %v", label, want[0].Index, want[len(want)-1].Index, err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d", label, len(got), len(want))
	}
	for i := range want {
		requireEntry(t, got[i], want[i], label)
		term, err := j.Term(want[i].Index)
		if err != nil || term != want[i].Term {
			t.Fatalf("%s: Term(%d) = %d, %v; want %d", label, want[i].Index, term, err, want[i].Term)
		}
	}
}

func requireEntry(t testing.TB, got, want Entry, label string) {
	t.Helper()
	if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type || !bytes.Equal(got.Data, want.Data) ||
		(got.Data == nil) != (len(want.Data) == 0) {
		t.Fatalf("%s: entry %d: got index %d term %d type %d data %d bytes (nil %v), want term %d type %d data %d bytes",
			label, want.Index, got.Index, got.Term, got.Type, len(got.Data), got.Data == nil, want.Term, want.Type, len(want.Data))
	}
}

// readRecords reads every committed record of the log with a segment
// reader: offsets and bodies, gaps refused.
func readRecords(t testing.TB, log *segment.Log) map[uint64][]byte {
	t.Helper()
	r := log.NewReader(log.FirstOffset())
	defer r.Close()
	out := map[uint64][]byte{}
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("reading records at %d: %v", r.Offset(), err)
		}
		if e.Gap != nil {
			t.Fatalf("reader found a gap %+v", *e.Gap)
		}
		out[e.Offset] = bytes.Clone(e.Body)
	}
}

// recordsOf lists the records data entries carry, by offset.
func recordsOf(entries []Entry) map[uint64][]byte {
	out := map[uint64][]byte{}
	for _, e := range entries {
		p, err := DecodePayload(e.Data)
		if e.Type != EntryNormal || err != nil || p.Kind != PayloadData {
			continue
		}
		frames := p.Frames
		for len(frames) > 0 {
			h, body, err := record.ParseFrame(frames, 1<<24)
			if err != nil {
				panic(err)
			}
			out[h.Offset] = bytes.Clone(body)
			frames = frames[h.FrameLength:]
		}
	}
	return out
}

func requireRecords(t testing.TB, log *segment.Log, entries []Entry, label string) {
	t.Helper()
	got, want := readRecords(t, log), recordsOf(entries)
	if len(got) != len(want) {
		t.Fatalf("%s: reader found %d records, entries hold %d", label, len(got), len(want))
	}
	for offset, body := range want {
		if !bytes.Equal(got[offset], body) {
			t.Fatalf("%s: record at offset %d differs", label, offset)
		}
	}
}

func TestSegmentJournalRoundTrip(t *testing.T) {
	mem := vfs.NewMemFS()
	j := openJournal(t, mem)
	entries := []Entry{
		noopEntry(1, 1),
		dataEntry(2, 1, 0, 1, 100),
		dataEntry(3, 1, 1, 3, 500),
		controlEntry(4, 1, "consumer cursor"),
		confEntry(5, 2, "conf change v2 bytes"),
		noopEntry(6, 2),
		dataEntry(7, 2, 4, 2, 20_000),
		{Index: 8, Term: 2, Data: AppendControl(nil, 1, nil)},
	}
	source := entrySource{next: 6}
	rng := rand.New(rand.NewPCG(1, 2))
	for index := uint64(9); index <= 60; index++ {
		entries = append(entries, source.entry(rng, index, 3))
	}
	if err := j.Append(entries); err != nil {
		t.Fatalf("append: %v", err)
	}
	if first, last := j.FirstIndex(), j.LastIndex(); first != 1 || last != 60 {
		t.Fatalf("FirstIndex %d LastIndex %d, want 1 and 60", first, last)
	}
	requireEntries(t, j, entries, "before sync")
	state := State{Term: 3, Vote: NewReplicaID(2, 9), Commit: 40, ConfigIndex: 5,
		Config: Membership{Voters: []ReplicaID{NewReplicaID(1, 1), NewReplicaID(2, 9)}, Learners: []ReplicaID{NewReplicaID(3, 4)}}}
	if err := j.SaveState(state); err != nil {
		t.Fatal(err)
	}
	if err := j.Sync(); err != nil {
		t.Fatalf("sync: %v", err)
	}
	// Readers see what is synced and committed: the replica makes it
	// visible as it applies.
	j.SetVisible(math.MaxUint64)
	requireRecords(t, j.log, entries, "after sync")
	if len(j.log.Segments()) < 3 {
		t.Fatalf("%d segments: the test wants rolls", len(j.log.Segments()))
	}
	// maxBytes: at least one entry, then as many as fit.
	some, err := j.Entries(2, 10, 1)
	if err != nil || len(some) != 1 {
		t.Fatalf("Entries with maxBytes 1: %d entries, %v", len(some), err)
	}
	j.close()

	j = openJournal(t, mem)
	defer j.close()
	loaded, snapshot, err := j.Load()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(loaded) != fmt.Sprint(state) || snapshot.Index != 0 {
		t.Fatalf("Load = %+v, %+v; want %+v", loaded, snapshot, state)
	}
	requireEntries(t, j, entries, "after restart")
	j.SetVisible(math.MaxUint64) // readers see what the replica commits
	requireRecords(t, j.log, entries, "after restart")
	if _, err := j.log.Append(t.Context(), []byte("x"), record.Checksum([]byte("x"))); !errors.Is(err, segment.ErrReplicated) {
		t.Fatalf("a producer's append to a replicated log: %v, want ErrReplicated", err)
	}
}

func TestSegmentJournalFollowerOffsets(t *testing.T) {
	j := openJournal(t, vfs.NewMemFS())
	defer j.close()
	if err := j.Append([]Entry{dataEntry(1, 1, 0, 2, 50)}); err != nil {
		t.Fatal(err)
	}
	for _, test := range []struct {
		name  string
		entry Entry
		want  error
	}{
		{"gap", dataEntry(2, 1, 3, 1, 50), segment.ErrEntryMismatch},
		{"overlap", dataEntry(2, 1, 1, 1, 50), segment.ErrEntryMismatch},
		{"index gap", dataEntry(3, 1, 2, 1, 50), ErrUnavailable},
		{"bad payload", Entry{Index: 2, Term: 1, Data: []byte{'D', 9}}, ErrBadPayload},
	} {
		if err := j.Append([]Entry{test.entry}); !errors.Is(err, test.want) {
			t.Fatalf("%s: %v, want %v", test.name, err, test.want)
		}
	}
	corrupt := dataEntry(2, 1, 2, 1, 50)
	corrupt.Data[len(corrupt.Data)-20] ^= 1
	if err := j.Append([]Entry{corrupt}); !errors.Is(err, segment.ErrBadEntry) {
		t.Fatalf("a frame failing its CRC: %v, want ErrBadEntry", err)
	}
	// A leader's offsets far from zero start a follower's empty log there
	// only through a snapshot; after one, appends continue from it.
	if err := j.InstallSnapshot(Snapshot{Index: 10, Term: 2, NextOffset: 1000}); err != nil {
		t.Fatal(err)
	}
	next := dataEntry(11, 2, 1000, 3, 50)
	if err := j.Append([]Entry{next}); err != nil {
		t.Fatalf("append after the snapshot: %v", err)
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	requireEntries(t, j, []Entry{next}, "after snapshot")
	if term, err := j.Term(10); err != nil || term != 2 {
		t.Fatalf("Term(10) = %d, %v", term, err)
	}
	if _, err := j.Entries(10, 11, 100); !errors.Is(err, ErrCompacted) {
		t.Fatalf("Entries below the snapshot: %v", err)
	}
	if got := j.log.FirstOffset(); got != 1000 {
		t.Fatalf("log first offset %d, want 1000", got)
	}
}

// replaceFrom is a follower's view of a new leader's log: entries up to
// index-1 kept, the rest replaced by count entries of term, their data at
// the offsets the kept entries leave off at.
func replaceFrom(rng *rand.Rand, kept []Entry, index uint64, term uint64, count int) []Entry {
	source := entrySource{next: nextOffsetAfter(kept[:index-kept[0].Index], 0)}
	var out []Entry
	for i := range count {
		out = append(out, source.entry(rng, index+uint64(i), term))
	}
	return out
}

func TestSegmentJournalTruncate(t *testing.T) {
	mem := vfs.NewMemFS()
	j := openJournal(t, mem)
	rng := rand.New(rand.NewPCG(3, 4))
	var source entrySource
	var log []Entry
	for index := uint64(1); index <= 60; index++ {
		log = append(log, source.entry(rng, index, 1))
	}
	if err := j.Append(log); err != nil {
		t.Fatal(err)
	}
	if err := j.SaveState(State{Term: 1, Commit: 10}); err != nil {
		t.Fatal(err)
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	// Cuts inside the active segment, then inside a sealed one, then at
	// the first entry of a segment: each replaces the suffix, reusing its
	// offsets.
	for step, cut := range []uint64{55, 25, 0} {
		if cut == 0 {
			cut = firstEntryOfSegment(t, j, len(j.log.Segments())-1)
		}
		replacement := replaceFrom(rng, log, cut, uint64(2+step), 30)
		if err := j.Append(replacement); err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		log = append(log[:cut-1], replacement...)
		label := fmt.Sprintf("cut at %d", cut)
		if j.LastIndex() != log[len(log)-1].Index {
			t.Fatalf("%s: LastIndex %d, want %d", label, j.LastIndex(), log[len(log)-1].Index)
		}
		requireEntries(t, j, log, label)
		if err := j.Sync(); err != nil {
			t.Fatal(err)
		}
		j.SetVisible(math.MaxUint64)
		requireRecords(t, j.log, log, label)
	}
	if err := j.Append([]Entry{noopEntry(10, 9)}); !errors.Is(err, ErrCommittedTruncation) {
		t.Fatalf("replacing a committed entry: %v", err)
	}
	j.close()
	j = openJournal(t, mem)
	defer j.close()
	requireEntries(t, j, log, "after restart")
	j.SetVisible(math.MaxUint64) // readers see what the replica commits
	requireRecords(t, j.log, log, "after restart")
	// The log goes on from the replaced suffix's end.
	next := (&entrySource{next: nextOffsetAfter(log, 0)}).entry(rng, log[len(log)-1].Index+1, 9)
	if err := j.Append([]Entry{next}); err != nil {
		t.Fatalf("append after restart: %v", err)
	}
}

// firstEntryOfSegment returns the index of the first entry of the log's
// n-th segment, found by the offsets its records start at.
func firstEntryOfSegment(t testing.TB, j *openedJournal, n int) uint64 {
	t.Helper()
	segs := j.log.Segments()
	if len(segs) <= n {
		t.Fatalf("the log has %d segments", len(segs))
	}
	base := segs[n].Base
	entries, err := j.Entries(j.FirstIndex(), j.LastIndex()+1, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if p, err := DecodePayload(e.Data); err == nil && e.Type == EntryNormal && p.Kind == PayloadData && p.Data.BaseOffset == base {
			return e.Index
		}
	}
	t.Fatalf("no entry starts at offset %d", base)
	return 0
}

// flipByte flips one bit of a file at pos.
func flipByte(t testing.TB, fsys vfs.FS, name string, pos int64) {
	t.Helper()
	file, err := fsys.OpenFile(name, vfs.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	b := make([]byte, 1)
	if _, err := file.ReadAt(b, pos); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := file.WriteAt(b, pos); err != nil {
		t.Fatal(err)
	}
}

func TestSegmentJournalDamagedEntry(t *testing.T) {
	for _, where := range []string{"sealed", "active"} {
		t.Run(where, func(t *testing.T) {
			mem := vfs.NewMemFS()
			j := openJournal(t, mem)
			rng := rand.New(rand.NewPCG(5, 6))
			source := entrySource{}
			var log []Entry
			for index := uint64(1); index <= 50; index++ {
				e := dataEntry(index, 1, source.next, 1, 300)
				if index%10 != 5 {
					e = source.entry(rng, index, 1)
				} else {
					source.next++
				}
				log = append(log, e)
			}
			if err := j.Append(log); err != nil {
				t.Fatal(err)
			}
			if err := j.Sync(); err != nil {
				t.Fatal(err)
			}
			segs := j.log.Segments()
			seg := segs[0]
			if where == "active" {
				seg = segs[len(segs)-1]
			}
			j.close()
			dir := "/data/streams/orders/3/"
			names, err := mem.List(dir)
			if err != nil {
				t.Fatal(err)
			}
			name := ""
			for _, n := range names {
				if n == fmt.Sprintf("%020d.seg", seg.Base) {
					name = dir + n
				}
			}
			if name == "" {
				t.Fatalf("no file for the segment at %d among %v", seg.Base, names)
			}
			// A bit in the first record's body: the segment's first entry
			// fails its checksum; later ones prove it was durable.
			flipByte(t, mem, name, 4096+60)
			j = openJournal(t, mem)
			defer j.close()
			_, err = j.Entries(j.FirstIndex(), j.LastIndex()+1, 1<<40)
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("reading a damaged entry: %v, want ErrDamaged", err)
			}
		})
	}
}

// TestSegmentJournalDamagedState: a state file with no intact slot makes
// the journal refuse to open as damaged: the replica's vote is unknown.
func TestSegmentJournalDamagedState(t *testing.T) {
	mem := vfs.NewMemFS()
	j := openJournal(t, mem)
	if err := j.SaveState(State{Term: 2, Vote: NewReplicaID(1, 1)}); err != nil {
		t.Fatal(err)
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	j.close()
	name := "/data/streams/orders/3/" + segment.RaftStateName
	for slot := range int64(2) {
		flipByte(t, mem, name, slot*segment.RaftStateSlot+20)
	}
	if _, err := openJournalOn(mem, 1); !errors.Is(err, ErrDamaged) {
		t.Fatalf("opening with a damaged state: %v, want ErrDamaged", err)
	}
}
