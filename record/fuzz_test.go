package record_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/zeebo/xxh3"

	"github.com/ironbus/ironbus/internal/codectest"
	"github.com/ironbus/ironbus/record"
)

// Fuzz targets for the frame and body decoders. Each checks that the
// decoder never panics, returns only the package's error classes, decodes
// nothing from a prefix that it would not decode from the whole, and that
// what it accepts re-encodes to the same bytes (up to the ignored flag
// bits, which the encoders write as zero).
//
// Every frame is checksummed, and a mutation fuzzer practically never forges
// a CRC32C, so FuzzParseFrame takes a repair argument: the harness
// recomputes the checksums the fuzzer asks for after the mutation. That
// lets the fuzzer reach the checks behind the checksum (lengths, versions,
// flags), which is where hand-written decoders go wrong.
//
// Run one with: go test -run='^$' -fuzz='^FuzzParseFrame$' -fuzztime=30s ./record
// (fuzz/README.md lists them all.)

// knownErrors are the classes decoders may return; anything else means a
// decoder let an error through unwrapped.
var knownErrors = []error{record.ErrShort, record.ErrCorrupt, record.ErrTooNew, record.ErrTooLarge, record.ErrMalformed}

// Record repair bits: which parts of a mutated record the harness fixes
// before decoding. The fuzzer picks the combination.
const (
	repairFrameHeaderCRC = 1 << iota // header CRC32C over [0, 32)
	repairFrameLengths               // frame length and xxh3 flag agree with the body length
	repairFrameBody                  // body CRC, stored xxh3 and trailer, when the frame fits
	repairFramePrefix                // magic "IR" and version 1
	// repairFrameGrow inserts BodyHashThreshold zero bytes after the header
	// and raises the body length to match, so a small input becomes a
	// frame large enough to carry an xxh3. Keeping the inputs small keeps
	// the fuzzer fast; 64 KiB seeds slowed it to a few hundred runs a
	// second.
	repairFrameGrow
)

func repairFrame(input []byte, repairs uint32) []byte {
	data := append([]byte(nil), input...)
	if len(data) < record.FrameHeaderSize {
		return data
	}
	if repairs&repairFrameGrow != 0 {
		grown := make([]byte, 0, len(data)+record.BodyHashThreshold)
		grown = append(grown, data[:record.FrameHeaderSize]...)
		grown = append(grown, make([]byte, record.BodyHashThreshold)...)
		data = append(grown, data[record.FrameHeaderSize:]...)
		bodyLength := littleEndian.Uint32(data[frameBodyLengthAt:])
		littleEndian.PutUint32(data[frameBodyLengthAt:], bodyLength+record.BodyHashThreshold)
	}
	if repairs&repairFramePrefix != 0 {
		data[0], data[1], data[versionByte] = 'I', 'R', record.FrameVersion
	}
	bodyLength := uint64(littleEndian.Uint32(data[frameBodyLengthAt:]))
	size := uint64(record.FrameHeaderSize) + bodyLength + record.FrameTrailerSize
	if bodyLength >= record.BodyHashThreshold {
		size += 8
	}
	if repairs&repairFrameLengths != 0 {
		littleEndian.PutUint32(data[frameLengthAt:], uint32(size))
		data[flagsByte] &^= 1
		if bodyLength >= record.BodyHashThreshold {
			data[flagsByte] |= 1
		}
	}
	if repairs&repairFrameBody != 0 && size <= uint64(len(data)) {
		end := record.FrameHeaderSize + int(bodyLength)
		body := data[record.FrameHeaderSize:end]
		littleEndian.PutUint32(data[frameBodyCRCAt:], record.Checksum(body))
		if bodyLength >= record.BodyHashThreshold {
			littleEndian.PutUint64(data[end:], xxh3.Hash(body))
		}
		littleEndian.PutUint32(data[size-4:size], uint32(size))
	}
	if repairs&repairFrameHeaderCRC != 0 {
		resealFrameHeader(data)
	}
	return data
}

