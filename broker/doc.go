// Package broker is the engine: it owns a data directory and serves its
// streams, their partitions' logs, consumer groups, dead-letter queues and
// retention through a Go API that takes Go values and returns Go errors.
// It knows no protocol: adapters (package session for the wire protocol;
// an MQTT door and a replication layer are further adapters) attach
// clients, turn their requests into engine calls and the engine's errors
// into their own codes.
//
// What it owns:
//
//   - Streams (streams.go, streamadmin.go): named, with a fixed number of
//     partitions, kept in the crash-safe catalog of package broker/catalog
//     (<data-dir>/streams.json). A publish to an unknown name creates the
//     stream with one partition unless Config.DisableAutoCreateStreams is
//     set (ProduceStream); every other lookup (Stream, OpenGroups,
//     LoadedGroup, the admin calls) never creates one and answers
//     ErrNoSuchStream. Subject bindings route records to streams
//     (route.go: a subject.Router per routing domain, looked up through a
//     subject.Cache per connection); bindings of different domains
//     (Config.RoutingDomain) never conflict and a subject routes only
//     within its own.
//   - Appends (partition.go): a Partition takes a batch of record bodies
//     with their CRC32C, copies it into the log's staging buffer and
//     returns a Ticket that completes when the batch is durable. TryAppend
//     never blocks: ErrFull means the staging buffer is full and RoomFor
//     says when to retry, which is how an adapter applies backpressure to
//     its connection. The disk budget is checked first (ErrNoSpace).
//     TryAppendAtomic (atomic.go) appends a batch that readers and
//     recovery see whole or not at all, within Config.MaxBatchRecords
//     and MaxBatchBytes (ErrBatchTooLarge).
//   - Consumer groups (groups.go, assign.go, admin.go): one
//     consumer.Group per stream partition and group name, opened with its
//     type and start position, with the wakeup long polls wait on and, on
//     partition 0, what a group name shares across partitions (rotation,
//     streaming assignment).
//   - Dead-letter queues (deadletters.go): one log per stream in
//     <data-dir>/deadletters, read as the stream ".dlq.<stream>", which
//     exists while its stream does and is written by the engine only.
//   - Retention and the disk budget (retention*.go, wallclock.go;
//     docs/RETENTION.md): a pass deletes whole sealed segments by bytes,
//     age and records, never below the slowest group's checkpointed
//     position unless the policy is drop-oldest; ages use the
//     monotonic-safe record timestamps rule against a persisted wall-clock
//     high-water (I6).
//   - Transactions (txn.go; package txn): BeginTxn, AppendToTxn and
//     EndTxn over the coordinator log <data-dir>/txn, opened by the first
//     transaction (and at boot when it exists, recovering before anyone
//     is served). The engine is the coordinator's sink: a commit's copies
//     go through the checked append path, its group commits move
//     streaming groups and are checkpointed before COMMITTED.
//   - Connections (connections.go): the clients attached through every
//     adapter, counted against MaxConnections; a Connection's ID names it
//     as a group member.
//   - Observation (observe.go, metrics.go): readiness, liveness, the
//     /admin document and the Prometheus registry, built when asked from
//     counters the engine keeps anyway; package broker/health serves them.
//
// Errors: every error of the API wraps one kind (ErrNoSuchStream,
// ErrConflict, ErrFrozen, ErrNoSpace, …; errors.go) and reads as a
// sentence that names what failed; a retryable one is a RetryableError
// with its hint. Errors of the consumer.Group and segment.Log an adapter
// reaches through Group.Consumer and Partition.Log get their kind from
// Classify.
//
// Locks are taken in one order (docs/ARCHITECTURE.md):
// bindMu, logsMu, groupsMu, a group's own locks, then the dead-letter
// locks; redriveMu and the retention pass's passMu come before logsMu.
// A function that expects a lock held says so in a REQUIRES comment.
//
// Invariants: a Ticket completes without error only once its batch is
// durable (its covering fdatasync returned); the append path (Partition,
// Ticket, Stream.Partition on an existing stream) allocates nothing and
// goes through no interface; a group delivers nothing before its creation
// is on disk (Group.Created); a lookup never creates a stream.
package broker
