// Package broker will own streams, partitions and the subject routing trie,
// the engine tying logs and consumer groups together, configuration and
// profiles, metrics, the health and admin HTTP endpoints, and auth.
//
// Invariant: no allocation on the produce and consume hot paths.
//
// Not built yet: see the serve issue.
package broker
