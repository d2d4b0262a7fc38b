//go:build unix

package main

import "syscall"

// settleWriteback writes back every dirty page of the machine and waits:
// the phases before a read-only measurement leave hundreds of megabytes
// dirty, and writing them back under the measurement would charge it to
// whichever side happens to sync while the kernel flushes.
func settleWriteback() { syscall.Sync() }
