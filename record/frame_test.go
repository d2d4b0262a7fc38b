package record_test

import (
	"bytes"
	"math"
	"runtime"
	"testing"

	"github.com/zeebo/xxh3"

	"github.com/ironbus/ironbus/internal/codectest"
	"github.com/ironbus/ironbus/record"
)

// frameBodySizes covers the sizes where the frame layout changes: empty,
// tiny, and both sides of the xxh3 threshold.
var frameBodySizes = []int{0, 1, 7, 100, record.BodyHashThreshold - 1, record.BodyHashThreshold, record.BodyHashThreshold + 1, 3 * record.BodyHashThreshold}

// encodeTestFrame builds a valid record frame with a body of size bytes.
func encodeTestFrame(offset uint64, timestamp int64, size int) (frame, body []byte) {
	body = make([]byte, size)
	for i := range body {
		body[i] = byte(i*7 + int(offset))
	}
	return record.AppendFrame(nil, offset, timestamp, body, record.Checksum(body), record.BodyHash(body)), body
}

func TestRoundTripFrame(t *testing.T) {
	offsets := []uint64{0, 1, 1 << 40, math.MaxUint64}
	timestamps := []int64{0, 1_800_000_000_000_000_000, -1, math.MinInt64, math.MaxInt64}
	for _, size := range frameBodySizes {
		for i, offset := range offsets {
			timestamp := timestamps[(i+size)%len(timestamps)]
			frame, body := encodeTestFrame(offset, timestamp, size)
			if len(frame) != record.FrameSize(size) {
				t.Fatalf("body %d: frame of %d bytes, FrameSize says %d", size, len(frame), record.FrameSize(size))
			}
			header, decoded, err := record.ParseFrame(frame, record.DefaultMaxBody)
			if err != nil {
				t.Fatalf("body %d offset %d: %v", size, offset, err)
			}
			want := record.FrameHeader{
				Version:     record.FrameVersion,
				Flags:       header.Flags, // checked through HasBodyHash below
				FrameLength: uint32(len(frame)),
				Offset:      offset,
				Timestamp:   timestamp,
				BodyLength:  uint32(size),
				BodyCRC:     record.Checksum(body),
			}
			if header != want {
				t.Fatalf("body %d: header %+v, want %+v", size, header, want)
			}
			if header.HasBodyHash() != (size >= record.BodyHashThreshold) {
				t.Fatalf("body %d: HasBodyHash = %v", size, header.HasBodyHash())
			}
			if !bytes.Equal(decoded, body) {
				t.Fatalf("body %d: decoded body differs", size)
			}
			// The body aliases the frame: readers hand out views of the
			// mapped segment without copying.
			if size > 0 && &decoded[0] != &frame[record.FrameHeaderSize] {
				t.Fatalf("body %d: decoded body does not alias the frame", size)
			}
			if onlyHeader, err := record.ParseFrameHeader(frame[:record.FrameHeaderSize], record.DefaultMaxBody); err != nil || onlyHeader != header {
				t.Fatalf("body %d: ParseFrameHeader = %+v, %v", size, onlyHeader, err)
			}
		}
	}
}

func TestRoundTripFrameXXH3Stored(t *testing.T) {
	frame, body := encodeTestFrame(5, 6, record.BodyHashThreshold)
	at := record.FrameHeaderSize + len(body)
	if got, want := littleEndian.Uint64(frame[at:]), xxh3.Hash(body); got != want {
		t.Fatalf("stored xxh3 %016x, want %016x", got, want)
	}
	if record.BodyHash(body) != xxh3.Hash(body) || record.BodyHash(body[:record.BodyHashThreshold-1]) != 0 {
		t.Fatal("BodyHash does not switch at BodyHashThreshold")
	}
	// A small body ignores the hash argument: nothing is stored for it.
	small := []byte("small")
	withHash := record.AppendFrame(nil, 1, 1, small, record.Checksum(small), 0xdeadbeef)
	withoutHash := record.AppendFrame(nil, 1, 1, small, record.Checksum(small), 0)
	if !bytes.Equal(withHash, withoutHash) {
		t.Fatal("a body below BodyHashThreshold stored its hash argument")
	}
}

