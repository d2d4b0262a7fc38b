// Package loop will own the network reactors: one per core, each accepting,
// reading (64 KiB at a time), writing, running timers and waking on
// cross-thread posts. Backends: io_uring through the thin binding in
// loop/uring, epoll, and the portable std net backend, picked at run time
// by probing the kernel.
//
// Invariant: the loop never parses protocol bodies and never knows about
// streams; it hands byte ranges to the broker and writes what it is given.
//
// Not built yet: see the serve and reactors issues.
package loop
