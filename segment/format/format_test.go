package format_test

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/format"
)

// The tests live in an external package so they exercise the decoders only
// through the API the rest of IronBus uses. Test names match
// `-run 'Fuzz|Test.*Format|TestRoundTrip'`, the filter CI uses for this
// package, so none of them is silently skipped there.

var littleEndian = binary.LittleEndian

// Byte offsets of fields the tests edit. They restate the on-disk layout on
// purpose: if an encoder moves a field, these tests must fail.
const (
	versionByte = 2 // frame version, in every frame prefix
	flagsByte   = 3 // frame flags, in every frame prefix

	segmentVersionAt      = 8  // u16
	segmentHeaderLengthAt = 12 // u32
)

// reservedRanges lists, per fixed-size frame, the bytes its decoder ignores
// (flags and reserved words). They are covered by the frame checksum but
// carry no meaning today, so a decoded frame re-encodes to the input with
// those bytes zeroed. doc.go and docs/FORMAT.md promise new fields
// arrive there; the ranges restate the tables in docs/FORMAT.md.
var (
	commitReserved  = [][2]int{{flagsByte, flagsByte + 1}, {44, 48}, {72, 76}}
	footerReserved  = [][2]int{{flagsByte, flagsByte + 1}, {64, 76}}
	skipReserved    = [][2]int{{flagsByte, flagsByte + 1}, {36, 44}}
	segmentReserved = [][2]int{{10, 12}, {28, 32}, {56, 60}}
)

// resealFixed recomputes the trailing CRC32C of a fixed-size frame (commit,
// footer, skip header, segment header: each keeps its checksum in its last
// four bytes) so a test's edit reaches the check behind the checksum.
func resealFixed(frame []byte) {
	n := len(frame)
	littleEndian.PutUint32(frame[n-4:], format.CRC(frame[:n-4]))
}

// canonicalFixed returns a copy of frame with its ignored bytes zeroed and
// its checksum recomputed: what the encoder produces for the decoded value.
func canonicalFixed(frame []byte, reserved [][2]int) []byte {
	canonical := append([]byte(nil), frame...)
	for _, r := range reserved {
		clear(canonical[r[0]:r[1]])
	}
	resealFixed(canonical)
	return canonical
}

func TestFormatPeekKind(t *testing.T) {
	tests := []struct {
		name  string
		input []byte
		want  format.Kind
	}{
		{"nil", nil, format.KindNone},
		{"one byte", []byte{'I'}, format.KindNone},
		{"one zero byte", []byte{0}, format.KindNone},
		{"two zeros", []byte{0, 0}, format.KindNone},
		{"zeros then data", []byte{0, 0, 'I', 'R'}, format.KindNone},
		{"record", []byte("IR"), format.KindRecord},
		{"record with more", []byte("IR\x01\x00"), format.KindRecord},
		{"commit", []byte("IC"), format.KindCommit},
		{"footer", []byte("IF"), format.KindFooter},
		{"skip", []byte("IS"), format.KindSkip},
		{"control", []byte("IK"), format.KindControl},
		{"lower case", []byte("ir"), format.KindUnknown},
		{"swapped", []byte("RI"), format.KindUnknown},
		{"half zero", []byte{'I', 0}, format.KindUnknown},
		{"zero then magic byte", []byte{0, 'R'}, format.KindUnknown},
		{"segment magic", []byte("IRONBSEG"), format.KindRecord}, // only two bytes are looked at
		{"high bytes", []byte{0xff, 0xff}, format.KindUnknown},
	}
	for _, test := range tests {
		if got := format.PeekKind(test.input); got != test.want {
			t.Errorf("%s: PeekKind(%q) = %v, want %v", test.name, test.input, got, test.want)
		}
	}
}

func TestFormatPeekKindOfEncodings(t *testing.T) {
	tests := []struct {
		name     string
		encoding []byte
		want     format.Kind
	}{
		{"record", record.AppendFrame(nil, 1, 2, []byte("x"), record.Checksum([]byte("x")), 0), format.KindRecord},
		{"commit", format.AppendCommit(nil, format.Commit{Count: 1}), format.KindCommit},
		{"footer", format.AppendFooter(nil, format.Footer{}), format.KindFooter},
		{"skip", format.AppendSkip(nil, format.Skip{Length: format.SkipFrameSize}), format.KindSkip},
		{"control", format.AppendControl(nil, format.Control{Payload: []byte("x")}), format.KindControl},
		{"zeros", make([]byte, 64), format.KindNone},
	}
	for _, test := range tests {
		if got := format.PeekKind(test.encoding); got != test.want {
			t.Errorf("%s: PeekKind = %v, want %v", test.name, got, test.want)
		}
	}
}