// TestRoundTripFrameAppends checks that AppendFrame keeps what dst held,
// both when dst has room and when it must grow, and that frames laid end to
// end decode one after another the way the scanner walks them.
func TestRoundTripFrameAppends(t *testing.T) {
	for _, capacity := range []int{0, 10, 1 << 20} {
		prefix := []byte("existing bytes")
		dst := append(make([]byte, 0, len(prefix)+capacity), prefix...)
		var bodies [][]byte
		for i, size := range []int{3, 0, record.BodyHashThreshold, 17} {
			frame, body := encodeTestFrame(uint64(i), int64(i), size)
			dst = record.AppendFrame(dst, uint64(i), int64(i), body, record.Checksum(body), record.BodyHash(body))
			bodies = append(bodies, body)
			if !bytes.Equal(dst[len(dst)-len(frame):], frame) {
				t.Fatalf("capacity %d: appended frame %d differs from a fresh encoding", capacity, i)
			}
		}
		if !bytes.Equal(dst[:len(prefix)], prefix) {
			t.Fatalf("capacity %d: AppendFrame changed the bytes already in dst", capacity)
		}
		rest := dst[len(prefix):]
		for i, want := range bodies {
			header, body, err := record.ParseFrame(rest, record.DefaultMaxBody)
			if err != nil || header.Offset != uint64(i) || !bytes.Equal(body, want) {
				t.Fatalf("capacity %d: frame %d: %+v, %v", capacity, i, header, err)
			}
			rest = rest[header.FrameLength:]
		}
		if len(rest) != 0 {
			t.Fatalf("capacity %d: %d bytes left after the last frame", capacity, len(rest))
		}
	}
}

// TestRoundTripFrameOverwritesSpareCapacity fills dst's spare capacity with
// garbage first: a frame built in reused buffers must not inherit any of it.
func TestRoundTripFrameOverwritesSpareCapacity(t *testing.T) {
	body := []byte("payload")
	clean := record.AppendFrame(nil, 9, 9, body, record.Checksum(body), 0)
	dirty := bytes.Repeat([]byte{0xa5}, 512)
	got := record.AppendFrame(dirty[:0], 9, 9, body, record.Checksum(body), 0)
	if !bytes.Equal(got, clean) {
		t.Fatal("AppendFrame left stale bytes from dst's spare capacity")
	}
}

func TestFrameTruncations(t *testing.T) {
	for _, size := range []int{0, 5, record.BodyHashThreshold} {
		frame, _ := encodeTestFrame(3, 4, size)
		for n := range len(frame) {
			_, body, err := record.ParseFrame(frame[:n], record.DefaultMaxBody)
			codectest.RequireErrorIs(t, err, record.ErrShort, "record truncated")
			if body != nil {
				t.Fatalf("body %d cut to %d: a body came back with the error", size, n)
			}
		}
		for n := range record.FrameHeaderSize {
			_, err := record.ParseFrameHeader(frame[:n], record.DefaultMaxBody)
			codectest.RequireErrorIs(t, err, record.ErrShort, "record header truncated")
		}
	}
}

// TestFrameBitFlips flips every bit of small frames (and a sample of
// a large one): CRC32C detects every single-bit error, and together the
// header CRC, body CRC and trailer cover every byte of a frame.
func TestFrameBitFlips(t *testing.T) {
	for _, size := range []int{0, 1, 40} {
		frame, _ := encodeTestFrame(11, 12, size)
		for i := range len(frame) * 8 {
			frame[i/8] ^= 1 << (i % 8)
			if header, _, err := record.ParseFrame(frame, record.DefaultMaxBody); err == nil {
				t.Fatalf("body %d: flipping bit %d went unnoticed: %+v", size, i, header)
			}
			frame[i/8] ^= 1 << (i % 8)
		}
	}
	frame, body := encodeTestFrame(11, 12, record.BodyHashThreshold+3)
	rng := codectest.NewRand(1)
	for range 200 {
		i := rng.IntN(len(frame) * 8)
		frame[i/8] ^= 1 << (i % 8)
		if _, _, err := record.ParseFrame(frame, record.DefaultMaxBody); err == nil {
			t.Fatalf("large body: flipping bit %d went unnoticed", i)
		}
		frame[i/8] ^= 1 << (i % 8)
	}
	if _, got, err := record.ParseFrame(frame, record.DefaultMaxBody); err != nil || !bytes.Equal(got, body) {
		t.Fatal("the frame did not survive the flips being undone")
	}
}

