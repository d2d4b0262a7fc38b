// Package wire is the frame codec of IronBus's client protocol, version 1.
// It does no I/O: it turns bytes into frames and frames into bytes, and
// every decoder checks each length against the input before it slices or
// allocates, so it is safe on hostile input (and fuzzed).
//
// Every frame is an envelope
//
//	[u32 length][u8 type][u32 request id][body]
//
// little-endian, where length counts the type byte, the request id and the
// body (so it is at least 5). A client picks request ids; every reply
// carries the id of the request it answers, so many requests can be in
// flight on one connection and replies can come back in any order, with
// server pushes (deliveries, gap advisories) interleaved. Id 0 is for
// frames that answer nothing, such as a connection-level error.
//
// The first frame on a connection is Hello; the server answers Welcome
// with the protocol version, the capabilities both sides have and the
// limits (maximum frame, produce window, maximum record). Errors are
// structured: a numeric code, a retryable flag, a retry-after hint and a
// human message. Every verb names its stream and partition: the default
// stream is just a name. There is one consume verb, with a mode, and one
// gap advisory.
//
// docs/WIRE.md lists every frame, field and error code; a test checks that
// table against Types and Codes so the two cannot drift.
//
// Invariants: a decoder never reads past the frame it was given and never
// allocates for a length it has not checked; bodies alias the input buffer
// (the caller copies what it keeps).
package wire
