// Package monitor is the client side of a broker's health endpoints
// (package broker/health): it asks them over HTTP/1.1 (Get, Fetch), turns
// two /admin snapshots into per-second rates and keeps a bounded history
// of them (ComputeRates, History), and judges a snapshot against
// thresholds the way a monitoring plugin does (Check: OK, warning,
// critical, unknown). `ironbus top`, `report` and `server` are built on it;
// so can any other watcher.
//
// Invariants:
//   - Every request is bounded: by the caller's context, by Timeout, and
//     by the bytes it reads; a broker that accepts and never answers
//     cannot hang a caller.
//   - Rates never go negative: a counter that went down means the broker
//     restarted between two snapshots, and that interval yields no rate.
//   - Memory is bounded: a History keeps at most HistoryLength rates,
//     whatever the uptime or the refresh interval.
//   - Check's level only rises: the worst finding decides it.
package monitor
