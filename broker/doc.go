// Package broker ties logs, consumer groups and connections together: it
// implements loop.Handler, so it sees frames, never sockets.
//
// Built so far: named streams with partitions (streams.go), kept in the
// crash-safe catalog of package broker/catalog (<data-dir>/streams.json)
// and changed by StreamAdmin (streamadmin.go); a name first used by a
// publish or consume is created with one partition. Produce may name the
// partition or leave it to the broker (the key's wire.PartitionForKey, or
// the connection's own partition for a keyless record), and may route by
// the record's subject through the bindings (route.go: a subject.Router,
// a subject.Cache per connection, no_route when nothing matches). The
// produce path, connection limits and timeouts, and the consumer model of
// package consumer served whole: groups of every type opened with their
// start position (groups.go), consume with long polls woken by durable
// records and by acks that free a credit or a key (consume.go), every ack
// op (ack.go), connections as group members released when they close,
// and a dead-letter queue per stream in <data-dir>/deadletters, read on
// the wire as ".dlq.<stream>" (deadletters.go), and retention with the disk
// budget (retention*.go, wallclock.go; docs/RETENTION.md): a pass deletes
// whole sealed segments by bytes, age and records, never below the slowest
// group's checkpointed position unless the policy is drop-oldest; ages use
// the monotonic-safe record timestamps rule against a persisted wall-clock
// high-water (I6); the budget refuses records with a retryable no-space
// error before budget minus headroom. It also keeps what operators watch:
// readiness, liveness and the /admin snapshot (observe.go), and the
// Prometheus registry the broker owns (metrics.go), served over HTTP by
// the subpackage health. Issue by issue it grows the rest of DESIGN.md's
// broker.
//
// The produce path, per connection:
//
//	read ──▶ parse frames ──▶ verify body CRC, validate ──▶ run of records
//	for one log ──▶ one AppendBatch (copies into the log's staging batch;
//	blocks, and so stops reading this connection, while the log's staging
//	buffer is full) ──▶ ack group {ticket, request ids} queued to the
//	connection's writer ──▶ the writer waits for the ticket (the covering
//	fdatasync) and writes every ProduceAck that is ready in one write.
//
// Credit: a connection has at most Window produce requests read and not yet
// acknowledged; beyond that it is not read (backpressure, never a drop).
//
// Observation adds no work to the hot paths: metrics and /admin are built
// when scraped, from atomic counters the engine and groups keep anyway;
// only the fsync and append histograms are fed as events happen, through
// segment.Observer, whose calls are lock-free and allocate nothing.
//
// Invariants: an acknowledgement means the record is durable (the ticket
// completed after its fdatasync); the produce path does not allocate per
// message in steady state; a bad frame gets a structured error and, when
// the byte stream can no longer be trusted, the connection is closed —
// never a panic, and other connections are unaffected.
package broker
