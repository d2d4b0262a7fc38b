// Package faultproxy is a TCP proxy for one directed link (a listen
// address in front of a target address) whose faults a test switches while
// traffic flows: the real-process nemesis tests put one between each pair
// of nodes, since this kernel has no netem.
//
// Faults (Faults; every control is safe to call concurrently, and takes
// effect on connections already open as well as on new ones):
//
//   - Blackhole(direction): accept connections but forward nothing in that
//     direction (Forward: client to target; Backward: target to client;
//     Both). Bytes already read are held, not discarded, and flow again on
//     Pass, as TCP would retransmit them after a partition heals; what
//     cannot be held (beyond a bounded buffer per direction) stays in the
//     sender's socket, whose writes then block, as they would.
//   - Reset: close every connection with a TCP RST on both sides and answer
//     every new one with an RST, until Pass.
//   - Delay(d): every chunk leaves d after it arrived; order is kept and
//     throughput is not (delay is added per chunk, not per round trip).
//   - Throttle(bytes per second): each direction of each connection is
//     paced to that rate.
//   - Pass: clear every fault.
//
// Delay and Throttle combine with each other and with Blackhole; Reset
// wins over everything until Pass.
//
// Invariants: bytes are forwarded in order and never altered or
// duplicated; a connection ends with an RST only under Reset or when its
// other side was reset; Close stops every goroutine and socket of the
// proxy before it returns.
package faultproxy
