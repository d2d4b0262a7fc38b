package format_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ironbus/ironbus/segment/format"
)

// Fuzz targets for every decoder. Each checks that the decoder never
// panics, returns only the package's error classes, decodes nothing from a
// prefix that it would not decode from the whole, and that what it accepts
// re-encodes to the same bytes (up to the ignored flag and reserved bytes,
// which the encoders write as zero).
//
// Every frame is checksummed, and a mutation fuzzer practically never forges
// a CRC32C, so most targets take a repair argument: when set, the harness
// recomputes the checksums after the mutation. That lets the fuzzer reach
// the checks behind the checksum (lengths, versions, offsets), which is
// where hand-written decoders go wrong.
//
// Run one with: go test -run='^$' -fuzz='^FuzzDecodeRecord$' -fuzztime=30s ./segment/format
// (fuzz/README.md lists them all.)

// knownErrors are the classes decoders may return; anything else means a
// decoder let an error through unwrapped.
var knownErrors = []error{format.ErrShort, format.ErrCorrupt, format.ErrTooNew, format.ErrTooLarge, format.ErrMalformedBody}

func requireKnownError(t *testing.T, err error, what string) {
	t.Helper()
	for _, known := range knownErrors {
		if errors.Is(err, known) {
			return
		}
	}
	t.Fatalf("%s: error %v wraps none of the format error classes", what, err)
}

// prefixLengths returns the prefix lengths to try for an input of length
// total: every one for short inputs, else the first bytes, the
// neighbourhood of each interesting length (a frame end, a header end) and
// an even sample. Decoding a long record at every prefix would hash
// megabytes per input and starve the fuzzer.
func prefixLengths(total int, interesting ...int) []int {
	if total <= 256 {
		lengths := make([]int, total)
		for i := range lengths {
			lengths[i] = i
		}
		return lengths
	}
	lengths := []int{0, 1, 2, 7, 8, 9}
	for _, at := range interesting {
		for n := at - 2; n <= at+2; n++ {
			if n > 9 && n < total {
				lengths = append(lengths, n)
			}
		}
	}
	for i := 1; i < 8; i++ {
		lengths = append(lengths, total*i/8)
	}
	return append(lengths, total-1)
}

// Record repair bits: which parts of a mutated record the harness fixes
// before decoding. The fuzzer picks the combination.
const (
	repairRecordHeaderCRC = 1 << iota // header CRC32C over [0, 32)
	repairRecordLengths               // frame length and xxh3 flag agree with the body length
	repairRecordBody                  // body CRC, stored xxh3 and trailer, when the frame fits
	repairRecordPrefix                // magic "IR" and version 1
	// repairRecordGrow inserts XXH3Threshold zero bytes after the header
	// and raises the body length to match, so a small input becomes a
	// frame large enough to carry an xxh3. Keeping the inputs small keeps
	// the fuzzer fast; 64 KiB seeds slowed it to a few hundred runs a
	// second.
	repairRecordGrow
)

func repairRecord(input []byte, repairs uint32) []byte {
	data := append([]byte(nil), input...)
	if len(data) < format.RecordHeaderSize {
		return data
	}
	if repairs&repairRecordGrow != 0 {
		grown := make([]byte, 0, len(data)+format.XXH3Threshold)
		grown = append(grown, data[:format.RecordHeaderSize]...)
		grown = append(grown, make([]byte, format.XXH3Threshold)...)
		data = append(grown, data[format.RecordHeaderSize:]...)
		bodyLength := littleEndian.Uint32(data[recordBodyLengthAt:])
		littleEndian.PutUint32(data[recordBodyLengthAt:], bodyLength+format.XXH3Threshold)
	}
	if repairs&repairRecordPrefix != 0 {
		data[0], data[1], data[versionByte] = 'I', 'R', format.FrameVersion
	}
	bodyLength := uint64(littleEndian.Uint32(data[recordBodyLengthAt:]))
	size := uint64(format.RecordHeaderSize) + bodyLength + format.RecordTrailerSize
	if bodyLength >= format.XXH3Threshold {
		size += 8
	}
	if repairs&repairRecordLengths != 0 {
		littleEndian.PutUint32(data[recordFrameLengthAt:], uint32(size))
		data[flagsByte] &^= 1
		if bodyLength >= format.XXH3Threshold {
			data[flagsByte] |= 1
		}
	}
	if repairs&repairRecordBody != 0 && size <= uint64(len(data)) {
		end := format.RecordHeaderSize + int(bodyLength)
		body := data[format.RecordHeaderSize:end]
		littleEndian.PutUint32(data[recordBodyCRCAt:], format.CRC(body))
		if bodyLength >= format.XXH3Threshold {
			littleEndian.PutUint64(data[end:], format.XXH3(body))
		}
		littleEndian.PutUint32(data[size-4:size], uint32(size))
	}
	if repairs&repairRecordHeaderCRC != 0 {
		resealRecordHeader(data)
	}
	return data
}

