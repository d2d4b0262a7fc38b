// Package session serves the IronBus wire protocol (package wire) over the
// engine of package broker. Handler implements loop.Handler, so it sees
// frames, never sockets: a loop backend hands each connection's bytes to
// its session, and the session turns frames into engine calls and engine
// results and errors into frames.
//
// What it owns, per connection:
//
//   - The handshake (Hello, Welcome) within HandshakeTimeout for the whole
//     of it, settled once by Hello, the deadline or an eviction by the
//     pre-authentication gate (handshake.go); no frame above 8 KiB before
//     Hello is answered, so an unauthenticated peer takes no large-frame
//     memory; authentication of Hello off the reader and authorization of
//     every request against the identity in force (auth.go): the scope on
//     every stream a request touches (an admin verb's bindings and lists
//     included), deny patterns winning over grants, the consumer group
//     rules, the publish subjects and a consumer's subject filter; the
//     identity's and its account's quotas (quota.go: connections, streams,
//     partitions, stored bytes, publish rate); with the
//     pre-authentication gate and the audit log.
//   - The produce path (session.go, place.go, writer.go): each Produce is
//     placed (authorized, checked by the engine, routed, given a
//     partition) and joins the current run of records for one partition;
//     a run is appended with one Partition.TryAppend, and its ack group
//     {ticket, request ids} goes to the connection's writer, which waits
//     for the ticket and writes every ProduceAck that is ready in one
//     write. A lone small run at the end of the input is committed inline
//     where the backend allows it (Partition.TryCommit) and answered from
//     the reader.
//   - Backpressure, never a drop: a connection has at most Window produce
//     requests read and not yet acknowledged (credits); a full window, a
//     full staging buffer (broker.ErrFull), a large record waiting for the
//     large-record pool, a reply queue over ConnectionOutput, or an
//     essential audit event the full audit queue could not take
//     (holdForAudit) pauses reading. A run that could not be appended is handed back unconsumed
//     and read again after the resume, so nothing is done twice.
//   - Consume long polls (consume.go, stream.go) on goroutines of their
//     own, woken by durable records, by acks that free a credit or a key,
//     and by membership changes; the ack ops (ack.go); group, dead-letter
//     and stream administration off the reader (admin.go).
//   - Accounts at the door (accounts.go): every name a request carries is
//     mapped from the identity's account to the engine's after the
//     permission checks, and every answer back; listings drop other
//     accounts' names and error messages are rewritten, so no answer names
//     another account's stream.
//   - The mapping of engine error kinds to wire codes (handler.go,
//     wireError): the message is the engine error's text.
//
// The produce-run state machine and the lock order are drawn in
// docs/ARCHITECTURE.md.
//
// Invariants: an acknowledgement means the record is durable (its ticket
// completed after its fdatasync); acks of one connection are written in
// request order; the produce path does not allocate per message in steady
// state; a bad frame gets a structured error and, when the byte stream can
// no longer be trusted, the connection is closed: never a panic, and other
// connections are unaffected.
package session
