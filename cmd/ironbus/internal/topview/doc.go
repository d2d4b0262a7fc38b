// Package topview is the model and the screen of `ironbus top`: it turns
// successive /admin snapshots (package health) into rates and a short
// history of them for sparklines (package monitor), sorts and filters the
// group and stream tables, and renders the whole screen as text, for the
// live screen and for `top --once` alike.
//
// It owns no I/O: snapshots come from a Fetcher the command injects (an
// HTTP client for a live broker, a read-only data-directory reader for the
// offline mode), and the clock is injected too.
//
// Invariants:
//   - A failed fetch never loses the screen: the last good snapshot stays
//     on it, marked stale, while the model keeps retrying.
package topview
