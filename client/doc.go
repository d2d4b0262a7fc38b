// Package client is the Go SDK of IronBus: a connection speaking the
// client protocol (docs/WIRE.md), an awaited and a pipelined producer,
// consumers of every group type (Fetch and its settlements, and Consume,
// a handler loop for work and key-shared groups) and Ping.
//
// Invariant: the client never hides an error from its caller. Every
// record sent gets an answer: an Ack, the server's error, or the reason
// the connection failed.
//
// # Connecting
//
// Dial opens one TCP connection and completes the handshake (Hello,
// then Welcome or a refusal returned as a *wire.Error); given a seed
// list ("a:7001,b:7002"), it tries the addresses in order until one
// answers. A Client is safe
// for concurrent use: every call is a request with its own request id,
// replies are matched by id in whatever order they arrive, and one
// reader at a time reads the socket for all callers. An awaited call
// (Produce, Ping, Fetch…) on a connection that nobody is reading reads
// its own answer, which saves a goroutine hand-off per round trip;
// otherwise the connection's read loop reads, as it does for pipelined
// producers and a Stream's read-ahead. A connection with nothing pending
// is still read within about 100 ms, so Err reports a server that went
// away. A writer goroutine batches frames from concurrent callers into
// few writes. Every call takes a context; ServerInfo reports the server's
// limits.
//
// # Delivery guarantees
//
// An Ack (from Produce, or in a producer's Result) means the record is
// durable: with the broker's default durability the broker acknowledges
// only after the fdatasync that covers the record. Each record body is
// framed here and carries a CRC32C computed here; the broker verifies
// and stores it as sent, and Fetch verifies it again on the way out, so
// corruption anywhere in between is detected (ErrCorruptDelivery) and a
// corrupt record is never handed to the caller.
//
// # Compression
//
// Producers compress payloads with lz4 by default (ProducerOptions and
// Options.Compression: CompressZstd, CompressNone), keeping the compressed
// form only for payloads of at least 128 bytes that shrink by an eighth or
// more. The CRC32C covers the bytes as stored. Consumers verify it first,
// then decompress: Message.Payload is always the payload as sent and
// Message.Codec says how it was stored. A record declaring more than
// Options.MaxDecompressedBytes, or garbage behind a valid CRC, is refused
// with a *DecompressError and stays leased, so it can be nacked.
// docs/COMPRESSION.md has the details.
//
// Producing is exactly-once where the client can know a record's
// partition, and at-least-once elsewhere. With a broker that has the
// producers capability, Producers and Produce are idempotent by default
// (IdempotenceOn): the client announces a producer name (ProducerInit)
// and stamps each record whose partition it knows (a pinned partition,
// or a keyed record to a stream whose partition count it could read)
// with the producer id and a dense per-partition sequence. The broker
// stores each stamped record once and answers a resend of a stored one
// with the first copy's offset and Ack.Duplicate. An idempotent Producer
// keeps its unacknowledged records, and after a connection failure
// redials, announces itself again (a new epoch, fencing older
// incarnations of its name) and resends them in order: no duplicates, no
// reordering. Records it cannot stamp (routed by subject, keyless to a
// stream of several partitions) are at-least-once: when a produce fails
// without an answer (its context ended, the connection broke), the
// record may or may not have been stored, and retrying it can store it
// twice. Record.MessageID deduplicates those across retries, processes
// and connections, within the stream's dedup window. A produce answered
// by an error that is not about the connection (a *wire.Error such as
// no_space or busy, an *ExpectationError) was not stored.
//
// Conditional appends (Record.ExpectLastOffset,
// ExpectLastSubjectOffset) store a record only if the partition's, or
// the subject's, last offset is the one expected. PublishBatch stores a
// batch atomically. PublishAsync sends without any answer, for telemetry
// that may be lost. docs/PRODUCERS.md has the guarantees and their cost.
//
// Consuming is at-least-once too: Fetch leases records to the group; a
// record not acknowledged before its lease expires, or whose connection
// closed, is delivered again (Attempt counts the deliveries, across
// broker restarts; Redelivered flags them). A record delivered the
// group's max-deliver times (5) moves to the stream's dead-letter queue,
// readable as the stream ".dlq.<stream>". A lease that is no longer
// current is fenced: AckStale (another grant is current) or AckExpired
// (it lapsed); nothing changed and the record is, or will be, delivered
// again.
//
// # Consumer groups
//
// A group's type is fixed when it is created: GroupWork (competing
// consumers), GroupKeyShared (each key owned by one connection, its
// records in offset order), GroupBroadcast (one reader, settled with
// CumulativeAck) or GroupStreaming (no leases; Commit stores the
// position). Fetch creates a missing group with FetchOptions.Type,
// starting at the earliest record; OpenGroup creates it with a start
// position (earliest, latest, an offset or a time). Another type for an
// existing group is refused with a *wire.Error of code
// group_mode_mismatch naming both.
//
// Settling leased records: Ack (processed), Nack (redeliver after a
// delay, or the group's backoff), Extend (still in progress; renews the
// lease up to a hard cap of 5 minutes per attempt, AckCapped when cut),
// Term (settle without processing), Reject (to the dead-letter queue
// now) and AckRange (everything in a range this connection holds).
//
// Consume runs a Handler on every record of a work or key-shared group
// until its context ends: it acks when the handler returns nil, nacks on
// an error (after ConsumeOptions.NackDelay, the group's backoff by
// default, or the delay of RetryAfter), extends the leases of the batch
// while the handler runs, returns unhandled records at once when it
// stops, and hands gap advisories to ConsumeOptions.OnGap. It processes
// one record at a time; run several Consume calls (on one or several
// connections) for parallelism.
//
// # Streams, partitions and subjects
//
// With a broker that has the streams capability, a stream may have
// several partitions and records may be routed by subject. A Destination
// says where a producer's records go (NewProducerTo, ProduceTo):
// ToStream(name) lets the broker pick each record's partition by the
// stable hash of its key (wire.PartitionForKey; a record without a key
// goes to the connection's own partition), ToPartition(name, p) pins one,
// and BySubject() stores each record in the stream whose binding
// (Client.Bind) matches its Subject, refused with no_route when none
// does. NewProducer(name) and Produce(name) are ToStream. Subjects are
// dot-separated tokens (package subject); a record's subject is validated
// before anything is sent, and an invalid one fails with ErrInvalidSubject
// (wrapping subject.ErrInvalidSubject). Ack.Partition names where a
// record was stored. Order is total per partition.
//
// Consumers read one partition, or AllPartitions (FetchOptions,
// ConsumeOptions, StreamOptions, GroupOptions): every Message then names
// its Partition, and Ack, Nack and the rest group messages into one
// request per partition. A Filter (a subject pattern: `*` one token, `>`
// the rest) delivers only matching records; the skipped offsets come as
// Gaps with Reason GapFiltered, coalesced, so positions always advance. A
// Stream of AllPartitions keeps a position per partition: batches carry
// Positions, and CommitPositions commits them all (Commit and
// Position stay the simple calls for one partition).
//
// ConsumeSubject subscribes to a pattern across streams: it reads the
// bindings, consumes every stream bound to an overlapping pattern with
// the pattern as filter, and runs one serialized handler on every
// message, each naming its Stream, Partition and Offset. Order holds per
// stream partition, never across streams. ConsumeStreams does the same
// for a list of streams.
//
// # Reconnecting
//
// A Client never reconnects on its own. When the connection breaks,
// every pending call fails with an error wrapping ErrConnectionLost (and
// the cause: an I/O error, or the server's closing *wire.Error), and so
// does every later call on that Client. To carry on, Dial again and
// decide what to resend, knowing that unacknowledged records may already
// be stored. Close fails pending calls with ErrClosed. (In a cluster, a
// connection of the Client's leader pool that breaks fails the calls
// pending on it the same way, and is dialled again when a partition it
// led is next asked for; the connection dialled decides Err.)
//
// An idempotent Producer is the exception: it redials the Client's
// seeds in turn with the Client's Options, with backoff, for up to
// ProducerOptions.ReconnectTimeout, and carries on on a connection of its
// own (closed by Producer.Close), resending what it kept. Its stamped
// records come through exactly once; its unstamped ones fail with the
// connection, as on a Client.
//
// # Clusters
//
// A broker that is a member of a replicated cluster has the cluster
// capability (the client announces it in Hello; Welcome's intersection
// says whether it is in effect). Only a partition's leader takes its
// produces, leases and settlements: another member answers not_leader,
// naming the leader's client address when it knows it, and a partition
// in an election answers no_leader; neither did anything. The Client
// sends such a request again where it belongs: to the address named,
// over a connection of its own pool (one per address, opened on first
// need with the Client's Options, reused, closed by Close), so
// partitions led by different nodes each go to their leader; without an
// address, to the leader ClusterInfo names, else the next seed; after
// no_leader, to the same member once its retry_after hint (or a growing
// backoff) has passed. The leader of each partition is remembered until
// a member answers not_leader again. A request is sent at most 6 times,
// then fails with ErrNoLeader wrapping the last *wire.Error. Produce,
// ProduceTo, PublishBatch, Fetch (and Consume), OpenGroup, Ack and the
// other settlements and the admin calls follow leaders; Ping, BeginTx
// and PublishAsync stay on the connection dialled, and a Stream reads
// from it (a follower serves reads up to its commit index).
//
// An idempotent Producer follows leaders per partition on connections of
// its own. A record refused not_leader or no_leader keeps its sequence;
// the producer pauses Send, waits until every record in flight on every
// connection has its answer (so no record reaches a partition's new
// leader ahead of an earlier one of the same partition), moves the
// partition, announces itself again on each connection it uses (its
// epochs only ever rise, on every partition) and resends the waiting
// records in send order: what the old leader had stored comes back as a
// duplicate, the rest is stored once. ClusterInfo reports the nodes,
// each partition's leader and replicas, and the replication watermark;
// TransferLeadership moves one partition's leadership to another of its
// voters (it follows leaders too).
//
// # The window and ordering
//
// The server announces a produce window in Welcome: how many Produce
// requests it reads ahead of their acks. The client never has more than
// min(Options.Window, the server's window) produce requests unanswered
// on a connection (Client.Window), across all producers and awaited
// Produce calls together; a caller beyond it waits (or gets
// ErrWindowFull from TrySend). An abandoned Produce keeps its place until
// the server answers it, so cancellation can never overfill the window.
//
// A Producer pipelines: Send returns as soon as the record is queued,
// and up to the producer's window of records are in flight. Records are
// written in the order of Send, so the broker stores them in that order;
// acks may come back in any order, but Results delivers them in send
// order, numbered by Sequence. Results is buffered to the window; Flush
// waits until every record sent so far has its result, without needing
// anyone to read Results. Send blocks once a window's worth of results
// sits unread on Results on top of a full window of records, so read
// Results (until Close closes it).
//
// # Errors
//
// Errors the server sends are returned as the *wire.Error value itself
// (code, retryable flag, retry-after hint, message): use
// errors.Is(err, &wire.Error{Code: wire.CodeNoSpace}) or errors.As. The
// client's own errors are sentinels wrapped with detail: ErrClosed,
// ErrConnectionLost, ErrWindowFull, ErrRecordTooLarge (checked against the
// server's limits before sending), ErrCorruptDelivery and
// ErrUnsupportedRecord (reported by Fetch as a *DeliveryError alongside
// the records that did verify), ErrProtocol, ErrInvalidArgument,
// ErrNoLeader, ErrNotClustered and ErrNoSeeds. A
// context that ends returns ctx.Err(); the connection stays usable and a
// late reply is dropped. Refusals of a produce that a program acts on are
// typed, wrapping the *wire.Error: an *ExpectationError (a conditional
// append's actual last offset), ErrProducerFenced, ErrProducerExpired,
// ErrUnknownProducer and ErrSequenceGap.
//
// # Costs
//
// In steady state Producer.Send and Produce allocate nothing (an awaited
// call with a context that can end, reading its own answer, allocates
// the hook that interrupts its read): encode
// buffers are reused, in-flight requests live in a preallocated table
// indexed by request id, and results in a ring. Fetch copies each record
// once, so the returned Messages own their bytes.
package client