func TestFormatKindString(t *testing.T) {
	want := map[format.Kind]string{
		format.KindNone:    "none",
		format.KindRecord:  "record",
		format.KindCommit:  "commit",
		format.KindFooter:  "footer",
		format.KindSkip:    "skip",
		format.KindControl: "control",
		format.KindUnknown: "unknown",
		format.Kind(200):   "unknown",
	}
	for kind, name := range want {
		if got := kind.String(); got != name {
			t.Errorf("Kind(%d).String() = %q, want %q", kind, got, name)
		}
	}
}

func TestFormatIsZero(t *testing.T) {
	tests := []struct {
		name  string
		input []byte
		want  bool
	}{
		{"nil", nil, true},
		{"empty", []byte{}, true},
		{"one zero", []byte{0}, true},
		{"one one", []byte{1}, false},
		{"seven zeros", make([]byte, 7), true},
		{"eight zeros", make([]byte, 8), true},
		{"nine zeros", make([]byte, 9), true},
		{"a block", make([]byte, 4096), true},
		{"high bit", []byte{0, 0, 0, 0, 0, 0, 0, 0x80}, false},
	}
	for _, test := range tests {
		if got := format.IsZero(test.input); got != test.want {
			t.Errorf("%s: IsZero = %v, want %v", test.name, got, test.want)
		}
	}
}

// TestFormatIsZeroEveryPosition puts one non-zero byte at every position of
// buffers around the 8-byte word boundary, where the word loop hands over to
// the byte loop, and also checks unaligned starts.
func TestFormatIsZeroEveryPosition(t *testing.T) {
	backing := make([]byte, 64)
	for start := range 8 {
		for length := range 40 {
			buf := backing[start : start+length]
			if !format.IsZero(buf) {
				t.Fatalf("IsZero(zeros[%d:%d]) = false", start, start+length)
			}
			for i := range buf {
				for _, value := range []byte{1, 0x80, 0xff} {
					buf[i] = value
					if format.IsZero(buf) {
						t.Fatalf("IsZero = true with %#x at %d of %d (start %d)", value, i, length, start)
					}
					buf[i] = 0
				}
			}
		}
	}
	// A non-zero byte just outside the slice must not count.
	backing[0], backing[9] = 1, 1
	if !format.IsZero(backing[1:9]) {
		t.Fatal("IsZero looked outside its slice")
	}
}

// TestFormatErrorsAreDistinct guards the error classes callers branch on:
// a torn tail (ErrShort) must never be mistaken for corruption.
func TestFormatErrorsAreDistinct(t *testing.T) {
	classes := []error{format.ErrShort, format.ErrCorrupt, format.ErrTooNew}
	for i, a := range classes {
		if !strings.HasPrefix(a.Error(), "format: ") {
			t.Errorf("error %q lacks the package prefix", a)
		}
		for j, b := range classes {
			if i != j && errors.Is(a, b) {
				t.Errorf("%v wraps %v", a, b)
			}
		}
	}
}

func TestFormatChecksums(t *testing.T) {
	// Known answers pin the algorithms: CRC32C (Castagnoli), not IEEE, and
	// xxh3-64 with seed 0. A change here breaks every segment on disk.
	if got := format.CRC([]byte("123456789")); got != 0xe3069283 {
		t.Errorf("CRC(123456789) = %08x, want e3069283 (CRC32C check value)", got)
	}
	if got := format.CRC(nil); got != 0 {
		t.Errorf("CRC(nil) = %08x, want 0", got)
	}
	data := []byte("the quick brown fox jumps over the lazy dog")
	if got, want := format.UpdateCRC(format.CRC(data[:10]), data[10:]), format.CRC(data); got != want {
		t.Errorf("UpdateCRC in two steps = %08x, one step %08x", got, want)
	}
	if got := format.XXH3(nil); got != 0x2d06800538d394c2 {
		t.Errorf("XXH3(nil) = %016x, want 2d06800538d394c2", got)
	}
	if format.StreamHash("orders") != format.XXH3([]byte("orders")) {
		t.Error("StreamHash is not the xxh3 of the stream name")
	}
}

// TestFormatFrameVersionMatchesRecord: `ironbus version` reports one frame
// version (formats.frame, docs/CLI.md) for the storage frames and the
// record frames, which package record versions.
func TestFormatFrameVersionMatchesRecord(t *testing.T) {
	if format.FrameVersion != record.FrameVersion {
		t.Fatalf("format.FrameVersion %d, record.FrameVersion %d", format.FrameVersion, record.FrameVersion)
	}
}
