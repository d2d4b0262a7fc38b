// Package format encodes and decodes the storage framing IronBus keeps on
// disk around records: the segment header, the prefix every frame shares
// and the frame kinds, commit frames, skip frames, control frames (a
// replicated log's entries that own no offsets) and the sealed-segment
// footer. The records themselves (the record frame and the body inside it)
// are package github.com/ironbus/ironbus/record's, shared with the client
// that produces and consumes them. This package does no I/O, so every
// decoder here can be fuzzed and called on hostile input: each one checks
// lengths before it allocates or slices and returns a typed error instead
// of panicking.
//
// The byte diagrams are in the package documentation of
// github.com/ironbus/ironbus/segment and in docs/FORMAT.md; the constants
// below are the on-disk format and must never change meaning. New fields
// arrive in reserved bytes or behind a new version number; a decoder that
// meets a version newer than it knows returns an error wrapping
// [ErrTooNew] and never guesses.
//
// All integers are little-endian and fixed width (no varints). Checksums are
// CRC32C (Castagnoli, hardware accelerated); the log identity in a segment
// header is an xxh3-64 of the stream name.
package format
