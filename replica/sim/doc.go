// Package sim is a deterministic simulator of a replicated partition: N
// nodes running package replica on one goroutine, in virtual time, with
// one random source drawn from a seed for everything (the network, the
// nemeses, the clients, the disks' crash images). A seed replays exactly,
// provided crypto/rand is seeded too (etcd-raft draws its election jitter
// from it; tests call testing/cryptotest.SetGlobalRandom).
//
// A run: the founding members bootstrap; producers send records to the
// node they believe leads (following NotLeader), readers read committed
// records from any replica below its watermark, and every operation goes
// into a histcheck history. Nemeses drop, duplicate, delay and reorder
// messages, cut links (splits, one-way cuts, the leader isolated), cut one
// node's or every node's power (MemoryJournal.Crash: unsynced writes
// lost, a torn tail may survive), fail one node's fsync, flip a bit in a
// committed entry on a minority node, bring a node back with an empty
// disk, compact journals (retention), and transfer leadership. An operator restarts latched nodes and rebuilds damaged or wiped
// ones as new incarnations (a learner, then a voter in place of the old
// identity). Then everything heals, and the group must acknowledge again
// and converge within bounded steps.
//
// Power cuts fall between steps, in the middle of a journal write (the
// disk panics at its k-th write and the node crashes inside Process, after
// a leader's early appends left and before its own sync), or right after a
// node voted, with a quick restart while the election is still on.
//
// Invariants checked while it runs and at the end (Run fails with
// ErrViolation naming the seed):
//   - persist before answer, on every message as it leaves: a granted vote
//     is synced, an accepted append is synced to the index it reports, a
//     leader's appends and heartbeats follow a synced term, and a stopped
//     replica sends nothing;
//   - every entry any replica applies, and every journal entry at or below
//     its replica's commit index, is byte for byte the group's committed
//     entry at that index;
//   - the committed log's data offsets are dense and increasing, each frame
//     where its entry's header says;
//   - an acknowledgement is made only when the committed entry at its index
//     holds the client's records at the offsets it reports, and that entry
//     (index and term) is synced on a majority of the voters at that moment;
//   - a replica's term never goes back within a process lifetime, nor below
//     its durable term across a restart; one leader per term;
//   - a latch happens only after a failed fsync and damage only where one
//     was planted, and a stopped replica never writes its journal again;
//   - the history passes histcheck.CheckLog and CheckLinearizable against
//     the committed log's records (no acked record lost, moved or
//     duplicated, no failed produce visible, reads agree with real time).
package sim
