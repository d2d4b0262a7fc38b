// Package upgrade owns the replacement of the installed ironbus binary:
// `ironbus upgrade` stages a new binary beside the installed one and swaps
// it in, `ironbus rollback` swaps the kept previous one back.
//
// Invariants:
//
//   - Every state a crash can leave is one of the documented states below,
//     and the installed path always names a complete, fsynced binary: each
//     step that changes what a name points to is one rename(2) in the
//     destination's directory, followed by an fsync of that directory.
//   - Nothing is deleted that a later step needs: the binary being replaced
//     is hard-linked (or copied and fsynced) to <dest>.previous before the
//     new one is renamed over <dest>.
//   - Rerunning the command after a crash converges: upgrade restages over
//     a stale <dest>.new; rollback finishes or restarts an interrupted
//     rollback from the names it finds.
//
// Upgrade, for a destination D:
//
//	stage   copy the new binary to D.new, fsync it          (D untouched)
//	keep    link D to D.previous.tmp, rename to D.previous,
//	        fsync the directory                              (D untouched)
//	swap    rename D.new to D, fsync the directory           (D is new)
//
// Rollback:
//
//	hold     link D to D.rollback, fsync the directory       (D untouched)
//	restore  rename D.previous to D, fsync the directory     (D is old)
//	keep     rename D.rollback to D.previous, fsync the dir  (done)
//
// A crash after hold leaves D.rollback and D.previous: the next rollback
// drops D.rollback and starts again. A crash after restore leaves
// D.rollback without D.previous: the next rollback only renames it to
// D.previous, and upgrade refuses to run until it has.
//
// The package never interprets a data directory: the caller compares the
// formats a binary reports (Probe) with the directory's.
package upgrade