func FuzzParseFrame(f *testing.F) {
	for _, size := range []int{0, 1, 33} {
		frame, _ := encodeTestFrame(uint64(size), int64(size)*3, size)
		f.Add(frame, uint32(record.DefaultMaxBody), uint32(0))
		f.Add(frame, uint32(size), uint32(repairFrameHeaderCRC))
		// The same frame grown past BodyHashThreshold, checksums repaired,
		// with room for the stored xxh3 (the grown body swallows the
		// trailer, so 12 more bytes are needed).
		grown := append(append([]byte(nil), frame...), make([]byte, 12)...)
		f.Add(grown, uint32(record.DefaultMaxBody), uint32(repairFrameGrow|repairFrameLengths|repairFrameBody|repairFrameHeaderCRC))
	}
	sealed := sealedFrame(f, []byte("a sealed body"), testAEAD(f, 9))
	f.Add(sealed, uint32(record.DefaultMaxBody), uint32(0))
	f.Add(sealed, uint32(12), uint32(0)) // the producer's body one byte over maxBody
	frame, _ := encodeTestFrame(7, 8, 12)
	f.Add(frame, uint32(11), uint32(0))                                                       // one byte over maxBody
	f.Add(append(frame, frame...), uint32(record.DefaultMaxBody), uint32(0))                  // two frames end to end
	f.Add(frame[:record.FrameHeaderSize], uint32(record.DefaultMaxBody), uint32(0xf))         // header only
	f.Add([]byte("IR\x02\x00"), uint32(record.DefaultMaxBody), uint32(0xf))                   // a newer version
	f.Add(make([]byte, record.FrameHeaderSize+4), uint32(record.DefaultMaxBody), uint32(0xf)) // zeros, all repaired
	f.Fuzz(func(t *testing.T, input []byte, maxBody uint32, repairs uint32) {
		data := repairFrame(input, repairs)
		header, body, err := record.ParseFrame(data, maxBody)
		checkFramePrefixes(t, data, maxBody, header, body, err)
		// A reader of a delivered run steps over what is not a record
		// frame by its prefix: never past the input, never by less than
		// the prefix.
		if n, err := record.OtherFrameLength(data); err != nil {
			codectest.RequireKnownError(t, err, "other frame", knownErrors...)
		} else if n < 8 || n > len(data) {
			t.Fatalf("OtherFrameLength = %d for %d bytes", n, len(data))
		}
		// A scanner resuming inside a frame decodes from any position.
		for _, at := range []int{1, 2, 8, record.FrameHeaderSize} {
			if at < len(data) {
				if _, _, err := record.ParseFrame(data[at:], maxBody); err != nil {
					codectest.RequireKnownError(t, err, "record decoded from inside", knownErrors...)
				}
			}
		}
		if err != nil {
			codectest.RequireKnownError(t, err, "record", knownErrors...)
			if body != nil {
				t.Fatal("a body came back with an error")
			}
			return
		}
		onlyHeader, err := record.ParseFrameHeader(data, maxBody)
		if err != nil || onlyHeader != header {
			t.Fatalf("ParseFrameHeader disagrees with ParseFrame: %+v, %v", onlyHeader, err)
		}
		limit := min(maxBody, record.AbsoluteMaxBody)
		if header.Encrypted() {
			limit += record.EncryptionOverhead // the limit is on the producer's body
		}
		switch {
		case header.BodyLength > limit:
			t.Fatalf("accepted a body of %d bytes with maxBody %d", header.BodyLength, maxBody)
		case int(header.FrameLength) != record.FrameSize(len(body)) || int(header.BodyLength) != len(body):
			t.Fatalf("frame length %d, body length %d, body of %d bytes", header.FrameLength, header.BodyLength, len(body))
		case record.Checksum(body) != header.BodyCRC:
			t.Fatal("accepted a body whose CRC does not match")
		case header.HasBodyHash() != (len(body) >= record.BodyHashThreshold):
			t.Fatal("accepted a frame whose xxh3 flag disagrees with its body length")
		}
		var storedHash uint64
		if header.HasBodyHash() {
			storedHash = littleEndian.Uint64(data[record.FrameHeaderSize+len(body):])
		}
		again := record.AppendFrame(nil, header.Offset, header.Timestamp, body, header.BodyCRC, storedHash)
		canonical := append([]byte(nil), data[:header.FrameLength]...)
		canonical[flagsByte] &= 1 // the xxh3 flag; an encrypted frame also has its own
		if header.Encrypted() {
			// An encrypted frame is a plain one with its version and flag.
			again[versionByte], again[flagsByte] = record.EncryptedFrameVersion, again[flagsByte]|2
			canonical[flagsByte] |= 2
			resealFrameHeader(again)
		}
		resealFrameHeader(canonical)
		if !bytes.Equal(again, canonical) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", again, canonical)
		}
	})
}

