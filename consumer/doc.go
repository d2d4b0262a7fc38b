// Package consumer will own consumer groups: work groups with leases and
// generation fencing, key-shared and broadcast groups, cursors with
// acked-ahead ranges, persisted delivery counts, backoff, the dead-letter
// queue, the streaming tier and checkpoints.
//
// Invariant: consumer does file I/O only through package segment.
//
// Not built yet: see the consumers issue.
package consumer
