package clicontext

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad feeds arbitrary bytes as contexts.json: a hand-edited or torn
// file must give contexts or ErrCorrupt, never a panic, and a current
// context that is not listed must be ErrNotFound.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(`{"schema":"ironbus.contexts.v1","current":"pi","contexts":[{"name":"pi","addr":"10.0.0.7:7777"}]}`))
	f.Add([]byte(`{"schema":"ironbus.contexts.v1","current":"gone","contexts":[]}`))
	f.Add([]byte(`{"schema":"ironbus.contexts.v2"}`))
	f.Add([]byte(`{"contexts":[null]}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, fileName), data, 0o600); err != nil {
			t.Fatal(err)
		}
		store := NewStore(dir)
		if _, _, err := store.List(); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("List: untyped error %v", err)
		}
		if _, _, err := store.Current(); err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNotFound) {
			t.Fatalf("Current: untyped error %v", err)
		}
	})
}
