// Package ring will own the bounded lock-free rings (single-producer and
// multi-producer, single-consumer) that carry produce requests from the
// reactors to each log's appender and completions back, cache-line padded.
//
// Invariant: a ring never blocks and never allocates after construction; a
// full ring is reported to the caller, which stops reading the connection
// (credit backpressure), never drops.
//
// Not built yet: see the reactors issue.
package ring
