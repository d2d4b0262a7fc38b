package broker

import (
	"testing"

	"github.com/ironbus/ironbus/segment"
)

// TestUsageSurvivesRestart: a stream's owner is in the catalog, so a
// restart counts what each identity created from the data directory
// again; each partition is charged its preallocated segment.
func TestUsageSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.CreateStream(StreamSettings{Name: "made", Partitions: 2, Owner: "maker"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ProduceStream([]byte("published"), "writer"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ProduceStream([]byte("anonymous"), ""); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	again := openTestBroker(t, Config{DataDir: dir})
	want := []StreamUsage{
		{Name: "anonymous", Partitions: 1, Bytes: segment.DefaultSegmentSize},
		{Name: "made", Owner: "maker", Partitions: 2, Bytes: 2 * segment.DefaultSegmentSize},
		{Name: "published", Owner: "writer", Partitions: 1, Bytes: segment.DefaultSegmentSize},
	}
	got := again.Usage()
	if len(got) != len(want) {
		t.Fatalf("usage %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("usage %+v, want %+v", got[i], want[i])
		}
	}
	if again.PreallocatedBytes() != segment.DefaultSegmentSize {
		t.Errorf("preallocated %d", again.PreallocatedBytes())
	}
}
