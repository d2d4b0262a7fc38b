package dedup

import (
	"time"

	"github.com/ironbus/ironbus/segment/vfs"
)

// Options configure a Window.
type Options struct {
	// Window is how long an id is remembered, in broker time.
	Window time.Duration
	// MaxIDs caps the ids remembered; beyond it the oldest are forgotten
	// early, and counted.
	MaxIDs int
	// Now reads broker time.
	Now func() time.Duration
}

// Window is one partition's message-id window. Its methods are called
// with the partition's append lock held.
type Window struct{}

// Open opens (creating it if needed) the window kept in dir.
func Open(fsys vfs.FS, dir string, opts Options) (*Window, error) { return &Window{}, nil }

// Lookup returns the offset of the first record published with id inside
// the window.
func (w *Window) Lookup(id []byte) (offset uint64, found bool) { return 0, false }

// Insert remembers id at offset from now.
func (w *Window) Insert(id []byte, offset uint64) {}

// Close persists what is needed and closes the window's files.
func (w *Window) Close() error { return nil }
