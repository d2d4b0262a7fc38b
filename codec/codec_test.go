package codec_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/ironbus/ironbus/codec"
	"github.com/ironbus/ironbus/record"
)

// jsonLike returns n bytes of JSON-ish text, the compressible payload the
// benchmarks and docs use: repeated field names, varying values.
func jsonLike(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, `{"device":"sensor-%03d","seq":%d,"temp_c":%.2f,"status":"ok","tags":["edge","cabinet-%d"]}`,
			rng.IntN(1000), i, 15+rng.Float64()*10, rng.IntN(8))
	}
	return b.Bytes()[:n]
}

func randomBytes(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func TestRoundTripEachCodec(t *testing.T) {
	for _, c := range []record.Codec{record.CodecLZ4, record.CodecZstd} {
		for _, size := range []int{512, 1024, 64 << 10, 1 << 20} {
			t.Run(fmt.Sprintf("%s/%d", c, size), func(t *testing.T) {
				compressor, err := codec.NewCompressor(codec.Policy{Codec: c})
				if err != nil {
					t.Fatal(err)
				}
				defer compressor.Close()
				payload := jsonLike(size, uint64(size))
				stored, got := compressor.Compress(payload)
				if got != c {
					t.Fatalf("codec %s for a JSON-like payload of %d bytes, want %s", got, size, c)
				}
				if len(stored) > size-size/8 {
					t.Fatalf("kept %d bytes of %d: saves less than an eighth", len(stored), size)
				}
				d := codec.NewDecompressor(1 << 20)
				defer d.Close()
				raw, err := d.Decompress([]byte("prefix"), got, stored, uint32(size))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(raw, append([]byte("prefix"), payload...)) {
					t.Fatal("round trip changed the payload")
				}
			})
		}
	}
}

func TestIncompressibleAndTinyStayUncompressed(t *testing.T) {
	for _, c := range []record.Codec{record.CodecLZ4, record.CodecZstd} {
		compressor, err := codec.NewCompressor(codec.Policy{Codec: c})
		if err != nil {
			t.Fatal(err)
		}
		random := randomBytes(4096, 7)
		if stored, got := compressor.Compress(random); got != record.CodecNone || &stored[0] != &random[0] {
			t.Errorf("%s: random bytes came back as %s, want the payload itself with none", c, got)
		}
		tiny := bytes.Repeat([]byte("a"), codec.DefaultMinBytes-1)
		if _, got := compressor.Compress(tiny); got != record.CodecNone {
			t.Errorf("%s: a %d-byte payload was compressed; the threshold is %d", c, len(tiny), codec.DefaultMinBytes)
		}
		always, _ := codec.NewCompressor(codec.Policy{Codec: c, MinBytes: -1})
		if _, got := always.Compress(tiny); got != c {
			t.Errorf("%s: MinBytes -1 left a compressible %d-byte payload as %s", c, len(tiny), got)
		}
		compressor.Close()
		always.Close()
	}
	none, _ := codec.NewCompressor(codec.Policy{Codec: record.CodecNone})
	if _, got := none.Compress(jsonLike(4096, 1)); got != record.CodecNone {
		t.Errorf("policy none compressed")
	}
}

func TestUnknownCodec(t *testing.T) {
	if _, err := codec.NewCompressor(codec.Policy{Codec: 9}); !errors.Is(err, codec.ErrUnknownCodec) {
		t.Fatalf("NewCompressor(codec 9) = %v, want ErrUnknownCodec", err)
	}
	d := codec.NewDecompressor(1024)
	if _, err := d.Decompress(nil, 9, []byte("x"), 1); !errors.Is(err, codec.ErrUnknownCodec) {
		t.Fatalf("Decompress(codec 9) = %v, want ErrUnknownCodec", err)
	}
}

func TestCapCheckedBeforeDecoding(t *testing.T) {
	compressor, _ := codec.NewCompressor(codec.Policy{Codec: record.CodecLZ4})
	payload := jsonLike(4096, 3)
	stored, c := compressor.Compress(payload)
	d := codec.NewDecompressor(4095)
	_, err := d.Decompress(nil, c, stored, uint32(len(payload)))
	if !errors.Is(err, codec.ErrTooLarge) {
		t.Fatalf("Decompress over the cap = %v, want ErrTooLarge", err)
	}
	// A declared size of 4 GiB must fail without an allocation that size.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _ = d.Decompress(nil, c, stored, 1<<32-1)
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<10 {
		t.Fatalf("refusing an oversized record allocated %d bytes", grew)
	}
}

func TestWrongDeclaredLength(t *testing.T) {
	for _, c := range []record.Codec{record.CodecLZ4, record.CodecZstd} {
		compressor, _ := codec.NewCompressor(codec.Policy{Codec: c})
		payload := jsonLike(2048, 4)
		stored, _ := compressor.Compress(payload)
		stored = bytes.Clone(stored)
		d := codec.NewDecompressor(1 << 20)
		for _, declared := range []uint32{0, 1, 2047, 2049, 4096} {
			if _, err := d.Decompress(nil, c, stored, declared); !errors.Is(err, codec.ErrCorrupt) {
				t.Errorf("%s: declared %d for 2048 raw bytes: %v, want ErrCorrupt", c, declared, err)
			}
		}
		compressor.Close()
	}
}

func TestGarbageIsCorruptNotPanic(t *testing.T) {
	d := codec.NewDecompressor(1 << 20)
	defer d.Close()
	for seed := range uint64(200) {
		garbage := randomBytes(int(seed%300)+1, seed)
		for _, c := range []record.Codec{record.CodecLZ4, record.CodecZstd} {
			if _, err := d.Decompress(nil, c, garbage, 1000); err != nil && !errors.Is(err, codec.ErrCorrupt) {
				t.Fatalf("%s garbage: %v, want ErrCorrupt", c, err)
			}
		}
	}
}

func TestSteadyStateCompressionAllocatesNothing(t *testing.T) {
	compressor, _ := codec.NewCompressor(codec.Policy{Codec: record.CodecLZ4})
	payload := jsonLike(1024, 5)
	compressor.Compress(payload)
	if allocs := testing.AllocsPerRun(100, func() { compressor.Compress(payload) }); allocs != 0 {
		t.Fatalf("lz4 Compress: %.1f allocations per call, want 0", allocs)
	}
	d := codec.NewDecompressor(1 << 20)
	stored, c := compressor.Compress(payload)
	buf := make([]byte, 0, 1024)
	if allocs := testing.AllocsPerRun(100, func() { _, _ = d.Decompress(buf[:0], c, stored, 1024) }); allocs != 0 {
		t.Fatalf("lz4 Decompress into a buffer with room: %.1f allocations per call, want 0", allocs)
	}
}

// TestIncompressibleRunBacksOff: after 8 payloads in a row fail to shrink,
// the compressor tries only one in 16, and a payload that shrinks again
// ends the back-off.
func TestIncompressibleRunBacksOff(t *testing.T) {
	compressor, _ := codec.NewCompressor(codec.Policy{Codec: record.CodecLZ4})
	random, text := randomBytes(1024, 21), jsonLike(1024, 21)
	for range 8 {
		compressor.Compress(random)
	}
	compressed := 0
	for range 16 {
		if _, got := compressor.Compress(text); got == record.CodecLZ4 {
			compressed++
		}
	}
	// 15 skipped, then the probe finds the text compressible.
	if compressed != 1 {
		t.Fatalf("%d of 16 compressible payloads compressed during the back-off, want 1 (the probe)", compressed)
	}
	for i := range 8 {
		if _, got := compressor.Compress(text); got != record.CodecLZ4 {
			t.Fatalf("payload %d after the back-off ended was not compressed", i)
		}
	}
}
