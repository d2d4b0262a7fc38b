// Package format encodes and decodes the bytes IronBus keeps on disk: the
// segment header, record frames, record bodies, commit frames and the
// sealed-segment footer. It does no I/O, so every decoder here can be fuzzed
// and called on hostile input: each one checks lengths before it allocates
// or slices and returns a typed error instead of panicking.
//
// The byte diagrams are in the package documentation of
// github.com/ironbus/ironbus/segment and in docs/FORMAT.md; the constants
// below are the on-disk format and must never change meaning. New fields
// arrive in reserved bytes or behind a new version number; a decoder that
// meets a version newer than it knows returns an error wrapping
// [ErrTooNew] and never guesses.
//
// All integers are little-endian and fixed width (no varints). Checksums are
// CRC32C (Castagnoli, hardware accelerated), plus xxh3-64 over record bodies
// of 64 KiB and more, where a 32-bit CRC alone detects too little.
package format
