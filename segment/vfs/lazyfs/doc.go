// Package lazyfs is a FUSE file system for tests that loses what a power
// cut would lose, in the manner of Jepsen's LazyFS: a real process (the
// ironbus binary) runs with its data directory on the mount and makes real
// system calls (pwrite, fdatasync, fsync of a directory, fallocate, rename,
// mmap), and the test decides afterwards which unsynced writes survive.
//
// It owns the mount and the fault switches, not the durability model. Every
// file operation the kernel forwards is applied to a [vfs.MemFS], the same
// model the in-process crash tests of package segment use: per file, the
// bytes the last fsync or fdatasync made durable and the writes issued since;
// per directory, the entries the last fsync of that directory made durable.
// [Disk.CutPower] unmounts, replaces the image with a seeded
// [vfs.MemFS.CrashClone] (drop every unsynced change, keep a random subset in
// order, keep it reordered, or keep it with one write torn at a sector
// boundary) and mounts the surviving image again. One model for both
// harnesses means a failure on the binary can be replayed in process.
//
// Invariants:
//   - Nothing acknowledged by fsync or fdatasync is ever dropped by a cut;
//     nothing unsynced is ever promised to survive one. A new file or a
//     rename is durable only after the fsync of its directory; a shrinking
//     truncate only after fsync (not fdatasync), as vfs.MemFS defines.
//   - A cut is a pure function of the image and its seed: the same run and
//     seed give the same surviving bytes.
//   - [FailSync] makes every fsync, fdatasync and directory fsync fail with
//     EIO and persist nothing; [DeadDisk] makes every operation fail with
//     EIO, as a disk that has gone away.
//
// Limits, on purpose: FUSE cannot do O_DIRECT here, so the broker runs with
// --io-mode buffered (its default) on the mount; file locks are the kernel's
// local flock emulation; times, owners and permissions are not modelled.
// The mount needs Linux, /dev/fuse and root (mount(2) is called directly, no
// fusermount); elsewhere [Disk.Mount] returns an error wrapping
// [ErrUnavailable].
package lazyfs