func FuzzDecodeRecord(f *testing.F) {
	for _, size := range []int{0, 1, 33} {
		frame, _ := encodeTestRecord(uint64(size), int64(size)*3, size)
		f.Add(frame, uint32(format.DefaultMaxBody), uint32(0))
		f.Add(frame, uint32(size), uint32(repairRecordHeaderCRC))
		// The same frame grown past XXH3Threshold, checksums repaired,
		// with room for the stored xxh3 (the grown body swallows the
		// trailer, so 12 more bytes are needed).
		grown := append(append([]byte(nil), frame...), make([]byte, 12)...)
		f.Add(grown, uint32(format.DefaultMaxBody), uint32(repairRecordGrow|repairRecordLengths|repairRecordBody|repairRecordHeaderCRC))
	}
	frame, _ := encodeTestRecord(7, 8, 12)
	f.Add(frame, uint32(11), uint32(0))                                                        // one byte over maxBody
	f.Add(append(frame, frame...), uint32(format.DefaultMaxBody), uint32(0))                   // two frames end to end
	f.Add(frame[:format.RecordHeaderSize], uint32(format.DefaultMaxBody), uint32(0xf))         // header only
	f.Add([]byte("IR\x02\x00"), uint32(format.DefaultMaxBody), uint32(0xf))                    // a newer version
	f.Add(make([]byte, format.RecordHeaderSize+4), uint32(format.DefaultMaxBody), uint32(0xf)) // zeros, all repaired
	f.Fuzz(func(t *testing.T, input []byte, maxBody uint32, repairs uint32) {
		data := repairRecord(input, repairs)
		header, body, err := format.DecodeRecord(data, maxBody)
		checkRecordPrefixes(t, data, maxBody, header, body, err)
		// A scanner resuming inside a frame decodes from any position.
		for _, at := range []int{1, 2, 8, format.RecordHeaderSize} {
			if at < len(data) {
				if _, _, err := format.DecodeRecord(data[at:], maxBody); err != nil {
					requireKnownError(t, err, "record decoded from inside")
				}
			}
		}
		if err != nil {
			requireKnownError(t, err, "record")
			if body != nil {
				t.Fatal("a body came back with an error")
			}
			return
		}
		onlyHeader, err := format.DecodeRecordHeader(data, maxBody)
		if err != nil || onlyHeader != header {
			t.Fatalf("DecodeRecordHeader disagrees with DecodeRecord: %+v, %v", onlyHeader, err)
		}
		switch {
		case header.BodyLength > maxBody || header.BodyLength > format.AbsoluteMaxBody:
			t.Fatalf("accepted a body of %d bytes with maxBody %d", header.BodyLength, maxBody)
		case int(header.FrameLength) != format.RecordFrameSize(len(body)) || int(header.BodyLength) != len(body):
			t.Fatalf("frame length %d, body length %d, body of %d bytes", header.FrameLength, header.BodyLength, len(body))
		case format.CRC(body) != header.BodyCRC:
			t.Fatal("accepted a body whose CRC does not match")
		case header.HasXXH3() != (len(body) >= format.XXH3Threshold):
			t.Fatal("accepted a frame whose xxh3 flag disagrees with its body length")
		}
		var storedHash uint64
		if header.HasXXH3() {
			storedHash = littleEndian.Uint64(data[format.RecordHeaderSize+len(body):])
		}
		again := format.AppendRecord(nil, header.Offset, header.Timestamp, body, header.BodyCRC, storedHash)
		canonical := append([]byte(nil), data[:header.FrameLength]...)
		canonical[flagsByte] &= 1 // the only flag a record has today
		resealRecordHeader(canonical)
		if !bytes.Equal(again, canonical) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", again, canonical)
		}
	})
}

