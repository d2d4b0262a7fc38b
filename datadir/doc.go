// Package datadir is the one API over a data directory as a whole: its
// lock, its stream catalog (package broker/catalog, <data-dir>/streams.json),
// the log directories of its streams and of their dead-letter queues, and
// the consumer groups checkpointed in those logs. The running broker uses
// Streams for the file and catalog side of its stream admin; the offline
// tools (ironbus stream and group with --data-dir) use Dir, which opens the
// directory shared (read-only, for list and show) or exclusive (for
// changes). The lock is segment.Dir's: shared and exclusive holders exclude
// each other, so neither form runs beside a broker, which holds the lock
// exclusively.
//
// Every change follows one crash protocol, and a crash at any write leaves
// a stream either fully there (catalog entry, bindings, partitions, groups,
// dead-letter queue) or fully gone, never half:
//
//   - Every file is replaced the same way: write a temporary file, sync
//     it, rename it over the old one, sync the directory (the catalog keeps
//     the version it replaces as streams.json.prev; checkpoints likewise).
//   - The catalog decides whether a stream exists. Create writes the
//     catalog entry first and only then creates partition directories; a
//     partition with no directory is empty, so a crash after the catalog
//     write leaves the whole stream, and before it nothing.
//   - Remove first renames <data-dir>/streams/<name> to
//     streams/.removed-<name>-<n> and syncs the directory. That rename is
//     the commit point: the new name is not a stream name, so no scan reads
//     or adopts it. The catalog then forgets the stream and its bindings
//     (durably), then the dead-letter queue and last the renamed directory
//     are deleted. The renamed directory is the marker of an unfinished
//     removal until everything else of the stream is gone.
//   - Bind and unbind change only the catalog.
//   - Opening exclusive finishes what a crash interrupted, before anything
//     else: for each streams/.removed-<name>-<n> it forgets <name> in the
//     catalog when the catalog still names it and streams/<name> does not
//     exist (the crash fell between the rename and the catalog write),
//     deletes the dead-letter queue of a stream the catalog no longer
//     names, then the renamed directory; it deletes a stale
//     streams.json.tmp; it adopts log directories the catalog lacks (a
//     data directory from before the catalog, or a catalog lost to damage).
//     A shared open makes the same decisions in memory and writes nothing.
//
// Group reset, remove and settle change one checkpoint file of one log
// through package segment, which follows the same
// write-temp-sync-rename-sync rule; Redrive republishes a dead-letter
// queue through the crash-safe rounds of consumer.Redrive.
//
// Beside changes, the offline tools read and judge a directory, its
// dead-letter queues included: Read hands over one log's entries,
// DeadLetterQueues lists the queues, Verify checks every log read-only under
// the shared lock and gives each a Verdict; Repair takes the exclusive
// lock, lets recovery quarantine what it found (the caps lifted) and
// judges whether each log is writable again; Snapshot describes the
// directory as the /admin document of package broker/health, read under
// the shared lock or, beside a running broker, without it as backup.Scrub
// reads. None of them creates a directory.
//
// The directory's identity is its incarnation (incarnation.go): a random
// nonzero uint32 in <data-dir>/INCARNATION, made at the first writable
// OpenIncarnation with the same crash-safe replace, and never made again
// for that directory. A directory that holds streams (logs or a catalog)
// but no readable id was restored, copied or damaged: it gets a new id
// (logged, with the reason), because a cluster must never take it for the
// replicas it may once have held. Backups do not carry the file, so a
// restored directory is always a new incarnation.
package datadir
