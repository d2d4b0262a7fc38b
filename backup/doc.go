// Package backup copies, checks and restores IronBus data directories
// without the directory lock, so it works beside a running broker.
//
// It owns three operations and the manifest format they share:
//
//   - Create copies a data directory (and the data directories nested in
//     it, like deadletters/) into a backup: checkpoints first, then each
//     log's sealed segments (hard linked when the backup is on the same
//     file system, else copied), then the active segment cut at its last
//     intact commit frame, exactly where recovery would cut it. A manifest
//     naming every file with its size and CRC32C is written last, synced
//     and renamed into place: a backup without one is incomplete.
//   - Restore checks every file of a backup against its manifest before it
//     writes anything, builds the directory beside the target, syncs it and
//     renames it into place.
//   - Scrub checks every file of a data directory read-only: every record
//     and batch checksum of every segment, the offset chain, checkpoints.
//
// Invariants:
//
//   - Nothing here takes or needs the broker's lock, and nothing here
//     writes into the source directory. Sealed segments never change;
//     checkpoints are replaced by rename, so an open file is one whole
//     version; the active segment only grows, so its bytes before the
//     last intact commit frame are stable.
//   - A backup's records of a log are a prefix of the log: each log's
//     backup point is the moment its active segment was copied. Checkpoints
//     are copied before segments, so no cursor is ahead of the records.
//   - Restore writes nothing unless every file matches the manifest, and it
//     never deletes an existing directory: it renames it aside.
//   - Symbolic links below a root (the data directory, the backup, the
//     restore target's staging directory) are never followed: Create and
//     Restore refuse a file reached through one (ErrUnsafePath), Validate
//     and Scrub report it as damage, and a removal deletes the link itself,
//     so nothing outside the roots is read, written or deleted.
//
// All file I/O goes through segment/vfs.
package backup