func TestFrameRejects(t *testing.T) {
	type edit func(frame []byte)
	tests := []struct {
		name string
		size int
		edit edit
		want error
	}{
		{"bad magic", 4, func(f []byte) { f[1] = 'X'; resealFrameHeader(f) }, record.ErrCorrupt},
		{"header checksum", 4, func(f []byte) { f[frameHeaderCRCAt] ^= 1 }, record.ErrCorrupt},
		{"version zero", 4, func(f []byte) { f[versionByte] = 0; resealFrameHeader(f) }, record.ErrCorrupt},
		{"version past encrypted", 4, func(f []byte) { f[versionByte] = record.EncryptedFrameVersion + 1; resealFrameHeader(f) }, record.ErrTooNew},
		{"encrypted version without its flag", 4, func(f []byte) { f[versionByte] = record.EncryptedFrameVersion; resealFrameHeader(f) }, record.ErrCorrupt},
		{"version max", 4, func(f []byte) { f[versionByte] = 0xff; resealFrameHeader(f) }, record.ErrTooNew},
		{"frame length too long", 4, func(f []byte) {
			littleEndian.PutUint32(f[frameLengthAt:], uint32(len(f)+1))
			resealFrameHeader(f)
		}, record.ErrCorrupt},
		{"frame length too short", 4, func(f []byte) {
			littleEndian.PutUint32(f[frameLengthAt:], uint32(len(f)-1))
			resealFrameHeader(f)
		}, record.ErrCorrupt},
		{"xxh3 flag on a small body", 4, func(f []byte) { f[flagsByte] |= 1; resealFrameHeader(f) }, record.ErrCorrupt},
		{"xxh3 flag missing on a large body", record.BodyHashThreshold, func(f []byte) { f[flagsByte] &^= 1; resealFrameHeader(f) }, record.ErrCorrupt},
		{"body checksum", 4, func(f []byte) { f[record.FrameHeaderSize] ^= 0x10 }, record.ErrCorrupt},
		{"body checksum field", 4, func(f []byte) { f[frameBodyCRCAt] ^= 1; resealFrameHeader(f) }, record.ErrCorrupt},
		{"empty body checksum field", 0, func(f []byte) { f[frameBodyCRCAt] ^= 1; resealFrameHeader(f) }, record.ErrCorrupt},
		{"stored xxh3", record.BodyHashThreshold, func(f []byte) { f[record.FrameHeaderSize+record.BodyHashThreshold] ^= 1 }, record.ErrCorrupt},
		{"trailer", 4, func(f []byte) { f[len(f)-1] ^= 1 }, record.ErrCorrupt},
		{"trailer of a large body", record.BodyHashThreshold, func(f []byte) { f[len(f)-4] ^= 1 }, record.ErrCorrupt},
	}
	for _, test := range tests {
		frame, _ := encodeTestFrame(1, 2, test.size)
		test.edit(frame)
		_, body, err := record.ParseFrame(frame, record.DefaultMaxBody)
		codectest.RequireErrorIs(t, err, test.want, test.name)
		if body != nil {
			t.Errorf("%s: a body came back with the error", test.name)
		}
	}
}

// TestFrameUnknownFlagsIgnored pins today's behaviour: flag bits
// other than the xxh3 bit are covered by the header checksum but ignored,
// so a future flag does not make old binaries refuse a segment.
func TestFrameUnknownFlagsIgnored(t *testing.T) {
	frame, _ := encodeTestFrame(1, 2, 4)
	frame[flagsByte] |= 0xfe
	resealFrameHeader(frame)
	header, _, err := record.ParseFrame(frame, record.DefaultMaxBody)
	if err != nil || header.Flags != 0xfe || header.HasBodyHash() {
		t.Fatalf("unknown flags: %+v, %v", header, err)
	}
}

// claimBodyLength rewrites a record header to declare a body of length
// bytes with a consistent frame length and flag and a valid checksum, so
// only the length limit can reject it.
func claimBodyLength(frame []byte, length uint32) {
	littleEndian.PutUint32(frame[frameBodyLengthAt:], length)
	littleEndian.PutUint32(frame[frameLengthAt:], uint32(record.FrameSize(int(length))))
	frame[flagsByte] = 0
	if length >= record.BodyHashThreshold {
		frame[flagsByte] = 1
	}
	resealFrameHeader(frame)
}

