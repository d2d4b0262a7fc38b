// Package topview is the model and the screen of `ironbus top`: it turns
// successive /admin snapshots (package health) into rates, keeps a short
// history of them for sparklines, sorts and filters the group and stream
// tables, and renders the whole screen as text, for the bubbletea program
// and for `top --once` alike.
//
// It owns no I/O: snapshots come from a Fetcher the command injects (an
// HTTP client for a live broker, a read-only data-directory reader for the
// offline mode), and the clock is injected too.
//
// Invariants:
//   - Memory is bounded: the history keeps at most HistoryLength rates,
//     whatever the uptime or the refresh interval.
//   - Rates never go negative: a counter that went down means the broker
//     restarted between two snapshots, and that interval yields no rate.
//   - A failed fetch never loses the screen: the last good snapshot stays
//     on it, marked stale, while the model keeps retrying.
package topview
