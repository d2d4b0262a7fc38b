// Package record encodes and decodes an IronBus record: the body a producer
// frames (key, subject, headers, payload, codec and, optionally, a producer
// id and sequence) and the record frame the broker wraps around it, which
// is what a segment stores and what a consumer receives, byte for byte.
// The client, the broker and the storage engine share this one codec; the
// rest of the storage framing (segment headers, commit, skip and footer
// frames) belongs to segment/format.
//
// The bytes are specified in docs/FORMAT.md ("Record frame", "Record
// body"). All integers are little-endian and fixed width.
//
// Invariants:
//   - The body CRC32C (Checksum, Castagnoli) covers every byte of the
//     encoded body, the compressed payload included: the producer computes
//     it, the broker verifies it and stores it unchanged in the frame, and a
//     consumer verifies it again before it parses or decompresses anything
//     (integrity before transform). Parse itself does not check it.
//   - A frame's header CRC32C covers the frame's first 32 bytes, so a torn
//     length is caught before a byte of the body is read; the frame length
//     is repeated after the body; bodies of BodyHashThreshold (64 KiB) and
//     more also carry an xxh3-64 of the body.
//   - Limits: key, subject and each header name are at most 65,535 bytes,
//     the header list, each header value and the payload at most 4 GiB by
//     their length prefixes; a frame's body is at most the maxBody its
//     reader passes and never more than AbsoluteMaxBody (1 GiB).
//     DefaultMaxBody (16 MiB) is the broker's default.
//   - Decoders run on hostile input: every length is checked against the
//     input before it is used, nothing is allocated for a declared length,
//     and bad input is an error wrapping one of the package's sentinels,
//     never a panic. Parse, Subject and ParseFrame allocate nothing on
//     success, and the slices they return alias the input.
//   - Encrypted frames (encrypt.go, version EncryptedFrameVersion) keep
//     the header's meaning for frame walkers: their body CRC covers the
//     stored envelope, checked before decrypting; the producer's CRC is
//     sealed with the body and checked after. A reader gets back the plain
//     frame a broker without encryption stores; the wire carries only
//     plain frames.
//   - Versions: a body or frame version newer than BodyVersion or
//     EncryptedFrameVersion fails with ErrTooNew; nothing guesses. Unknown flag bits
//     are ignored, so new fields arrive behind a flag or a version.
//
// This package is public API and kept stable under semantic versioning
// (docs/API.md).
package record
