package format_test

import (
	"bytes"
	"math"
	"testing"

	"github.com/ironbus/ironbus/internal/codectest"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/format"
)

// fixedFrameCase describes one fixed-size encoding for the table tests that
// apply to all of them: truncation, bit flips, versions and canonical form.
type fixedFrameCase struct {
	name     string
	encoding []byte
	size     int
	reserved [][2]int
	// decode returns the error and a re-encoding of what was decoded.
	decode func([]byte) ([]byte, error)
	// version writes a version number into an encoding.
	version func(b []byte, version uint16)
}

func setFrameVersion(b []byte, version uint16) { b[versionByte] = byte(version) }

func setSegmentVersion(b []byte, version uint16) {
	littleEndian.PutUint16(b[segmentVersionAt:], version)
}

func decodeCommitAgain(b []byte) ([]byte, error) {
	c, err := format.DecodeCommit(b)
	return format.AppendCommit(nil, c), err
}

func decodeFooterAgain(b []byte) ([]byte, error) {
	f, err := format.DecodeFooter(b)
	return format.AppendFooter(nil, f), err
}

func decodeSkipAgain(b []byte) ([]byte, error) {
	s, err := format.DecodeSkip(b)
	return format.AppendSkip(nil, s), err
}

func decodeSegmentHeaderAgain(b []byte) ([]byte, error) {
	h, err := format.DecodeSegmentHeader(b)
	return format.AppendSegmentHeader(nil, h), err
}

var (
	exampleCommit = format.Commit{Token: 0x0123456789abcdef, FirstOffset: 100, LastOffset: 109, Count: 10,
		BatchLength: 4321, BatchCRC: 0xcafef00d, DurableNext: 95, Term: 3, Index: 77}
	exampleFooter = format.Footer{Token: 0xfeedface, BaseOffset: 1000, NextOffset: 2000, Count: 990,
		DataEnd: 1 << 26, MinTimestamp: -5, MaxTimestamp: math.MaxInt64}
	exampleSkip = format.Skip{Token: 0xabad1dea, Length: 4096, FirstLost: 17, LostCount: 3,
		ReasonCode: 3}
	exampleSegmentHeader = format.SegmentHeader{Version: format.SegmentFormatVersion,
		StreamHash: format.StreamHash("orders"), Partition: 12, BaseOffset: 1 << 33,
		CreatedUnix: 1_800_000_000_000_000_000, Token: 0x1122334455667788}
)

func fixedFrameCases() []fixedFrameCase {
	return []fixedFrameCase{
		{"commit", format.AppendCommit(nil, exampleCommit), format.CommitFrameSize, commitReserved, decodeCommitAgain, setFrameVersion},
		{"footer", format.AppendFooter(nil, exampleFooter), format.FooterFrameSize, footerReserved, decodeFooterAgain, setFrameVersion},
		{"skip", format.AppendSkip(nil, exampleSkip), format.SkipFrameSize, skipReserved, decodeSkipAgain, setFrameVersion},
		{"segment header", format.AppendSegmentHeader(nil, exampleSegmentHeader), format.SegmentHeaderSize, segmentReserved, decodeSegmentHeaderAgain, setSegmentVersion},
	}
}

func TestRoundTripCommit(t *testing.T) {
	commits := []format.Commit{
		exampleCommit,
		{Count: 1},
		{Token: math.MaxUint64, FirstOffset: math.MaxUint64, LastOffset: math.MaxUint64, Count: 1,
			BatchLength: math.MaxUint32, BatchCRC: math.MaxUint32, DurableNext: math.MaxUint64,
			Term: math.MaxUint64, Index: math.MaxUint64},
		{FirstOffset: 0, LastOffset: math.MaxUint32 - 1, Count: math.MaxUint32},
	}
	for _, want := range commits {
		encoded := format.AppendCommit(nil, want)
		if len(encoded) != format.CommitFrameSize {
			t.Fatalf("commit frame of %d bytes", len(encoded))
		}
		got, err := format.DecodeCommit(encoded)
		if err != nil || got != want {
			t.Fatalf("DecodeCommit(AppendCommit(%+v)) = %+v, %v", want, got, err)
		}
	}
}

