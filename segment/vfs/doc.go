// Package vfs is the file-system seam of the storage engine: every byte the
// segment package reads or writes goes through the [FS] and [File] interfaces
// defined here, never through package os directly.
//
// It owns these implementations:
//
//   - [OS], the real file system. Platform code lives in files named by suffix:
//     os_linux.go (fdatasync, fallocate, O_DIRECT), os_darwin.go (F_FULLFSYNC,
//     because a plain fsync on macOS does not flush the drive cache) and
//     os_other.go (portable fallbacks). Optional capabilities that a platform
//     lacks return an error wrapping [ErrNotSupported], and the caller picks a
//     fallback at run time; nothing is chosen at compile time.
//   - [MemFS], an in-memory file system that remembers which bytes and which
//     directory entries were made durable by a sync. [MemFS.CrashClone]
//     returns the file system as it could look after a power cut: every
//     synced byte and entry survives, plus a seeded random part of the
//     unsynced writes, possibly reordered and with one of them torn.
//   - [VolatileFS], a MemFS that models no durability and holds each byte
//     once: the storage of `serve --storage memory`, where nothing is meant
//     to survive the process.
//   - [Inject], a wrapper that consults an [Injector] before every operation
//     and can fail it (fsync error, EIO, ENOSPC, short write, read error).
//
// Subpackage lazyfs serves a MemFS over FUSE (Linux, tests only), so a
// real process can run on it and have its power cut.
//
// Invariants:
//   - Implementations never retry a failed sync and never hide an error: a
//     failed SyncData means the caller must assume the unsynced bytes are gone
//     (the fsyncgate lesson); deciding what to do about it is policy, and
//     policy lives in package segment.
//   - A file's size change is durable only after Sync (not SyncData) when it
//     shrinks the file; a directory entry change (create, rename, remove) is
//     durable only after SyncDir of its directory. Code that relies on
//     anything weaker fails the crash tests run on MemFS.
//
// Package vfs owns no policy: it does not decide when to sync, what to keep
// after an error, or how to lay data out.
package vfs
