// Package load is the load generator of `ironbus bench`: producers and
// consumers over the Go SDK against one broker address, and the figures
// of the run (Result, the JSON object of `ironbus bench --json`).
//
// A run is one Mode: publish (pipelined producers, Config.Window records
// in flight each, timed ack latency), subscribe (the records stored
// first, then read by consumers of the work or streaming tier, optionally
// through a subject filter) or round-trip (both at once, with the
// end-to-end latency from the send time every payload carries in its
// first StampBytes). With Config.Rate the producers are open-loop
// (benchrig.Pace): a record's latency counts from when it was due, so a
// stall is not hidden behind the window.
//
// The broker is the caller's: the address of one benchrig/brokerproc
// started (whose Usage Result.AddBrokerUsage folds in) or of a live one.
// The load speaks the IronBus protocol only; the floors a run is read
// against (package benchrig/floor, measured around it) are folded in with
// Result.AddFloor.
//
// Invariants: latencies are recorded in histograms of 1 µs to 60 s at 3
// significant digits; Result's JSON fields are never renamed or
// repurposed (Schema), new ones are added; a run's RAM is a function of
// its Config (payload files are read up to MaxPayloadFile).
package load
