// Package floor measures what the disk under a benchmark allows with no
// broker in the way, so a broker's figure can be read as a ratio of it.
//
// The raw loop writes a message and fdatasyncs it, one after the other, on
// a preallocated zero-filled file: the ceiling of one message per sync.
// The TCP floor is the lowest an awaited durable produce can cost over
// loopback: a server goroutine reads each fixed-size message, writes it
// through the raw loop's file and fdatasyncs it, then answers 16 bytes;
// the client sends a message and blocks reading the answer. No protocol,
// no goroutine hand-off but the two loopback forces, and the same
// durability as a broker with durability sync (the answer follows the
// fdatasync), so a ratio against it is fair.
//
// A disk's sync rate drifts by 10-20 % within a minute on small machines,
// so a floor measured apart from the run it is compared with says as much
// about the drift as about the broker: Around measures both floors just
// before and just after the run and pools the two.
//
// Invariant: a loop's file is written only inside its blocks (it wraps
// around), so every sync is an overwrite in place with no size or extent
// change; the loop and the TCP floor never run at once.
package floor
