package codec

import (
	"fmt"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/ironbus/ironbus/record"
)

// Compression policy defaults (docs/BENCHMARKS.md, "Compression", has the
// measurements behind them).
const (
	// DefaultMinBytes: payloads shorter than this are sent as they are.
	// Below it lz4 rarely saves an eighth on real messages, and a record's
	// fixed costs (frame, body prefix, CRC) dwarf what it would save.
	DefaultMinBytes = 128
	// savingDivisor: the compressed form is kept only when it is at most
	// len - len/savingDivisor bytes, i.e. it saves at least an eighth.
	// Less than that is not worth every consumer's decompression.
	savingDivisor = 8
	// A producer whose payloads do not compress (already compressed
	// images, encrypted blobs) should not pay a failed attempt on every
	// record: after missesBeforeSkipping payloads in a row fail to shrink,
	// only one in skipPeriod is tried until one shrinks again.
	missesBeforeSkipping = 8
	skipPeriod           = 16
)

// Policy says what a producer compresses with.
type Policy struct {
	// Codec to try: record.CodecNone turns compression off.
	Codec record.Codec
	// MinBytes is the shortest payload worth trying: 0 means
	// DefaultMinBytes, a negative value tries every payload.
	MinBytes int
}

func (p Policy) minBytes() int {
	switch {
	case p.MinBytes == 0:
		return DefaultMinBytes
	case p.MinBytes < 0:
		return 1
	}
	return p.MinBytes
}

// Compressor applies a Policy to payloads. It is not safe for concurrent
// use: a producer owns one.
type Compressor struct {
	policy  Policy
	minimum int
	lz4     *lz4.Compressor // its hash table is 128 KiB: made on first use
	zstd    *zstd.Encoder
	scratch []byte // the last compressed payload; reused
	misses  int    // consecutive tried payloads that did not shrink enough
	skip    int    // payloads still to send untried
}

// NewCompressor returns a Compressor for policy. It fails only for a codec
// it does not know.
func NewCompressor(policy Policy) (*Compressor, error) {
	c := &Compressor{policy: policy, minimum: policy.minBytes()}
	switch policy.Codec {
	case record.CodecNone, record.CodecLZ4:
	case record.CodecZstd:
		// One encoder goroutine and the smaller tables: a producer
		// compresses one payload at a time, and edge boxes are short of
		// RAM. No zstd checksum: the record's CRC32C covers the bytes.
		encoder, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true),
			zstd.WithEncoderCRC(false), zstd.WithEncoderLevel(zstd.SpeedDefault))
		if err != nil {
			return nil, fmt.Errorf("codec: zstd encoder: %w", err)
		}
		c.zstd = encoder
	default:
		return nil, fmt.Errorf("%w: %s", ErrUnknownCodec, policy.Codec)
	}
	return c, nil
}

// Policy returns the policy the Compressor applies.
func (c *Compressor) Policy() Policy { return c.policy }

// Compress returns the bytes to store for payload and their codec: the
// compressed form when the policy says it is worth it, else payload itself
// with record.CodecNone. A compressed result aliases the Compressor's
// scratch space and is valid until the next call.
func (c *Compressor) Compress(payload []byte) ([]byte, record.Codec) {
	if c.policy.Codec == record.CodecNone || len(payload) < c.minimum {
		return payload, record.CodecNone
	}
	if c.skip > 0 {
		c.skip--
		return payload, record.CodecNone
	}
	limit := len(payload) - len(payload)/savingDivisor
	if len(payload)/savingDivisor == 0 {
		limit-- // a payload of under 8 bytes must still shrink
	}
	var out []byte
	switch c.policy.Codec {
	case record.CodecLZ4:
		out = c.compressLZ4(payload, limit)
	case record.CodecZstd:
		out = c.zstd.EncodeAll(payload, c.scratch[:0])
		c.scratch = out[:0]
	}
	if len(out) == 0 || len(out) > limit {
		if c.misses++; c.misses >= missesBeforeSkipping {
			c.skip = skipPeriod - 1
		}
		return payload, record.CodecNone
	}
	c.misses = 0
	return out, c.policy.Codec
}

// compressLZ4 compresses into a buffer of exactly limit bytes: lz4 gives
// up as soon as the output would not fit, so an incompressible payload
// costs a fraction of a full attempt. It returns nil when it does not fit.
func (c *Compressor) compressLZ4(payload []byte, limit int) []byte {
	if c.lz4 == nil {
		c.lz4 = new(lz4.Compressor)
	}
	if cap(c.scratch) < limit {
		c.scratch = make([]byte, limit)
	}
	n, err := c.lz4.CompressBlock(payload, c.scratch[:limit])
	if err != nil || n == 0 {
		return nil
	}
	return c.scratch[:n]
}

// Close releases the zstd encoder's resources. The Compressor must not be
// used afterwards.
func (c *Compressor) Close() error {
	if c.zstd != nil {
		return c.zstd.Close()
	}
	return nil
}