// checkFramePrefixes decodes prefixes of data: when the whole decodes,
// every prefix shorter than the frame is a torn frame (ErrShort) and every
// longer one decodes identically; when the whole fails, no prefix may
// succeed.
func checkFramePrefixes(t *testing.T, data []byte, maxBody uint32, header record.FrameHeader, body []byte, err error) {
	t.Helper()
	for _, n := range codectest.PrefixLengths(len(data), int(header.FrameLength), record.FrameHeaderSize) {
		prefixHeader, prefixBody, prefixErr := record.ParseFrame(data[:n], maxBody)
		switch {
		case err != nil && prefixErr == nil:
			t.Fatalf("prefix of %d bytes decodes (%+v) but the whole fails: %v", n, prefixHeader, err)
		case err != nil:
			codectest.RequireKnownError(t, prefixErr, "record prefix", knownErrors...)
		case n < int(header.FrameLength) && !errors.Is(prefixErr, record.ErrShort):
			t.Fatalf("prefix of %d bytes of a %d-byte frame: %v, want ErrShort", n, header.FrameLength, prefixErr)
		case n >= int(header.FrameLength) && (prefixErr != nil || prefixHeader != header || !bytes.Equal(prefixBody, body)):
			t.Fatalf("prefix of %d bytes holding the whole frame decodes differently: %v", n, prefixErr)
		}
	}
}

// bodyFromFuzzBytes carves a Body out of arbitrary bytes, so the fuzzer
// also drives the encoder with shapes no example has.
func bodyFromFuzzBytes(data []byte) record.Body {
	take := func(n int) []byte {
		n = min(n, len(data))
		part := data[:n]
		data = data[n:]
		return part
	}
	control := take(8)
	control = append(control, make([]byte, 8-len(control))...)
	b := record.Body{Codec: record.Codec(control[0] % 4), HasProducer: control[1]&1 != 0,
		ProducerID: uint64(control[2]) << 56, Sequence: uint64(control[3])}
	b.Key = take(int(control[4]))
	b.Subject = take(int(control[5]))
	for range control[6] % 8 {
		name := take(len(data) / 4)
		b.Headers = append(b.Headers, record.Header{Name: string(name), Value: take(int(control[7]))})
	}
	b.Payload = take(len(data))
	if b.Codec != record.CodecNone {
		b.RawLength = uint32(control[7]) << 12
	}
	return b
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"empty", "payload only", "producer", "headers", "zstd", "everything", "unknown code"} {
		encoded, err := record.AppendBody(nil, exampleBodies()[name])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(encoded)
	}
	f.Add([]byte{})
	f.Add(make([]byte, record.BodyFixedSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		view, err := record.Parse(data)
		if err != nil {
			codectest.RequireKnownError(t, err, "body", knownErrors...)
			if len(data) >= record.BodyFixedSize && data[0] > record.BodyVersion && !errors.Is(err, record.ErrTooNew) {
				t.Fatalf("body version %d: %v, want ErrTooNew", data[0], err)
			}
		} else {
			checkBodyView(t, data, view)
			again, err := record.AppendBody(nil, bodyFromView(view))
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
			for _, n := range codectest.PrefixLengths(len(data), record.BodyFixedSize, record.BodyFixedSize+record.BodyProducerSize) {
				_, err := record.Parse(data[:n])
				codectest.RequireErrorIs(t, err, record.ErrMalformed, "prefix of a valid body")
			}
		}

		// The same bytes, read as fields, through the encoder and back.
		body := bodyFromFuzzBytes(data)
		encoded, err := record.AppendBody(nil, body)
		if err != nil {
			t.Fatalf("AppendBody(%+v): %v", body, err)
		}
		if len(encoded) != record.BodySize(body) {
			t.Fatalf("encoded %d bytes, BodySize says %d", len(encoded), record.BodySize(body))
		}
		decoded, err := record.Parse(encoded)
		if err != nil {
			t.Fatalf("Parse(AppendBody(%+v)): %v", body, err)
		}
		checkBodyView(t, encoded, decoded)
		if got, want := normalizeBody(bodyFromView(decoded)), normalizeBody(body); !bodiesEqual(got, want) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
		}
	})
}

func bodiesEqual(a, b record.Body) bool {
	if a.Codec != b.Codec || a.RawLength != b.RawLength || a.HasProducer != b.HasProducer || a.Tombstone != b.Tombstone ||
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
