// Package benchrig is the load generation behind IronBus's benchmarks.
//
// benchrig/logbench measures the durable log engine on the real disk:
// durable appends through the committer at several record sizes and
// producer counts, the committer cycle with many active logs, and, in the
// same run, the raw limits of the device (a small write + fdatasync loop on
// a preallocated file, and 1 MiB writes + fdatasync for bandwidth), so each
// number is read against what the disk can do. benchrig/cmd/logbench is its
// command; `make bench` runs it and docs/BENCHMARKS.md records the results.
//
// benchrig/netbench measures the broker over loopback through the Go SDK:
// pipelined produce throughput on one and eight connections, and ack
// latency with one record in flight, beside the raw fdatasync latency
// measured in the same run (benchrig/cmd/netbench).
//
// benchrig/cmd/awaitbench measures the awaited shapes alone (one
// connection with one record in flight, eight such, and one at a fixed
// rate) in interleaved rounds with the raw fdatasync loop back to back and
// at the same rate, and can write an execution trace of them, for reading
// each hand-off of an acknowledgement off its goroutines.
//
// benchrig/load is the load generator of `ironbus bench`: producers and
// consumers against one broker address in publish, subscribe or
// round-trip mode, and the run's figures (the command's JSON object).
// benchrig/brokerproc starts the broker it loads as a child process (the
// binary users run) and reads its RSS, disk writes and fdatasyncs from
// outside. The open-loop schedule every rig shares is Pace.
//
// benchrig/floor measures what the disk allows with no broker in the
// way: the raw write + fdatasync loop and the TCP floor (a minimal
// in-process TCP server that syncs each message before answering), run
// just before and just after a measured run (`ironbus bench --floor`,
// and the peers rig beside its awaited rows).
//
// The head-to-head rig against peer brokers is its own module,
// benchrig/peers, so the broker never depends on a peer.
//
// Invariant: speed claims come from these runs, never from timed unit tests.
package benchrig
