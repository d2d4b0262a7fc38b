// Package arena will own IronBus's preallocated memory: slabs for
// connection read buffers and append buffers, handed out with explicit
// lifetimes ("valid until Release"), and the RAM budget. Every pool
// registers the bytes it may ever hold; the broker refuses to boot when the
// sum of the configured caps exceeds --ram-ceiling, so memory is a function
// of configuration and never of backlog (invariant I8).
//
// Invariant: an arena never grows past its budget; exhaustion is
// backpressure, not allocation.
//
// Not built yet: see the reactors issue.
package arena
