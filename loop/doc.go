// Package loop owns the network side of the broker: accepting
// connections, reading bytes, writing bytes, timeouts and draining. The
// protocol session (the wire session) implements Handler and Session and
// never sees a socket, so the backend can change underneath it.
//
// Three backends implement it, checked by one conformance suite:
//
//   - std, on package net: one reading goroutine per connection with a
//     64 KiB buffer that grows for a large frame up to Config.MaxBuffer.
//     It runs on every OS and is the reference the reactors must match.
//   - epoll (Linux): one reactor per core (Config.Loops, GOMAXPROCS by
//     default), each an epoll instance and one goroutine that reads 64 KiB
//     at a time into a per-reactor buffer, keeps only unconsumed bytes in
//     a connection buffer from the budgeted slab (an idle connection holds
//     none), and writes each connection's queued output once per pass.
//   - uring (Linux 6.0+): one reactor per core, each owning one ring.
//     Reactor 0 keeps a multishot ACCEPT on the listener and deals
//     connections to the reactors in turn. Each connection keeps a
//     multishot RECV that takes buffers from its reactor's provided-buffer
//     ring, mmap'd off the Go heap; bytes for a paused session wait in a
//     spill list and follow the input buffer on resume. Output goes out as
//     one SEND per connection at a time. user_data is a slot index plus a
//     generation and the op kind, never a pointer; a closed connection's
//     slot is reused only after its operations posted their final
//     completions. New probes the kernel (uring.Detect) and fails with
//     ErrUnsupported and the reason where io_uring cannot serve.
//
// auto takes epoll where it runs and std elsewhere; io_uring is probed and
// reported but chosen only by name, because it measured no faster here
// (docs/NETWORK.md has the numbers behind the rule).
//
// Reactors never sleep inside a system call: a goroutine blocked in
// epoll_wait or io_uring_enter keeps its P until sysmon takes it back,
// which on two cores starved everything else (64-connection echo ran 7 to
// 14 times slower). They poll without blocking and, with nothing ready,
// park in the Go netpoller on a descriptor that turns readable when there
// is work (the epoll fd; the ring's registered completion eventfd).
// Other goroutines wake a reactor through one eventfd per reactor with at
// most one wake pending (a compare-and-swap flag the loop clears before
// it takes the posted tasks). Posts made while a reactor dispatches its
// events, such as the replies sessions queue from inside Data, write no
// eventfd at all: the reactor holds the flag for the dispatch and takes
// them in the same pass. Reactors keep a busy gauge (Busy): the share of
// wall time spent handling events.
//
// TLS connections are served by the std backend (Config.TLS; New hands a
// TLS listener to std whatever backend was asked and says why in
// Choice.Reason; docs/NETWORK.md has the reasoning); the reactors carry
// plaintext only. The TLS handshake of every accepted connection is
// bounded by Config.HandshakeTimeout and cut short by Close, on the reader
// and on a Write that needs it alike.
//
// Accepting never waits on a peer: std opens each accepted connection on
// that connection's goroutine, and the reactors queue a refusal as output,
// so a handler's refusal or a peer that sends nothing holds up no other
// connection.
//
// Contract with the session:
//   - Data is called from one goroutine per connection, never
//     concurrently for the same connection, with every unconsumed byte
//     followed by the new ones; the session consumes whole frames and
//     returns how many bytes it used. Data must not block: a session that
//     cannot take more calls PauseReading, and ResumeReading later.
//   - ReadStopped is called once when no more Data will come (peer closed,
//     read error or timeout, server draining). The session then finishes
//     its in-flight work and calls Conn.Close; the server waits for that
//     when it drains.
//   - Conn.Write is safe for concurrent use; each call is one write.
//   - The one exception to "Data must not block": every Conn implements
//     InlineConn, which may let Data block for a short while (MayBlock:
//     always on std; on epoll while dispatching the last event of a pass,
//     on io_uring while only send completions follow in the pass, with
//     no task waiting and, on io_uring, every prepared SQE submitted
//     first) and takes an answer from inside Data (TryWrite). The wire
//     session commits a lone awaited record that way: one write and one
//     fdatasync on the reading goroutine instead of four hand-offs. On a
//     reactor that delays events arriving meanwhile by that long.
//
// Invariant: the loop never parses protocol bodies and never knows about
// streams.
package loop
