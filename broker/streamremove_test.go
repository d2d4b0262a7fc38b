package broker

import (
	"os"
	"path/filepath"
	"testing"
)

// A removal cut by a crash after its commit point (the directory renamed
// out of the scan, the catalog not yet written) is finished at the next
// boot: the stream is gone, not adopted back, and nothing is left over.
func TestBootFinishesAnInterruptedRemoval(t *testing.T) {
	dir := t.TempDir()
	b := openOnce(t, dir)
	createTestStream(t, b, "gone", 2)
	createTestStream(t, b, "kept", 1)
	b.Drain()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	streams := filepath.Join(dir, "streams")
	if err := os.Rename(filepath.Join(streams, "gone"), filepath.Join(streams, ".removed-gone-1")); err != nil {
		t.Fatal(err)
	}
	reopened, err := Open(Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	if _, ok := reopened.existingStream("gone"); ok {
		t.Fatal("the removed stream came back")
	}
	if _, ok := reopened.catalog.Catalog().Stream("gone"); ok {
		t.Fatal("the catalog still names the removed stream")
	}
	if _, ok := reopened.existingStream("kept"); !ok {
		t.Fatal("the other stream is gone")
	}
	if _, err := os.Stat(filepath.Join(streams, ".removed-gone-1")); !os.IsNotExist(err) {
		t.Fatalf("the renamed directory is left over: %v", err)
	}
}

// rm renames the files out of the scan, forgets the stream and deletes
// the files; a restart does not bring it back.
func TestRemoveStreamSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	b := openOnce(t, dir)
	createTestStream(t, b, "gone", 3)
	if _, _, err := b.RemoveStream("gone"); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "streams"))
	if len(entries) != 0 {
		t.Fatalf("left in streams/: %v", entries)
	}
	b.Drain()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	reopened, err := Open(Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	if _, ok := reopened.existingStream("gone"); ok {
		t.Fatal("the removed stream came back")
	}
}

// openOnce opens an engine on dir for a test that closes it itself.
func openOnce(t *testing.T, dir string) *Broker {
	t.Helper()
	b, err := Open(Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func createTestStream(t testing.TB, b *Broker, name string, partitions uint32) {
	t.Helper()
	if _, _, err := b.CreateStream(StreamSettings{Name: name, Partitions: partitions}); err != nil {
		t.Fatal(err)
	}
}