// checkRecordPrefixes decodes prefixes of data: when the whole decodes,
// every prefix shorter than the frame is a torn frame (ErrShort) and every
// longer one decodes identically; when the whole fails, no prefix may
// succeed.
func checkRecordPrefixes(t *testing.T, data []byte, maxBody uint32, header format.RecordHeader, body []byte, err error) {
	t.Helper()
	for _, n := range prefixLengths(len(data), int(header.FrameLength), format.RecordHeaderSize) {
		prefixHeader, prefixBody, prefixErr := format.DecodeRecord(data[:n], maxBody)
		switch {
		case err != nil && prefixErr == nil:
			t.Fatalf("prefix of %d bytes decodes (%+v) but the whole fails: %v", n, prefixHeader, err)
		case err != nil:
			requireKnownError(t, prefixErr, "record prefix")
		case n < int(header.FrameLength) && !errors.Is(prefixErr, format.ErrShort):
			t.Fatalf("prefix of %d bytes of a %d-byte frame: %v, want ErrShort", n, header.FrameLength, prefixErr)
		case n >= int(header.FrameLength) && (prefixErr != nil || prefixHeader != header || !bytes.Equal(prefixBody, body)):
			t.Fatalf("prefix of %d bytes holding the whole frame decodes differently: %v", n, prefixErr)
		}
	}
}

// bodyFromFuzzBytes carves a Body out of arbitrary bytes, so the fuzzer
// also drives the encoder with shapes no example has.
func bodyFromFuzzBytes(data []byte) format.Body {
	take := func(n int) []byte {
		n = min(n, len(data))
		part := data[:n]
		data = data[n:]
		return part
	}
	control := take(8)
	control = append(control, make([]byte, 8-len(control))...)
	b := format.Body{Codec: format.Codec(control[0] % 4), HasProducer: control[1]&1 != 0,
		ProducerID: uint64(control[2]) << 56, Sequence: uint64(control[3])}
	b.Key = take(int(control[4]))
	b.Subject = take(int(control[5]))
	for range control[6] % 8 {
		name := take(len(data) / 4)
		b.Headers = append(b.Headers, format.Header{Name: string(name), Value: take(int(control[7]))})
	}
	b.Payload = take(len(data))
	if b.Codec != format.CodecNone {
		b.RawLength = uint32(control[7]) << 12
	}
	return b
}

