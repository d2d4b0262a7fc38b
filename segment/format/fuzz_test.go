package format_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ironbus/ironbus/internal/codectest"
	"github.com/ironbus/ironbus/segment/format"
)

// Fuzz targets for the storage-framing decoders (the record frame and body
// decoders are package record's). Each checks that the decoder never
// panics, returns only the package's error classes, decodes nothing from a
// prefix that it would not decode from the whole, and that what it accepts
// re-encodes to the same bytes (up to the ignored flag and reserved bytes,
// which the encoders write as zero).
//
// Every frame is checksummed, and a mutation fuzzer practically never forges
// a CRC32C, so the targets take a repair argument: when set, the harness
// recomputes the checksums after the mutation. That lets the fuzzer reach
// the checks behind the checksum (lengths, versions, offsets), which is
// where hand-written decoders go wrong.
//
// Run one with: go test -run='^$' -fuzz='^FuzzDecodeCommit$' -fuzztime=30s ./segment/format
// (fuzz/README.md lists them all.)

// knownErrors are the classes decoders may return; anything else means a
// decoder let an error through unwrapped.
var knownErrors = []error{format.ErrShort, format.ErrCorrupt, format.ErrTooNew}

// fuzzFixedFrame runs the checks shared by the fixed-size frames. decode
// returns the re-encoding of what it decoded, so "decodes to the same
// values" is a byte comparison.
func fuzzFixedFrame(t *testing.T, input []byte, repair bool, size int, reserved [][2]int, decode func([]byte) ([]byte, error)) {
	data := append([]byte(nil), input...)
	if repair && len(data) >= size {
		resealFixed(data[:size])
	}
	again, err := decode(data)
	for _, n := range codectest.PrefixLengths(len(data), size) {
		prefixAgain, prefixErr := decode(data[:n])
		switch {
		case err != nil && prefixErr == nil:
			t.Fatalf("prefix of %d bytes decodes but the whole fails: %v", n, err)
		case n < size && !errors.Is(prefixErr, format.ErrShort):
			t.Fatalf("prefix of %d bytes of a %d-byte frame: %v, want ErrShort", n, size, prefixErr)
		case err == nil && n >= size && (prefixErr != nil || !bytes.Equal(prefixAgain, again)):
			t.Fatalf("prefix of %d bytes holding the whole frame decodes differently: %v", n, prefixErr)
		case prefixErr != nil:
			codectest.RequireKnownError(t, prefixErr, "prefix", knownErrors...)
		}
	}
	for _, at := range []int{1, 8, size / 2} {
		if at < len(data) {
			if _, err := decode(data[at:]); err != nil {
				codectest.RequireKnownError(t, err, "frame decoded from inside", knownErrors...)
			}
		}
	}
	if err != nil {
		codectest.RequireKnownError(t, err, "frame", knownErrors...)
		return
	}
	if want := canonicalFixed(data[:size], reserved); !bytes.Equal(again, want) {
		t.Fatalf("re-encoding differs:\n got %x\nwant %x", again, want)
	}
}

func FuzzDecodeCommit(f *testing.F) {
	f.Add(format.AppendCommit(nil, exampleCommit), false)
	f.Add(format.AppendCommit(nil, format.Commit{Count: 1}), true)
	f.Add(format.AppendCommit(nil, format.Commit{FirstOffset: 10, LastOffset: 9, Count: 1}), false) // wrapped range
	f.Add(format.AppendCommit(nil, exampleCommit)[:40], false)
	f.Add([]byte("IC\x02\x00P\x00\x00\x00"), true)
	f.Add(format.AppendCommit(nil, format.Commit{FirstOffset: 7, LastOffset: 7, Term: 3, Index: 9}), false) // closes a control frame
	f.Fuzz(func(t *testing.T, data []byte, repair bool) {
		fuzzFixedFrame(t, data, repair, format.CommitFrameSize, commitReserved, func(b []byte) ([]byte, error) {
			c, err := format.DecodeCommit(b)
			if err == nil && c.Count == 0 && c.LastOffset != c.FirstOffset {
				t.Fatalf("accepted a commit frame of no records closing %d..%d", c.FirstOffset, c.LastOffset)
			}
			if err == nil && c.Count > 0 && (c.LastOffset < c.FirstOffset || c.LastOffset-c.FirstOffset != uint64(c.Count)-1) {
				t.Fatalf("accepted a commit frame closing %d..%d with count %d", c.FirstOffset, c.LastOffset, c.Count)
			}
			return format.AppendCommit(nil, c), err
		})
	})
}

func FuzzDecodeSkip(f *testing.F) {
	f.Add(format.AppendSkip(nil, exampleSkip), false)
	f.Add(format.AppendSkip(nil, format.Skip{Length: format.SkipFrameSize}), true)
	f.Add(format.AppendSkip(nil, format.Skip{Length: 3}), false)
	f.Add(append(format.AppendSkip(nil, format.Skip{Length: 64}), make([]byte, 16)...), false)
	f.Fuzz(func(t *testing.T, data []byte, repair bool) {
		fuzzFixedFrame(t, data, repair, format.SkipFrameSize, skipReserved, func(b []byte) ([]byte, error) {
			s, err := format.DecodeSkip(b)
			if err == nil && s.Length < format.SkipFrameSize {
				t.Fatalf("accepted a skip frame of %d bytes", s.Length)
			}
			return format.AppendSkip(nil, s), err
		})
	})
}

func FuzzDecodeFooter(f *testing.F) {
	f.Add(format.AppendFooter(nil, exampleFooter), false)
	f.Add(format.AppendFooter(nil, format.Footer{DataEnd: format.SegmentDataStart}), true)
	f.Add(format.AppendFooter(nil, format.Footer{BaseOffset: 2, NextOffset: 1, DataEnd: format.SegmentDataStart}), false)
	f.Add(format.AppendCommit(nil, exampleCommit), true) // the other 80-byte frame
	f.Fuzz(func(t *testing.T, data []byte, repair bool) {
		fuzzFixedFrame(t, data, repair, format.FooterFrameSize, footerReserved, func(b []byte) ([]byte, error) {
			footer, err := format.DecodeFooter(b)
			if err == nil && (footer.NextOffset < footer.BaseOffset || footer.Count > footer.NextOffset-footer.BaseOffset || footer.DataEnd < format.SegmentDataStart) {
				t.Fatalf("accepted an inconsistent footer %+v", footer)
			}
			return format.AppendFooter(nil, footer), err
		})
	})
}

func FuzzDecodeSegmentHeader(f *testing.F) {
	f.Add(format.AppendSegmentHeader(nil, exampleSegmentHeader), false)
	f.Add(format.AppendSegmentHeader(nil, format.SegmentHeader{}), true)
	block := format.AppendSegmentHeader(nil, exampleSegmentHeader)
	f.Add(append(block, make([]byte, format.SegmentDataStart-len(block))...), false)
	f.Add([]byte("IRONBSEG\x02\x00\x00\x00@\x00\x00\x00"), true)
	f.Fuzz(func(t *testing.T, data []byte, repair bool) {
		fuzzFixedFrame(t, data, repair, format.SegmentHeaderSize, segmentReserved, func(b []byte) ([]byte, error) {
			h, err := format.DecodeSegmentHeader(b)
			if err == nil && h.Version != format.SegmentFormatVersion {
				t.Fatalf("accepted segment format version %d", h.Version)
			}
			return format.AppendSegmentHeader(nil, h), err
		})
	})
}
