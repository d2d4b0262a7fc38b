// Package codec compresses record payloads on the producer side and
// decompresses them on the consumer side. It owns the choice of whether a
// payload is worth compressing and the limits that protect a consumer from
// a hostile or damaged compressed payload. The broker never calls it: it
// stores payloads as the producer sent them.
//
// Codecs are the ones the record body names (package record, docs/FORMAT.md):
// none, lz4 (the lz4 block format, no frame around it) and zstd (one zstd
// frame).
//
// Invariants:
//   - A Compressor keeps the compressed form only when it saves at least
//     an eighth of the payload and the payload is at least MinBytes long;
//     otherwise the payload travels as is, with codec none. So compression
//     never makes a record larger. After 8 tried payloads in a row fail to
//     shrink, only one in 16 is tried until one shrinks again, so a
//     producer of incompressible data pays for a sixteenth of the attempts.
//   - Decompress runs only on bytes whose CRC32C the caller has verified
//     (DESIGN I7): corruption in transit or at rest is the CRC's to catch;
//     what reaches Decompress is either good or was framed by a hostile or
//     broken producer.
//   - Decompress checks the raw length against its cap before allocating,
//     never writes more than the raw length, and fails unless the output is
//     exactly the raw length. Bad input is a typed error, never a panic.
//   - Encoders and decoders are reused: a Compressor's scratch space grows
//     to the largest payload it has seen and is then reused, so steady-state
//     compression allocates nothing.
package codec
