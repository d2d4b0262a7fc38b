package dedup

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironbus/ironbus/segment/vfs"
)

// fakeClock is broker time moved by hand.
type fakeClock struct{ now atomic.Int64 }

func (c *fakeClock) Now() time.Duration      { return time.Duration(c.now.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.now.Add(int64(d)) }

func idOf(i int) []byte { return []byte(fmt.Sprintf("order-%06d", i)) }

type harness struct {
	t     *testing.T
	fs    vfs.FS
	clock *fakeClock
	opts  Options
}

func newHarness(t *testing.T, opts Options) *harness {
	h := &harness{t: t, fs: vfs.NewMemFS(), clock: &fakeClock{}}
	h.clock.now.Store(int64(time.Hour)) // broker time well past zero
	if opts.Window == 0 {
		opts.Window = 2 * time.Minute
	}
	opts.Now = h.clock.Now
	h.opts = opts
	return h
}

func (h *harness) open() *Window {
	h.t.Helper()
	w, err := Open(h.fs, "log/dedup", h.opts)
	if err != nil {
		h.t.Fatal(err)
	}
	return w
}

// durableUpTo makes every offset below end durable, and none above.
func durableUpTo(end uint64) func(context.Context, uint64) uint64 {
	return func(context.Context, uint64) uint64 { return end }
}

func expectFound(t *testing.T, w *Window, id []byte, offset uint64) {
	t.Helper()
	got, ok := w.Lookup(id)
	if !ok || got != offset {
		t.Fatalf("Lookup(%s) = %d, %v; want %d, true", id, got, ok, offset)
	}
}

func expectFresh(t *testing.T, w *Window, id []byte) {
	t.Helper()
	if got, ok := w.Lookup(id); ok {
		t.Fatalf("Lookup(%s) = %d, true; want a fresh id", id, got)
	}
}