func TestFrameTooLarge(t *testing.T) {
	frame, _ := encodeTestFrame(1, 2, 100)
	if _, _, err := record.ParseFrame(frame, 100); err != nil {
		t.Fatalf("body exactly maxBody: %v", err)
	}
	_, _, err := record.ParseFrame(frame, 99)
	codectest.RequireErrorIs(t, err, record.ErrTooLarge, "body one byte over maxBody")
	_, err = record.ParseFrameHeader(frame, 0)
	codectest.RequireErrorIs(t, err, record.ErrTooLarge, "maxBody zero")

	header := append([]byte(nil), frame[:record.FrameHeaderSize]...)
	claimBodyLength(header, record.AbsoluteMaxBody+1)
	_, err = record.ParseFrameHeader(header, math.MaxUint32)
	codectest.RequireErrorIs(t, err, record.ErrTooLarge, "body over AbsoluteMaxBody with no configured limit")
	claimBodyLength(header, math.MaxUint32)
	_, err = record.ParseFrameHeader(header, math.MaxUint32)
	codectest.RequireErrorIs(t, err, record.ErrTooLarge, "body of 4 GiB")

	// At the absolute limit the header is fine and only the missing bytes
	// stop the decode: a torn tail, not corruption.
	claimBodyLength(header, record.AbsoluteMaxBody)
	if _, err := record.ParseFrameHeader(header, math.MaxUint32); err != nil {
		t.Fatalf("body of AbsoluteMaxBody: %v", err)
	}
	_, _, err = record.ParseFrame(header, math.MaxUint32)
	codectest.RequireErrorIs(t, err, record.ErrShort, "header of a 1 GiB record alone")
}

// TestFrameTooLargeDoesNotAllocate decodes headers that declare
// huge bodies. The error message is allowed a few small allocations; what
// must never happen is an allocation sized by the declared length.
func TestFrameTooLargeDoesNotAllocate(t *testing.T) {
	frame, _ := encodeTestFrame(1, 2, 8)
	header := frame[:record.FrameHeaderSize]
	claimBodyLength(header, record.AbsoluteMaxBody)
	cases := []struct {
		name    string
		maxBody uint32
		want    error
	}{
		{"over maxBody", record.DefaultMaxBody, record.ErrTooLarge},
		{"within maxBody but absent", math.MaxUint32, record.ErrShort},
	}
	for _, c := range cases {
		decode := func() {
			if _, _, err := record.ParseFrame(header, c.maxBody); err == nil {
				t.Fatalf("%s: decoded", c.name)
			}
		}
		_, _, err := record.ParseFrame(header, c.maxBody)
		codectest.RequireErrorIs(t, err, c.want, c.name)
		if allocs := testing.AllocsPerRun(100, decode); allocs > 8 {
			t.Errorf("%s: %.0f allocations per decode", c.name, allocs)
		}
		if perDecode := bytesAllocated(100, decode); perDecode > 4096 {
			t.Errorf("%s: %d bytes allocated per decode of a 36-byte header", c.name, perDecode)
		}
	}
}

// bytesAllocated returns the heap bytes allocated per call of f, averaged
// over runs. AllocsPerRun counts allocations but not their size, and a
// single allocation of the declared length is exactly the bug to catch.
func bytesAllocated(runs int, f func()) uint64 {
	f() // warm up lazily initialised state outside the measurement
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(runs)
}

// TestFrameVerifyShortFrame covers VerifyFrame's own length check,
// used by readers that decode the header first and fetch the rest later.
func TestFrameVerifyShortFrame(t *testing.T) {
	frame, body := encodeTestFrame(1, 2, 30)
	header, err := record.ParseFrameHeader(frame, record.DefaultMaxBody)
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(frame) {
		_, err := record.VerifyFrame(frame[:n], header)
		codectest.RequireErrorIs(t, err, record.ErrShort, "VerifyFrame on a short frame")
	}
	got, err := record.VerifyFrame(append(frame, 0xee, 0xee), header)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("VerifyFrame with trailing bytes: %v", err)
	}
}
