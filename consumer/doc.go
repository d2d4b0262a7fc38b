// Package consumer owns consumer groups: which records of a log each group
// has been given, which are leased to whom, and which are done.
//
// Built so far (the serve issue): work groups, the default tier. Competing
// consumers share a group; each record is leased to one of them for a
// visibility timeout and carries a lease token (a generation, unique per
// grant), so an ack or nack quoting a stale token is fenced. Redeliveries
// go out before new records. A nack returns a record after a delay (the
// group's backoff schedule by default); a lease that expires, or whose
// holder disconnects (Release), is redelivered at once. The group's cursor
// (every offset below it is done) advances over acked records and over
// gaps (offsets removed by retention or lost to damage, which the group
// reports once), and is checkpointed through package segment, so after a
// restart at most the records acked since the last checkpoint are
// delivered again (at-least-once).
//
// Still to come (the consumers issue): key-shared, broadcast and streaming
// groups, lease extension and hard caps, max-deliver and the dead-letter
// queue, persisted delivery counts and acked-ahead ranges, ack ranges.
//
// Invariants: file I/O only through package segment; lease timers use the
// monotonic clock, never wall time (I6); memory per group is bounded by
// MaxInFlight leases and the records acked ahead of the cursor.
package consumer
