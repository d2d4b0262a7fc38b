package segment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"testing"
	"time"

	"github.com/ironbus/ironbus/keyring"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

func testRing(t testing.TB) *keyring.Ring {
	t.Helper()
	ring, err := keyring.New(time.Unix(1_800_000_000, 0))
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

// secretBody is a record whose payload is a recognisable secret plus its
// index, so a test can look for the plaintext in the stored bytes.
func secretBody(t testing.TB, index int, size int) ([]byte, []byte) {
	t.Helper()
	payload := bytes.Repeat([]byte("TOPSECRET-"), size/10+1)[:size]
	payload[0] = byte(index)
	encoded, err := record.AppendBody(nil, record.Body{Subject: []byte("orders.secret"), Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	return encoded, payload
}

// memFiles returns every file under dir of a MemFS.
func memFiles(t testing.TB, fsys *vfs.MemFS, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	names, err := fsys.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		full := path.Join(dir, name)
		info, err := fsys.Stat(full)
		if err != nil {
			t.Fatal(err)
		}
		if info.IsDir {
			for k, v := range memFiles(t, fsys, full) {
				files[k] = v
			}
			continue
		}
		data, err := vfs.ReadFile(fsys, full)
		if err != nil {
			t.Fatal(err)
		}
		files[full] = data
	}
	return files
}

func TestEncryptedLogRoundTripAndNoPlaintext(t *testing.T) {
	fsys := vfs.NewMemFS()
	ring := testRing(t)
	opts := testOptions(1)
	opts.Encryption = ring
	d := openDir(t, fsys, opts)
	l := openLog(t, d)
	var bodies [][]byte
	sizes := []int{16, 300, 70_000, 20}
	for i := range 40 {
		b, _ := secretBody(t, i, sizes[i%len(sizes)])
		bodies = append(bodies, b)
		appendBody(t, l, b)
	}
	waitTicket(t, appendBody(t, l, bodies[0]))
	bodies = append(bodies, bodies[0])
	checkEntries(t, l, bodies)
	checkRuns(t, l, bodies, nil)
	checkRuns(t, l, bodies, prefixMatcher("orders."))
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for name, data := range memFiles(t, fsys, "/data") {
		if bytes.Contains(data, []byte("TOPSECRET")) || bytes.Contains(data, []byte("orders.secret")) {
			t.Errorf("%s holds plaintext of a record", name)
		}
	}
	// A binary that predates encryption knows FORMAT DataFormatVersion and
	// record frames of record.FrameVersion: it refuses both as too new.
	if version, err := ReadDataFormatVersion(fsys, "/data"); err != nil || version != EncryptedDataFormatVersion || version <= DataFormatVersion {
		t.Fatalf("FORMAT version %d, %v: an older binary would not refuse it", version, err)
	}
	for name, data := range memFiles(t, fsys, "/data/streams") {
		if at := format.SegmentDataStart; path.Ext(name) == ".seg" && len(data) > at+3 && (data[at+2] <= record.FrameVersion || !record.IsEncryptedFrame(data[at:])) {
			t.Errorf("%s starts with a record frame of version %d", name, data[at+2])
		}
	}

	d = openDir(t, fsys, opts)
	checkEntries(t, openLog(t, d), bodies)
	_ = d.Close()
	if _, err := Open(fsys, "/data", testOptions(1)); !errors.Is(err, ErrKeyRequired) {
		t.Fatalf("open without a key: %v, want ErrKeyRequired", err)
	}
	wrong := testOptions(1)
	wrong.Encryption = testRing(t)
	if _, err := Open(fsys, "/data", wrong); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("open with another ring: %v, want ErrWrongKey", err)
	}
	readOnly := opts
	readOnly.ReadOnly = true
	d = openDir(t, fsys, readOnly)
	checkEntries(t, openLog(t, d), bodies)
	_ = d.Close()
}

func TestEncryptedLogAfterPlainRecords(t *testing.T) {
	fsys := vfs.NewMemFS()
	d := openDir(t, fsys, testOptions(1))
	l := openLog(t, d)
	var bodies [][]byte
	for i := range 5 {
		b, _ := secretBody(t, i, 100)
		bodies = append(bodies, b)
		waitTicket(t, appendBody(t, l, b))
	}
	_ = d.Close()
	opts := testOptions(1)
	opts.Encryption = testRing(t)
	d = openDir(t, fsys, opts)
	l = openLog(t, d)
	for i := range 5 {
		b, _ := secretBody(t, 10+i, 100)
		bodies = append(bodies, b)
		waitTicket(t, appendBody(t, l, b))
	}
	checkEntries(t, l, bodies)
	checkRuns(t, l, bodies, nil)
	_ = d.Close()
	if _, err := Open(fsys, "/data", testOptions(1)); !errors.Is(err, ErrKeyRequired) {
		t.Fatalf("open without a key after encrypting: %v", err)
	}
}

type prefixMatcher string

func (p prefixMatcher) Match(subject []byte) bool { return bytes.HasPrefix(subject, []byte(p)) }

func checkEntries(t *testing.T, l *Log, want [][]byte) {
	t.Helper()
	entries, gaps := readAll(t, l)
	if len(gaps) != 0 || len(entries) != len(want) {
		t.Fatalf("read %d entries and gaps %v, want %d entries", len(entries), gaps, len(want))
	}
	for i, e := range entries {
		if !bytes.Equal(e.Body, want[i]) || e.BodyCRC != record.Checksum(want[i]) {
			t.Fatalf("entry %d differs from what was appended", i)
		}
	}
}

func checkRuns(t *testing.T, l *Log, want [][]byte, filter Matcher) {
	t.Helper()
	r := l.NewReader(0)
	defer r.Close()
	if filter != nil {
		r.SetFilter(filter)
	}
	got := 0
	for {
		run, err := r.NextRun(7, 1<<20)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if run.Gap != nil {
			t.Fatalf("gap %v", run.Gap)
		}
		frames := run.Frames
		for len(frames) > 0 {
			h, body, err := record.ParseFrame(frames, record.DefaultMaxBody)
			if err != nil {
				n, otherErr := record.OtherFrameLength(frames)
				if otherErr != nil {
					t.Fatalf("run frame: %v", err)
				}
				frames = frames[n:]
				continue
			}
			if h.Encrypted() || !bytes.Equal(body, want[h.Offset]) {
				t.Fatalf("run record %d is not the plain record appended", h.Offset)
			}
			frames = frames[h.FrameLength:]
			got++
		}
		run.Release()
	}
	if got != len(want) {
		t.Fatalf("runs held %d records, want %d", got, len(want))
	}
}

// TestCrashEncrypted cuts power at every write of an encrypted log, with
// and without unsynced data surviving, through the appender and inline
// commits, buffered and direct: every acknowledged record must come back
// and open.
func TestCrashEncrypted(t *testing.T) {
	for _, mode := range []IOMode{IOBuffered, IODirect} {
		for _, keep := range []float64{0, 0.5} {
			t.Run(fmt.Sprintf("%s-keep-unsynced-%v", mode, keep), func(t *testing.T) {
				opts := testOptions(0)
				opts.IOMode = mode
				opts.Encryption = testRing(t)
				crashEveryWrite(t, "encrypted", opts, keep, emptyFS, func(c *crashRig, l *Log) {
					c.inlineProducers = 1
					c.appendWorkload(l, 2, 40, 0)
				})
			})
		}
	}
}

func TestEncryptedAppendContext(t *testing.T) {
	opts := testOptions(1)
	opts.Encryption = testRing(t)
	d := openDir(t, vfs.NewMemFS(), opts)
	defer d.Close()
	l := openLog(t, d)
	b, _ := secretBody(t, 1, 10)
	ticket, err := l.AppendBatch(context.Background(), [][]byte{b, b}, []uint32{record.Checksum(b), record.Checksum(b)})
	if err != nil {
		t.Fatal(err)
	}
	waitTicket(t, ticket)
	checkEntries(t, l, [][]byte{b, b})
}

// TestKeyIDsFollowRotationAndRetention: after a rotation a log's records
// are under two keys, both readable; once retention removed every
// segment of the old key, the log no longer lists it (FORMAT still does,
// so a ring must keep it).
func TestKeyIDsFollowRotationAndRetention(t *testing.T) {
	file := path.Join(t.TempDir(), "data.keys")
	first, err := keyring.Create(file, time.Unix(1_800_000_000, 0))
	if err != nil {
		t.Fatal(err)
	}
	fsys := vfs.NewMemFS()
	opts := testOptions(1)
	opts.Encryption = first
	var bodies [][]byte
	appendSome := func(l *Log, n int) {
		for range n {
			b, _ := secretBody(t, len(bodies), 3_000)
			bodies = append(bodies, b)
			waitTicket(t, appendBody(t, l, b))
		}
	}
	d := openDir(t, fsys, opts)
	appendSome(openLog(t, d), 60)
	_ = d.Close()

	rotated, err := keyring.Rotate(file, time.Unix(1_800_000_100, 0))
	if err != nil {
		t.Fatal(err)
	}
	opts.Encryption = rotated
	d = openDir(t, fsys, opts)
	defer d.Close()
	l := openLog(t, d)
	appendSome(l, 160)
	if ids, err := l.KeyIDs(); err != nil || !slices.Equal(ids, []uint32{1, 2}) {
		t.Fatalf("after rotation: key ids %v, %v", ids, err)
	}
	checkEntries(t, l, bodies)
	if _, err := l.SealActive(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The segment the log was writing at the rotation holds both keys;
	// the floor is past it.
	if _, err := l.DeleteBefore(200); err != nil {
		t.Fatal(err)
	}
	ids, err := l.KeyIDs()
	if err != nil || !slices.Equal(ids, []uint32{2}) {
		t.Fatalf("after retention removed key 1's records (first offset now %d): key ids %v, %v", l.FirstOffset(), ids, err)
	}
	if named := d.EncryptionKeyIDs(); !slices.Equal(named, []uint32{1, 2}) {
		t.Fatalf("FORMAT names keys %v, want [1 2]", named)
	}
}

// TestOpenEveryFindsRecordsTheRingCannotOpen: with FORMAT edited to name
// another ring's key (so the key check passes), every record fails
// authentication, and OpenEvery says so.
func TestOpenEveryFindsRecordsTheRingCannotOpen(t *testing.T) {
	fsys := vfs.NewMemFS()
	opts := testOptions(1)
	opts.Encryption = testRing(t)
	d := openDir(t, fsys, opts)
	l := openLog(t, d)
	b, _ := secretBody(t, 1, 100)
	waitTicket(t, appendBody(t, l, b))
	if err := l.OpenEvery(); err != nil {
		t.Fatalf("the right ring: %v", err)
	}
	_ = d.Close()

	other := testRing(t)
	check, _ := other.KeyCheck(1)
	forged := `{"format":"ironbus-data","version":2,"encryption":{"keys":{"1":"` + check + `"}}}` + "\n"
	if err := vfs.WriteFileAtomic(fsys, "/data/FORMAT", []byte(forged)); err != nil {
		t.Fatal(err)
	}
	readOnly := testOptions(1)
	readOnly.ReadOnly, readOnly.Encryption = true, other
	d = openDir(t, fsys, readOnly)
	defer d.Close()
	if err := openLog(t, d).OpenEvery(); !errors.Is(err, record.ErrDecrypt) {
		t.Fatalf("another ring's key: %v, want record.ErrDecrypt", err)
	}
}
