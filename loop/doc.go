// Package loop owns the network side of the broker: accepting
// connections, reading bytes, writing bytes, timeouts and draining. The
// broker implements Handler and Session and never sees a socket, so the
// backend can change underneath it.
//
// Built so far (the serve issue): the std backend, on package net, one
// reading goroutine per connection with a 64 KiB buffer that grows for a
// large frame up to Config.MaxBuffer. It runs on every OS and is the
// reference the reactor backends (io_uring and epoll, the reactors issue)
// must match.
//
// Contract with the session:
//   - Data is called from one goroutine per connection, never
//     concurrently for the same connection, with every unconsumed byte
//     followed by the new ones; the session consumes whole frames and
//     returns how many bytes it used. Under the std backend Data may block
//     to apply backpressure (the connection is not read meanwhile); the
//     reactors will replace blocking with pause and resume.
//   - ReadStopped is called once when no more Data will come (peer closed,
//     read error or timeout, server draining). The session then finishes
//     its in-flight work and calls Conn.Close; the server waits for that
//     when it drains.
//   - Conn.Write is safe for concurrent use; each call is one write.
//
// Invariant: the loop never parses protocol bodies and never knows about
// streams.
package loop
