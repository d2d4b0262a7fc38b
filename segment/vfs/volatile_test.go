package vfs

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// TestVolatileFSHoldsBytesOnce: the data reads back, syncs keep no second
// copy, a mapping is a view, and the capacity refuses as a full disk does.
func TestVolatileFSHoldsBytesOnce(t *testing.T) {
	v := NewVolatileFS(1 << 10)
	if err := v.MkdirAll("/d"); err != nil {
		t.Fatal(err)
	}
	f, err := v.OpenFile("/d/a", ReadWrite|Create)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Allocate(0, 512); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("hello"), 100); err != nil {
		t.Fatal(err)
	}
	if err := f.SyncData(); err != nil {
		t.Fatal(err)
	}
	node := f.(volatileFile).node
	if node.durable != nil || node.pending != nil {
		t.Fatalf("a sync kept %d durable bytes and %d pending writes", len(node.durable), len(node.pending))
	}
	got := make([]byte, 5)
	if _, err := f.ReadAt(got, 100); err != nil || string(got) != "hello" {
		t.Fatalf("read %q, %v", got, err)
	}
	mapping, err := f.(Mapper).Map(512)
	if err != nil {
		t.Fatal(err)
	}
	if view := mapping.Bytes(); len(view) != 512 || &view[0] != &node.data[0] || !bytes.Equal(view[100:105], []byte("hello")) {
		t.Fatal("the mapping is not a view of the stored bytes")
	}
	if _, err := f.WriteAt(make([]byte, 600), 512); !IsNoSpace(err) {
		t.Fatalf("a write past the capacity: %v", err)
	}
	if err := f.Truncate(10); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 1000), 10); err != nil {
		t.Fatalf("a truncate did not give the space back: %v", err)
	}
	if _, err := f.ReadAt(got, 2000); !errors.Is(err, io.EOF) {
		t.Fatalf("read past the end: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.SyncData(); !errors.Is(err, ErrClosed) {
		t.Fatalf("sync after close: %v", err)
	}
	if err := v.Remove("/d/a"); err != nil {
		t.Fatal(err)
	}
	g, err := v.OpenFile("/d/b", ReadWrite|Create)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteAt(make([]byte, 1<<10), 0); err != nil {
		t.Fatalf("a removal did not give the space back: %v", err)
	}
}
