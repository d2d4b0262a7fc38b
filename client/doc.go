// Package client will be the Go SDK: a pipelined, full-duplex producer,
// work and streaming consumers, and admin calls.
//
// Invariant: the client never hides an error from its caller.
//
// Not built yet: see the serve issue.
package client
