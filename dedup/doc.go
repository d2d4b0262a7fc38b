// Package dedup owns a stream partition's message-id window: the ids of
// records published with a message id (the ib-msg-id header) within the
// last window of broker time, each with the offset of its first copy, so a
// second publish of the same id returns that offset and stores nothing.
//
// Memory is bounded (I8): recent ids sit in a bounded in-memory
// generation; older generations live on disk with a Bloom filter each in
// memory. The window survives restarts: it is persisted apart from the
// data (a purge does not forget ids), and rebuilt from the log tail it
// does not cover. Time is broker time, which never jumps: a wall-clock
// step expires nothing early.
package dedup