func FuzzDecodeBody(f *testing.F) {
	for _, name := range []string{"empty", "payload only", "producer", "headers", "zstd", "everything", "unknown code"} {
		encoded, err := format.AppendBody(nil, exampleBodies()[name])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(encoded)
	}
	f.Add([]byte{})
	f.Add(make([]byte, format.BodyFixedSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		view, err := format.DecodeBody(data)
		if err != nil {
			requireKnownError(t, err, "body")
			if len(data) >= format.BodyFixedSize && data[0] > format.BodyVersion && !errors.Is(err, format.ErrTooNew) {
				t.Fatalf("body version %d: %v, want ErrTooNew", data[0], err)
			}
		} else {
			checkBodyView(t, data, view)
			again, err := format.AppendBody(nil, bodyFromView(view))
			if err != nil {
				t.Fatalf("a decoded body does not re-encode: %v", err)
			}
			canonical := append([]byte(nil), data...)
			flags := littleEndian.Uint16(canonical[bodyFlagsAt:])
			littleEndian.PutUint16(canonical[bodyFlagsAt:], flags&1) // the only body flag today
			if !bytes.Equal(again, canonical) {
				t.Fatalf("re-encoding differs:\n got %x\nwant %x", again, canonical)
			}
			// A body is not self-delimiting: its length comes from the
			// record frame, so every prefix must fail.
			for _, n := range prefixLengths(len(data), format.BodyFixedSize, format.BodyFixedSize+format.BodyProducerSize) {
				_, err := format.DecodeBody(data[:n])
				requireErrorIs(t, err, format.ErrMalformedBody, "prefix of a valid body")
			}
		}

		// The same bytes, read as fields, through the encoder and back.
		body := bodyFromFuzzBytes(data)
		encoded, err := format.AppendBody(nil, body)
		if err != nil {
			t.Fatalf("AppendBody(%+v): %v", body, err)
		}
		if len(encoded) != format.BodySize(body) {
			t.Fatalf("encoded %d bytes, BodySize says %d", len(encoded), format.BodySize(body))
		}
		decoded, err := format.DecodeBody(encoded)
		if err != nil {
			t.Fatalf("DecodeBody(AppendBody(%+v)): %v", body, err)
		}
		checkBodyView(t, encoded, decoded)
		if got, want := normalizeBody(bodyFromView(decoded)), normalizeBody(body); !bodiesEqual(got, want) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
		}
	})
}

func bodiesEqual(a, b format.Body) bool {
	if a.Codec != b.Codec || a.RawLength != b.RawLength || a.HasProducer != b.HasProducer ||
		a.ProducerID != b.ProducerID || a.Sequence != b.Sequence || len(a.Headers) != len(b.Headers) ||
		!bytes.Equal(a.Key, b.Key) || !bytes.Equal(a.Subject, b.Subject) || !bytes.Equal(a.Payload, b.Payload) {
		return false
	}
	for i := range a.Headers {
		if a.Headers[i].Name != b.Headers[i].Name || !bytes.Equal(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}

// fuzzFixedFrame runs the checks shared by the fixed-size frames. decode
// returns the re-encoding of what it decoded, so "decodes to the same
// values" is a byte comparison.
func fuzzFixedFrame(t *testing.T, input []byte, repair bool, size int, reserved [][2]int, decode func([]byte) ([]byte, error)) {
	data := append([]byte(nil), input...)
	if repair && len(data) >= size {
		resealFixed(data[:size])
	}
	again, err := decode(data)
	for _, n := range prefixLengths(len(data), size) {
		prefixAgain, prefixErr := decode(data[:n])
		switch {
		case err != nil && prefixErr == nil:
			t.Fatalf("prefix of %d bytes decodes but the whole fails: %v", n, err)
		case n < size && !errors.Is(prefixErr, format.ErrShort):
			t.Fatalf("prefix of %d bytes of a %d-byte frame: %v, want ErrShort", n, size, prefixErr)
		case err == nil && n >= size && (prefixErr != nil || !bytes.Equal(prefixAgain, again)):
			t.Fatalf("prefix of %d bytes holding the whole frame decodes differently: %v", n, prefixErr)
		case prefixErr != nil:
			requireKnownError(t, prefixErr, "prefix")
		}
	}
	for _, at := range []int{1, 8, size / 2} {
		if at < len(data) {
			if _, err := decode(data[at:]); err != nil {
				requireKnownError(t, err, "frame decoded from inside")
			}
		}
	}
	if err != nil {
		requireKnownError(t, err, "frame")
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
	f.Fuzz(func(t *testing.T, data []byte, repair bool) {
		fuzzFixedFrame(t, data, repair, format.CommitFrameSize, commitReserved, func(b []byte) ([]byte, error) {
			c, err := format.DecodeCommit(b)
			if err == nil && (c.Count == 0 || c.LastOffset < c.FirstOffset || c.LastOffset-c.FirstOffset != uint64(c.Count)-1) {
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
