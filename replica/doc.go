// Package replica replicates one partition log: one etcd-raft RawNode per
// (stream, partition), whose Raft log is the partition's own segment log.
// It is the only package that imports go.etcd.io/raft/v3. Around the
// library it owns the glue where replicated logs have lost data elsewhere:
// the order in which a Ready is persisted, sent and applied; the
// assignment of data offsets; the fsync latch; and the refusal of a damaged
// replica to vote.
//
// A Raft entry is one commit batch exactly as stored. A data entry carries
// record frames whose offsets the leader assigned when it proposed them;
// no-op, configuration and control entries own no offsets. The journal
// (Journal) stores entries and the replica's durable state; the segment log
// implements it for a running broker and MemoryJournal, with a disk model
// that loses unsynced writes, for tests and the simulator.
//
// Invariants (each has a test that tries to break it):
//
//  1. Persist before answer: no message that reports on this replica's log
//     or vote (append, vote and pre-vote responses) leaves before the
//     entries and hard state of its Ready are synced. Only a leader whose
//     term and vote are already durable sends its appends before its own
//     sync (the leader-parallel write); it counts itself towards the
//     quorum only after that sync.
//  2. Ack = majority durable in the leader's term: a proposal completes
//     only when an entry at its index and with its term is committed.
//     Losing leadership fails every pending proposal as indeterminate
//     (ErrIndeterminate); it may or may not be committed.
//  3. Offsets come from frames, never from Raft indexes: the leader assigns
//     a data entry's base offset from the end of the last data entry in its
//     log, so the committed log's data offsets are dense and increasing
//     across terms. A refused proposal gives its offsets back.
//  4. A new leader takes proposals only once it has applied its own
//     term's first entry (ErrLeaderNotReady before): everything committed
//     by earlier leaders is applied by then, so the state its checks use
//     (producer sequences) misses nothing that was acknowledged.
//  5. A failed journal write or sync latches the replica (ErrLatched): it
//     stops stepping, ticking and sending, and is never retried.
//  6. A replica that reads a damaged committed entry marks itself damaged:
//     it no longer campaigns, votes or grants pre-votes, and it reports the
//     damage; it is rebuilt as a learner from the leader.
//  7. Configuration changes are applied in log order and persisted with the
//     index they were applied at, so a restart neither repeats nor skips
//     one.
package replica
