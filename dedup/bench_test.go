package dedup

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/ironbus/ironbus/segment/vfs"
)

// BenchmarkLookupInsert is the append path's cost per record with a
// message id: a Lookup that misses, then an Insert, with generations
// sealing to an in-memory file system as they fill.
func BenchmarkLookupInsert(b *testing.B) {
	clock := &fakeClock{}
	w, err := Open(vfs.NewMemFS(), "log/dedup", Options{Window: 2 * time.Minute, Now: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	id := make([]byte, 16)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		binary.LittleEndian.PutUint64(id, uint64(i))
		if _, ok := w.Lookup(id); ok {
			b.Fatal("a fresh id was found")
		}
		w.Insert(id, uint64(i))
		clock.advance(time.Microsecond)
	}
	b.StopTimer()
	_ = w.Close()
}
