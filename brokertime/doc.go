// Package brokertime owns broker time: the clock that orders and expires
// what the broker keeps for a while (message-id windows; delays and
// timeouts use it too). Broker time is a duration that only moves
// forward, within a run and across restarts, and never reads the wall
// clock (invariant I6): a device that boots in 1970, or whose clock NTP
// steps by years, expires nothing early and holds nothing for years.
//
// While the broker runs, broker time advances with a monotonic source
// that counts suspend where the platform can (CLOCK_BOOTTIME on Linux,
// caught up within a persist interval of a resume; Go's monotonic clock
// elsewhere). The time it was down does not count:
// durations are broker running time.
//
// Across restarts it continues from a floor persisted in the data
// directory, <data-dir>/clock, rewritten crash-safely about once a second
// while the broker runs and once more at Close, marked clean. After a
// clean stop the next run continues from that floor exactly; after a
// crash, from the floor plus one persist interval (the most the previous
// run can have run past its last floor), so a time handed out before a
// crash is never handed out again, at the cost of up to a second that
// never ran.
//
// File <data-dir>/clock, 28 bytes, little-endian:
//
//	magic "IRONTIME" @0 · version u32 (1) @8 · flags u32 @12 (bit 0:
//	written by Close) · floor ns u64 @16 · CRC32C of [0,24) u32 @24
//
// A missing file is a fresh directory (broker time starts at zero); a
// damaged or torn one is reported and broker time starts at zero too,
// which owners of timed state tolerate by clamping times they read back
// to the present (package dedup does).
package brokertime
