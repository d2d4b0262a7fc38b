package upgrade

// syncDir is a no-op on Windows, where a directory cannot be opened for
// flushing; NTFS journals the rename itself. IronBus ships for Linux; this
// file only keeps the package compiling there.
func syncDir(string) error { return nil }
