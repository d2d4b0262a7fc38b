// Package wire will own the client protocol's frame codec: the envelope
// [u32 length][u8 type][u32 request id][body], versioned bodies, the
// handshake with protocol version and capability bits, and the structured
// error codes (numeric code, retryable flag, retry-after).
//
// Invariant: wire does no I/O; every decoder checks lengths before it
// allocates and is fuzzed.
//
// Not built yet: see the serve issue.
package wire