func TestRoundTripFooter(t *testing.T) {
	footers := []format.Footer{
		exampleFooter,
		{DataEnd: format.SegmentDataStart},
		{BaseOffset: 5, NextOffset: 5, DataEnd: format.SegmentDataStart}, // an empty sealed segment
		{Token: math.MaxUint64, BaseOffset: 0, NextOffset: math.MaxUint64, Count: math.MaxUint64,
			DataEnd: math.MaxUint64, MinTimestamp: math.MinInt64, MaxTimestamp: math.MaxInt64},
	}
	for _, want := range footers {
		encoded := format.AppendFooter(nil, want)
		if len(encoded) != format.FooterFrameSize {
			t.Fatalf("footer frame of %d bytes", len(encoded))
		}
		got, err := format.DecodeFooter(encoded)
		if err != nil || got != want {
			t.Fatalf("DecodeFooter(AppendFooter(%+v)) = %+v, %v", want, got, err)
		}
	}
}

func TestRoundTripSkip(t *testing.T) {
	skips := []format.Skip{
		exampleSkip,
		{Length: format.SkipFrameSize},
		{Token: math.MaxUint64, Length: math.MaxUint32, FirstLost: math.MaxUint64, LostCount: math.MaxUint64,
			ReasonCode: math.MaxUint32},
	}
	for _, want := range skips {
		encoded := format.AppendSkip(nil, want)
		if len(encoded) != format.SkipFrameSize {
			t.Fatalf("skip frame header of %d bytes", len(encoded))
		}
		got, err := format.DecodeSkip(encoded)
		if err != nil || got != want {
			t.Fatalf("DecodeSkip(AppendSkip(%+v)) = %+v, %v", want, got, err)
		}
	}
}

func TestRoundTripSegmentHeader(t *testing.T) {
	headers := []format.SegmentHeader{
		exampleSegmentHeader,
		{Version: format.SegmentFormatVersion},
		{Version: format.SegmentFormatVersion, StreamHash: math.MaxUint64, Partition: math.MaxUint32,
			BaseOffset: math.MaxUint64, CreatedUnix: math.MinInt64, Token: math.MaxUint64},
	}
	for _, want := range headers {
		encoded := format.AppendSegmentHeader(nil, want)
		if len(encoded) != format.SegmentHeaderSize {
			t.Fatalf("segment header of %d bytes", len(encoded))
		}
		got, err := format.DecodeSegmentHeader(encoded)
		if err != nil || got != want {
			t.Fatalf("DecodeSegmentHeader(AppendSegmentHeader(%+v)) = %+v, %v", want, got, err)
		}
	}
	// The encoder always writes the version it knows, whatever the struct
	// says: a header is never written claiming a format this binary lacks.
	stale := exampleSegmentHeader
	stale.Version = 0
	if got, err := format.DecodeSegmentHeader(format.AppendSegmentHeader(nil, stale)); err != nil || got.Version != format.SegmentFormatVersion {
		t.Fatalf("header with version 0 in the struct: %+v, %v", got, err)
	}
}

// TestRoundTripFixedFramesAppend checks every fixed-size encoder keeps dst's
// bytes and overwrites garbage in its spare capacity.
func TestRoundTripFixedFramesAppend(t *testing.T) {
	encoders := map[string]func([]byte) []byte{
		"commit":         func(dst []byte) []byte { return format.AppendCommit(dst, exampleCommit) },
		"footer":         func(dst []byte) []byte { return format.AppendFooter(dst, exampleFooter) },
		"skip":           func(dst []byte) []byte { return format.AppendSkip(dst, exampleSkip) },
		"segment header": func(dst []byte) []byte { return format.AppendSegmentHeader(dst, exampleSegmentHeader) },
	}
	for name, encode := range encoders {
		alone := encode(nil)
		for _, spare := range []int{0, 1, 500} {
			prefix := []byte("prefix")
			dst := append(make([]byte, 0, len(prefix)+spare), prefix...)
			full := dst[:cap(dst)]
			for i := len(dst); i < len(full); i++ {
				full[i] = 0xa5
			}
			got := encode(dst)
			if !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], alone) {
				t.Fatalf("%s with %d spare bytes: the encoding differs from a fresh one", name, spare)
			}
		}
	}
}

