package consumer

import (
	"testing"

	"github.com/ironbus/ironbus/segment/vfs"
)

// TestDamagedCheckpointRestartsFromTheOldestRecord: a group whose
// checkpoint (and its previous copy) cannot be decoded opens at the
// oldest record held, so nothing is skipped, instead of refusing to open
// for good.
func TestDamagedCheckpointRestartsFromTheOldestRecord(t *testing.T) {
	mem := vfs.NewMemFS()
	d, l := newLog(t, mem, 20)
	defer d.Close()
	// Intact framing, undecodable payload: both copies.
	for range 2 {
		if err := l.WriteCheckpoint(checkpointPrefix+"g", []byte{checkpointV2, 1}); err != nil {
			t.Fatal(err)
		}
	}
	g, err := Open(l, "g", Options{Start: StartPosition{Kind: StartLatest}})
	if err != nil {
		t.Fatalf("a damaged checkpoint stopped the group: %v", err)
	}
	if got := g.Committed(); got != l.FirstOffset() {
		t.Fatalf("group resumed at %d, want the oldest record %d", got, l.FirstOffset())
	}
}