func TestFormatFixedFrameTruncations(t *testing.T) {
	for _, c := range fixedFrameCases() {
		for n := range c.size {
			_, err := c.decode(c.encoding[:n])
			codectest.RequireErrorIs(t, err, format.ErrShort, c.name+" truncated")
		}
		// Bytes after the frame belong to the next frame and are ignored.
		again, err := c.decode(append(append([]byte(nil), c.encoding...), 0xff, 0xff, 0xff))
		if err != nil || !bytes.Equal(again, c.encoding) {
			t.Fatalf("%s followed by more bytes: %v", c.name, err)
		}
	}
}

// TestFormatFixedFrameBitFlips flips every bit of every fixed-size frame:
// the checksum covers all of it, including the reserved bytes.
func TestFormatFixedFrameBitFlips(t *testing.T) {
	for _, c := range fixedFrameCases() {
		frame := append([]byte(nil), c.encoding...)
		for i := range len(frame) * 8 {
			frame[i/8] ^= 1 << (i % 8)
			_, err := c.decode(frame)
			codectest.RequireErrorIs(t, err, format.ErrCorrupt, c.name+" with a flipped bit")
			frame[i/8] ^= 1 << (i % 8)
		}
	}
}

func TestFormatFixedFrameVersions(t *testing.T) {
	for _, c := range fixedFrameCases() {
		for _, version := range []uint16{2, 3, 0xff} {
			frame := append([]byte(nil), c.encoding...)
			c.version(frame, version)
			resealFixed(frame)
			_, err := c.decode(frame)
			codectest.RequireErrorIs(t, err, format.ErrTooNew, c.name+" from a newer version")
		}
		frame := append([]byte(nil), c.encoding...)
		c.version(frame, 0)
		resealFixed(frame)
		_, err := c.decode(frame)
		codectest.RequireErrorIs(t, err, format.ErrCorrupt, c.name+" with version 0")
	}
	header := format.AppendSegmentHeader(nil, exampleSegmentHeader)
	setSegmentVersion(header, math.MaxUint16)
	resealFixed(header)
	_, err := format.DecodeSegmentHeader(header)
	codectest.RequireErrorIs(t, err, format.ErrTooNew, "segment header version 65535")
}

// TestFormatFixedFrameReservedBytesIgnored pins today's behaviour: reserved
// bytes and flags are checksummed but ignored on decode (doc.go: new fields
// arrive there), so re-encoding zeroes them.
func TestFormatFixedFrameReservedBytesIgnored(t *testing.T) {
	for _, c := range fixedFrameCases() {
		frame := append([]byte(nil), c.encoding...)
		for _, r := range c.reserved {
			for i := r[0]; i < r[1]; i++ {
				frame[i] = 0x5a
			}
		}
		resealFixed(frame)
		again, err := c.decode(frame)
		if err != nil {
			t.Fatalf("%s with reserved bytes set: %v", c.name, err)
		}
		if !bytes.Equal(again, c.encoding) {
			t.Fatalf("%s: reserved bytes leaked into the decoded value", c.name)
		}
	}
}

func TestFormatCommitRejects(t *testing.T) {
	tests := []struct {
		name   string
		commit format.Commit
	}{
		{"count zero over an offset range", format.Commit{FirstOffset: 5, LastOffset: 6, Count: 0}},
		{"last before first", format.Commit{FirstOffset: 5, LastOffset: 4, Count: 1}},
		{"count one short", format.Commit{FirstOffset: 5, LastOffset: 9, Count: 4}},
		{"count one over", format.Commit{FirstOffset: 5, LastOffset: 9, Count: 6}},
		{"wrapped range", format.Commit{FirstOffset: math.MaxUint64, LastOffset: 0, Count: 2}},
		{"count max on a single offset", format.Commit{FirstOffset: 0, LastOffset: 0, Count: math.MaxUint32}},
	}
	for _, test := range tests {
		_, err := format.DecodeCommit(format.AppendCommit(nil, test.commit))
		codectest.RequireErrorIs(t, err, format.ErrCorrupt, test.name)
	}
	for _, edit := range []struct {
		name string
		edit func([]byte)
	}{
		{"magic", func(b []byte) { b[1] = 'F'; resealFixed(b) }},
		{"length field", func(b []byte) { littleEndian.PutUint32(b[4:], format.CommitFrameSize+8); resealFixed(b) }},
		{"zero length field", func(b []byte) { littleEndian.PutUint32(b[4:], 0); resealFixed(b) }},
	} {
		frame := format.AppendCommit(nil, exampleCommit)
		edit.edit(frame)
		_, err := format.DecodeCommit(frame)
		codectest.RequireErrorIs(t, err, format.ErrCorrupt, "commit "+edit.name)
	}
}

func TestFormatFooterRejects(t *testing.T) {
	tests := []struct {
		name   string
		footer format.Footer
	}{
		{"next before base", format.Footer{BaseOffset: 10, NextOffset: 9, DataEnd: format.SegmentDataStart}},
		{"more records than offsets", format.Footer{BaseOffset: 10, NextOffset: 12, Count: 3, DataEnd: format.SegmentDataStart}},
		{"data end inside the header block", format.Footer{DataEnd: format.SegmentDataStart - 1}},
		{"data end zero", format.Footer{}},
	}
	for _, test := range tests {
		_, err := format.DecodeFooter(format.AppendFooter(nil, test.footer))
		codectest.RequireErrorIs(t, err, format.ErrCorrupt, test.name)
	}
	frame := format.AppendFooter(nil, exampleFooter)
	frame[0] = 'X'
	resealFixed(frame)
	_, err := format.DecodeFooter(frame)
	codectest.RequireErrorIs(t, err, format.ErrCorrupt, "footer magic")
	// A commit frame is not a footer even though both are 80 bytes.
	_, err = format.DecodeFooter(format.AppendCommit(nil, exampleCommit))
	codectest.RequireErrorIs(t, err, format.ErrCorrupt, "commit frame decoded as a footer")
}

func TestFormatSkipRejects(t *testing.T) {
	for _, length := range []uint32{0, 1, format.SkipFrameSize - 1} {
		_, err := format.DecodeSkip(format.AppendSkip(nil, format.Skip{Length: length}))
		codectest.RequireErrorIs(t, err, format.ErrCorrupt, "skip frame shorter than its header")
	}
	frame := format.AppendSkip(nil, exampleSkip)
	frame[1] = 'R'
	resealFixed(frame)
	_, err := format.DecodeSkip(frame)
	codectest.RequireErrorIs(t, err, format.ErrCorrupt, "skip magic")
}

func TestFormatSegmentHeaderRejects(t *testing.T) {
	tests := []struct {
		name string
		edit func([]byte)
	}{
		{"magic", func(b []byte) { b[7] = 'X'; resealFixed(b) }},
		{"magic checked before checksum", func(b []byte) { b[0] = 'X' }},
		{"checksum", func(b []byte) { b[60] ^= 1 }},
		{"header length", func(b []byte) { littleEndian.PutUint32(b[segmentHeaderLengthAt:], 128); resealFixed(b) }},
		{"header length zero", func(b []byte) { littleEndian.PutUint32(b[segmentHeaderLengthAt:], 0); resealFixed(b) }},
		{"a record frame", func(b []byte) { copy(b, record.AppendFrame(nil, 0, 0, make([]byte, 24), 0, 0)) }},
	}
	for _, test := range tests {
		header := format.AppendSegmentHeader(nil, exampleSegmentHeader)
		test.edit(header)
		_, err := format.DecodeSegmentHeader(header)
		codectest.RequireErrorIs(t, err, format.ErrCorrupt, "segment header "+test.name)
	}
	// The whole first block may follow the header; it is not read.
	block := format.AppendSegmentHeader(nil, exampleSegmentHeader)
	block = append(block, bytes.Repeat([]byte{0xee}, format.SegmentDataStart-len(block))...)
	if got, err := format.DecodeSegmentHeader(block); err != nil || got != exampleSegmentHeader {
		t.Fatalf("header followed by the rest of the block: %+v, %v", got, err)
	}
}
